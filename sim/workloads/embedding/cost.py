"""The embedding cost model that planners and the simulation share.

A `Shard` is a piece of one table on one GPU (or, for data-parallel tables, a replica on every GPU):
its rows, columns, lookups per iteration, and where its rows live, hottest first: `hbm_rows` in
HBM, then `tier_rows` in host tiers in the order given (e.g. DDR reached as UVM, then SCM), or all
rows in a host tier behind an HBM cache of `cache_rows` (`uvm_cache`).

`CostModel.traffic(shard, lookups)` turns a shard into the memory accesses of one iteration (used by
the simulation as the kernels' traffic, and by the planners' estimates):
- forward (TBE lookup): each lookup reads one row on the tier that holds it (share of lookups per
  tier from the Zipf law), plus index reads and the pooled-output writes in HBM; with a cache
  (`sharding.cache_policy`, a placement policy of sim/memory/policies.py: hit and promotion rates
  in steady state), each promoted miss reads the row and its optimizer state from the host tier,
  writes an evicted dirty one back and is then read from HBM (LRU promotes every miss); misses a
  sampled policy does not promote are read in place from the host tier;
- backward + sparse optimizer (fused, as FBGEMM): read the pooled-output gradients, sort indices,
  and for each distinct row touched read and write the row and its optimizer state on its tier;
  a data-parallel replica instead gets a dense fp32 gradient (all-reduced with the dense model)
  and a dense update of every row.

`comm_matrices` gives the bytes each GPU sends to each other GPU in the index all-to-all and the
pooled-embedding all-to-all (the backward gradient exchange is its transpose), per sharding scheme;
`a2a_flows` turns a matrix into flows (`direct`: one per pair; `pxn`: NCCL's PXN, one NVLink hop to
the GPU on the destination's rail, then one flow per rail per host pair). `a2a_estimate_s` is the
uncontended bottleneck-link time of those flows on the real topology (routes, ECMP, oversubscribed
uplinks), the planner's all-to-all estimate.

`CostModel.kernel_estimate_s` is the uncontended time of one GPU's embedding kernel: the slowest of
its HBM traffic (device roofline), its host-link traffic, and its host's share of each shared tier.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from hardware_models.gpu import DTYPE_BYTES
from hardware_models.topology import tier_read_capacity
from sim.memory.tiers import Access, StaticPlacement, ZipfRows, hbm_tier, placement_policy
from sim.models.dlrm import Table

PLACEMENT_TIER_KIND = {"uvm": "ddr", "uvm_cache": "ddr", "cxl": "cxl", "scm": "scm", "ssd": "ssd"}
CACHED_PLACEMENTS = ("scm", "ssd")  # the placements a host-DRAM cache (workload.dram_cache) sits in front of
INDEX_BYTES = {"int32": 4, "int64": 8}
LENGTH_BYTES = 4  # int32 lengths/offsets per sample and feature (TorchRec KJT)
T = TypeVar("T")


def optimizer_state_bytes(optimizer: str, dim: int) -> float:
    """Per-row optimizer state: rowwise_adagrad one fp32 per row; adagrad one per element; adam two."""
    return {"sgd": 0.0, "rowwise_adagrad": 4.0, "adagrad": 4.0 * dim, "adam": 8.0 * dim}[optimizer]


@dataclass
class Shard:
    table: Table
    scheme: str
    index: int  # shard number within its table
    count: int  # shards of the table
    rows: int
    dim: int
    lookups: float  # expected lookups per iteration (global batch, after dedup)
    rank: int = -1  # GPU; -1 = every GPU (data-parallel replica)
    hbm_rows: int = 0
    tier_rows: dict[str, int] = field(default_factory=dict)  # host tier name -> rows, hot to cold
    cache_rows: int = 0
    host: int | None = None  # table-row-wise: the host holding all shards of the table
    dram_cache_rows: dict[str, int] = field(default_factory=dict)  # scm/ssd tier -> its rows cached in host DRAM
    law: InitVar[ZipfRows | None] = None  # its access law where the caller has it (shards of equal rows share one)

    def __post_init__(self, law: ZipfRows | None) -> None:
        """`dist`: the Zipf law of accesses over the shard's rows (the table's skew)."""
        if law is None:
            law = ZipfRows(self.rows, self.table.zipf_alpha)
        elif (law.rows, law.alpha) != (max(1, int(self.rows)), float(self.table.zipf_alpha)):
            raise ValueError(f"shard {self.name}: its law is over {law.rows} rows at alpha {law.alpha}")
        self.dist = law

    @property
    def name(self) -> str:
        return self.table.name if self.count == 1 else f"{self.table.name}/{self.index}"

    def placement(self, tier_labels: dict[str, str]) -> str:
        if self.cache_rows:
            return "uvm_cache"
        parts = (["hbm"] if self.hbm_rows else []) + [tier_labels.get(t, t) for t, n in self.tier_rows.items() if n]
        return "+".join(parts) or "hbm"


class ZipfRegion:
    """The access law of ranks (lo, hi] of a `ZipfRows`, conditioned on falling there, as a law over
    `hi - lo` rows: what a cache in front of one tier's region sees (the placement policies take it
    where they take a `ZipfRows`: `rows`, `pmf`, `cdf`, `rank_sum`)."""

    def __init__(self, base: ZipfRows, lo: int, hi: int) -> None:
        self.base, self.lo = base, int(lo)
        self.rows = max(1, int(hi) - self.lo)
        self.mass = float(base.cdf(self.lo + self.rows) - base.cdf(self.lo))

    def pmf(self, k) -> np.ndarray:
        return self.base.pmf(np.asarray(k, dtype=float) + self.lo) / self.mass

    def cdf(self, k) -> float:
        return float(self.base.cdf(self.lo + min(float(k), self.rows)) - self.base.cdf(self.lo)) / self.mass

    def rank_sum(self, f, lo: float = 0, hi: float | None = None) -> float:
        hi = self.rows if hi is None else min(self.rows, hi)
        return self.base.rank_sum(lambda k: f(k - self.lo), self.lo + lo, self.lo + hi)


@dataclass
class Traffic:
    fwd: list[Access]
    bwd: list[Access]
    fwd_hbm_extra_bytes: float
    bwd_hbm_extra_bytes: float


class CostModel:
    """Per-shard traffic and time estimates on one cluster's hardware for one workload config."""

    def __init__(self, hardware, config) -> None:
        self.hw = hardware
        self.cfg = config
        self.num_gpus = hardware.num_gpus
        self.gpus_per_node = hardware.gpus_per_node
        self.hbm = hbm_tier(hardware.gpu)
        self.tiers = {t.name: t for t in hardware.memory_tiers}
        self.index_bytes = INDEX_BYTES[config.index_dtype]
        self.pooled_bytes = DTYPE_BYTES[config.pooled_dtype]
        self.cache = placement_policy(config.sharding.cache_policy)  # the HBM cache (uvm_cache)
        self.pinned = StaticPlacement("hottest")  # hottest rows first over tiers
        dram = config.dram_cache
        self.dram_cache = placement_policy(dram.policy)  # the host-DRAM cache in front of scm / ssd
        self.dram_cache_bytes = float(dram.capacity)
        self.dram_tier = next((t.name for t in hardware.memory_tiers if t.kind == "ddr"), None)
        if self.dram_cache_bytes <= 0:
            self.dram_tier = None
        self.cached_tiers = {
            self.tier_for(p) for p in config.placements if p in CACHED_PLACEMENTS and self.dram_tier is not None
        }
        self._per_shard: dict[str, dict[tuple, Any]] = {}  # per_shard's values: name -> shard_key -> value

    # ---- sizes ---------------------------------------------------------------------------------
    def row_bytes(self, shard: Shard) -> float:
        return shard.dim * shard.table.element_bytes

    def state_bytes(self, shard: Shard) -> float:
        return optimizer_state_bytes(self.cfg.optimizer, shard.dim)

    def state_bytes_for(self, dim: int) -> float:
        return optimizer_state_bytes(self.cfg.optimizer, dim)

    def stored_row_bytes_for(self, table: Table) -> float:
        return table.row_bytes + self.state_bytes_for(table.dim)

    def stored_row_bytes(self, shard: Shard) -> float:
        """Bytes a row occupies with its optimizer state."""
        return self.row_bytes(shard) + self.state_bytes(shard)

    def hbm_bytes(self, shard: Shard) -> float:
        return (shard.hbm_rows + shard.cache_rows) * self.stored_row_bytes(shard)

    def tier_bytes(self, shard: Shard) -> dict[str, float]:
        return {t: n * self.stored_row_bytes(shard) for t, n in shard.tier_rows.items()}

    def host_tier_capacity(self, tier: str) -> float:
        """A host tier's bytes for tables: the DDR tier less the host-DRAM cache."""
        cap = self.tiers[tier].capacity
        return cap - self.dram_cache_bytes if tier == self.dram_tier else cap

    def tier_for(self, placement: str) -> str:
        """The host tier name that serves a placement ('uvm' -> the DDR tier ...)."""
        kind = PLACEMENT_TIER_KIND[placement]
        for t in self.hw.memory_tiers:
            if t.kind == kind:
                return t.name
        raise KeyError(placement)

    # ---- traffic of one iteration --------------------------------------------------------------
    def regions(self, shard: Shard) -> list[tuple[str, int, int]]:
        """(tier, lo, hi): ranks (lo, hi] of the shard's rows on each tier, hottest first."""
        out, lo = [], 0
        if shard.hbm_rows:
            out.append(("hbm", 0, shard.hbm_rows))
            lo = shard.hbm_rows
        for tier, n in shard.tier_rows.items():
            if n:
                out.append((tier, lo, lo + n))
                lo += n
        return out

    def shard_key(self, shard: Shard) -> tuple:
        """What a shard's mean traffic, region shares and additive cost depend on: its table, scheme,
        shape, lookups, access law and where its rows live (not its rank: shards with equal keys on
        different GPUs cost the same). Planning re-evaluates the same shards many times over."""
        return (
            shard.table,
            shard.scheme,
            shard.count,
            shard.rows,
            shard.dim,
            shard.lookups,
            shard.dist.rows,
            shard.dist.alpha,
            shard.hbm_rows,
            tuple(shard.tier_rows.items()),
            shard.cache_rows,
            tuple(shard.dram_cache_rows.items()),
        )

    def per_shard(self, name: str, shard: Shard, compute: Callable[[Shard], T]) -> T:
        """`compute(shard)`, computed once per `shard_key` and kept under `name`: for values that
        depend on nothing else (this model's hardware and config aside). The value is shared
        between the calls: do not modify it."""
        values = self._per_shard.setdefault(name, {})
        key = self.shard_key(shard)
        if key not in values:
            values[key] = compute(shard)
        return values[key]

    def region_shares(self, shard: Shard) -> list[tuple[str, float]]:
        """(tier, share of the shard's lookups) per region of `regions` (kept: `per_shard`)."""
        return self.per_shard("region_shares", shard, self._compute_region_shares)

    def _compute_region_shares(self, shard: Shard) -> list[tuple[str, float]]:
        if shard.cache_rows:
            return [("hbm", 1.0)]
        return [(t, self.pinned.share(shard.dist, lo, hi)) for t, lo, hi in self.regions(shard)]

    def traffic(self, shard: Shard, lookups: float | None = None, region_lookups: list[float] | None = None) -> Traffic:
        """Accesses of one iteration; `region_lookups` (sampled counts per region) override the mean.

        The mean traffic (neither `lookups` nor `region_lookups` given) is kept (`per_shard`): do not
        modify it."""
        if lookups is not None or region_lookups is not None:
            return self._compute_traffic(shard, shard.lookups if lookups is None else lookups, region_lookups)
        return self.per_shard("traffic", shard, lambda s: self._compute_traffic(s, s.lookups, None))

    def _compute_traffic(self, shard: Shard, lookups: float, region_lookups: list[float] | None) -> Traffic:
        row, stored = self.row_bytes(shard), self.stored_row_bytes(shard)
        pooled_out = self._pooled_rows(shard) * shard.dim * shard.table.element_bytes
        fwd_extra = lookups * self.index_bytes + pooled_out
        bwd_extra = pooled_out + 2 * lookups * self.index_bytes
        unfused = self.cfg.embedding_backward == "unfused"
        if unfused:  # every lookup's gradient row written out, then read by the update
            bwd_extra += 2 * lookups * shard.dim * shard.table.element_bytes
        if shard.scheme == "data_parallel":  # dense fp32 gradient of the replica, then a dense update
            bwd_extra += shard.rows * shard.dim * 4.0 + 2 * shard.rows * stored
        fwd: list[Access] = []
        bwd: list[Access] = []
        if shard.cache_rows:
            tier = next(iter(shard.tier_rows))
            misses = lookups * (1.0 - self.cache.hit_rate(shard.dist, shard.cache_rows))
            fills = min(misses, lookups * self.cache.promotion_rate(shard.dist, shard.cache_rows))
            fwd += [
                Access("hbm", lookups - misses + fills, row),
                Access(tier, fills, stored),
                Access(tier, fills, stored, write=True),
                Access("hbm", fills, stored, write=True),
            ]
            if misses > fills:  # misses the policy does not promote are read in place (UVM)
                fwd.append(Access(tier, misses - fills, row))
            updated = lookups if unfused else shard.dist.expected_distinct(lookups)
            bwd += [Access("hbm", updated, stored), Access("hbm", updated, stored, write=True)]
            return Traffic(fwd, bwd, fwd_extra, bwd_extra)
        shares = self.region_shares(shard)
        counts = region_lookups if region_lookups is not None else [lookups * s for _, s in shares]
        for (tier, lo, hi), n in zip(self.regions(shard), counts):
            updated = n if unfused else shard.dist.expected_distinct(lookups, lo, hi)  # rows read-modify-written
            if shard.dram_cache_rows.get(tier, 0) > 0:
                self._dram_cached(shard, tier, lo, hi, n, lookups, updated, fwd, bwd)
                continue
            fwd.append(Access(tier, n, row))
            bwd += [Access(tier, updated, stored), Access(tier, updated, stored, write=True)]
        return Traffic(fwd, bwd, fwd_extra, bwd_extra)

    def dram_hit_rate(self, shard: Shard, tier: str, lo: int, hi: int) -> tuple[float, float]:
        """(hit rate, fills per access) of the host-DRAM cache over the shard's rows (lo, hi] on `tier`:
        the cache policy's steady state (the HBM cache's model) on that region's access law."""
        region = cast(ZipfRows, ZipfRegion(shard.dist, lo, hi))  # duck-typed: the policies read rows/pmf/cdf/rank_sum
        rows = shard.dram_cache_rows.get(tier, 0)
        return self.dram_cache.hit_rate(region, rows), self.dram_cache.promotion_rate(region, rows)

    def _dram_cached(
        self, shard: Shard, tier: str, lo: int, hi: int, n: float, lookups: float, distinct: float, fwd, bwd
    ) -> None:
        """Accesses of `n` lookups to a region of a block tier behind the host-DRAM cache (MTrainS):
        hits read by the GPU from DRAM; a filled miss reads the row with its optimizer state from the
        tier (at the tier's access granularity) on its way to the GPU and writes it to DRAM, evicting
        a row that is written back to the tier if an update dirtied it (at most the rows updated in
        DRAM); misses the policy does not admit are read in place. The backward updates the distinct
        rows touched in DRAM as far as the cache holds them (a policy that admits every miss: up to
        its size; one that admits fewer: those among its size of the region's hottest rows), the
        rest in place on the tier.
        (Run-time flows go device <-> tier node: the DRAM fill and the write-back are charged on the
        host link's GPU-to-host direction, idle in the forward, besides the tiers' own bandwidth.)"""
        row, stored, ddr = self.row_bytes(shard), self.stored_row_bytes(shard), self.dram_tier
        assert ddr is not None  # only shards with dram_cache_rows come here
        hit, promo = self.dram_hit_rate(shard, tier, lo, hi)
        misses = n * (1.0 - hit)
        fills = min(misses, n * promo)
        size = shard.dram_cache_rows[tier]
        if fills < misses * (1.0 - 1e-9):  # not every miss is admitted: the touched rows among the hottest
            distinct_cached = shard.dist.expected_distinct(lookups, lo, min(hi, lo + size))
        else:
            distinct_cached = distinct
        in_cache = min(distinct_cached, float(size))
        fwd += [
            Access(ddr, n - misses, row),
            Access(tier, fills, stored),
            Access(ddr, fills, stored, write=True),
            Access(tier, min(fills, in_cache), stored, write=True),
        ]
        if misses > fills:
            fwd.append(Access(tier, misses - fills, row))
        bwd += [Access(ddr, in_cache, stored), Access(ddr, in_cache, stored, write=True)]
        if distinct > in_cache:
            bwd += [Access(tier, distinct - in_cache, stored), Access(tier, distinct - in_cache, stored, write=True)]

    def _pooled_rows(self, shard: Shard) -> float:
        """Pooled outputs this shard computes per iteration (samples of the batch it serves)."""
        batch = self.cfg.batch_size_per_gpu
        if shard.scheme == "data_parallel":
            return batch / self.pooled_dedup(shard.table)
        return batch * self.num_gpus / self.pooled_dedup(shard.table)

    def dedup(self, table: Table) -> float:
        """RecD: the table's duplicates per distinct value in a batch (its own, else `workload.dedup`)."""
        return self.cfg.dedup if table.dedup is None else table.dedup

    def pooled_dedup(self, table: Table) -> float:
        """How many samples share one pooled output (RecD dedup of the pooled all-to-all; 1: none)."""
        return self.dedup(table) if self.cfg.dedup_pooled else 1.0

    # ---- uncontended time of one GPU's embedding kernel ----------------------------------------
    def kernel_estimate_s(
        self, accesses: list[Access], extra_hbm: float, host_tier_bytes: dict[tuple[str, bool], float]
    ) -> float:
        """max(HBM roofline, host-link reads, host-link writes, the host's traffic on each shared tier).

        `host_tier_bytes`: bytes the whole host (all its GPUs) reads / writes on each tier in this
        phase, keyed (tier, write)."""
        gpu = self.hw.gpu
        gathered = 0.0
        link_read = link_write = 0.0
        for a in accesses:
            moved = a.count * (self.hbm if a.tier == "hbm" else self.tiers[a.tier]).bytes_moved(a.access_bytes)
            if a.tier == "hbm":
                gathered += moved
            elif a.write:
                link_write += moved
            else:
                link_read += moved
        link = self.hw.host_link.achieved_bytes_per_s
        times = [gpu.memory_time_s(extra_hbm, gather_bytes=gathered), link_read / link, link_write / link]
        for (tier, write), nbytes in host_tier_bytes.items():
            spec = self.tiers[tier]
            times.append(nbytes / (spec.write_bandwidth_bytes_per_s if write else tier_read_capacity(spec)))
        return max(times)

    def access_time_s(self, tier: str, row_bytes: float) -> float:
        """Uncontended time of one random row access on a tier as seen by one GPU."""
        if tier == "hbm":
            eff = self.hw.gpu.efficiency
            return self.hbm.bytes_moved(row_bytes) / (self.hw.gpu.memory_bandwidth * (eff.gather or eff.memory))
        spec = self.tiers[tier]
        rate = min(self.hw.host_link.achieved_bytes_per_s, tier_read_capacity(spec) / self.gpus_per_node)
        return spec.bytes_moved(row_bytes) / rate


def dram_cache_hit_rate(shards: list[Shard], model: CostModel) -> float:
    """Share of the lookups to the cached tiers' rows served by the host-DRAM cache (expected)."""
    hits = total = 0.0
    for s in shards:
        for tier, lo, hi in model.regions(s):
            if tier in model.cached_tiers and s.rank >= 0:
                n = s.lookups * model.pinned.share(s.dist, lo, hi)
                hit = model.dram_hit_rate(s, tier, lo, hi)[0] if s.dram_cache_rows.get(tier, 0) > 0 else 0.0
                hits, total = hits + n * hit, total + n
    return hits / total if total > 0 else 0.0


# ------------------------------------------------------------------------------------------------
# all-to-all traffic


def comm_matrices(shards: list[Shard], model: CostModel) -> tuple[np.ndarray, np.ndarray]:
    """(index bytes, pooled-embedding bytes): [src rank, dst rank] for one iteration's forward.

    A shard's owner o gets the same index bytes from every rank and sends the same pooled bytes to
    every rank, more to its own host's ranks where the shard is table-row-wise; so each owner's
    column of `index` and row of `pooled` are per-owner sums (added shard by shard, in order)."""
    cfg, w, gpn = model.cfg, model.num_gpus, model.gpus_per_node
    b = cfg.batch_size_per_gpu
    index_in = [0.0] * w  # per owner: bytes from each rank
    pooled_out = [0.0] * w  # per owner: bytes to each rank of another host
    pooled_local = [0.0] * w  # per owner: bytes to each rank of its own host
    for s in shards:
        if s.scheme == "data_parallel":
            continue
        d = model.dedup(s.table)
        pe = model.pooled_bytes / model.pooled_dedup(s.table)
        inverse = b * LENGTH_BYTES if d > 1 else 0.0  # RecD inverse indices, one per sample
        o = s.rank
        share = 1.0 / s.count if s.scheme in ("row_wise", "table_row_wise") else 1.0
        index_in[o] += b * (s.table.pooling / d * share * model.index_bytes + LENGTH_BYTES) + inverse
        if s.scheme in ("table_wise", "column_wise", "row_wise"):
            to_each = b * s.dim * pe  # row-wise: partial sums, reduced at the receiver
        else:  # table-row-wise: reduce-scatter in the host, then a2a
            pooled_local[o] += b * w / gpn * s.dim * pe
            to_each = b / gpn * s.dim * pe
        pooled_local[o] += to_each
        pooled_out[o] += to_each
    host = np.arange(w) // gpn
    index = np.repeat(np.array(index_in)[None, :], w, axis=0)
    pooled = np.where(host[:, None] == host[None, :], np.array(pooled_local)[:, None], np.array(pooled_out)[:, None])
    np.fill_diagonal(index, 0.0)
    np.fill_diagonal(pooled, 0.0)
    return index, pooled


def a2a_flows(
    matrix: np.ndarray, devices: list[str], gpus_per_node: int, algorithm: str
) -> list[tuple[str, str, float, int, int]]:
    """Flows (src node, dst node, bytes, first source rank, dst rank) of an all-to-all of `matrix`.

    `pxn`: intra-host flows i->j carry i's data for rank j and for rank j's rail peers on other
    hosts; inter-host flows go rail to rail (A/g_j -> B/g_j) with everything host A has for B/g_j.
    The first source rank of a PXN rail flow is -1-host (it waits for the whole host).
    Flows come source host by source host: its intra-host flows (i, j), then its rail flows (B, j)."""
    w, gpn = len(devices), gpus_per_node
    if algorithm == "direct" or w <= gpn:
        src, dst = np.nonzero(matrix)
        return _flow_tuples(devices, src, dst, matrix[src, dst], src)
    hosts = w // gpn
    m = matrix.reshape(hosts, gpn, hosts, gpn)
    off_diagonal = ~np.eye(gpn, dtype=bool)
    flows: list[tuple[str, str, float, int, int]] = []
    for a in range(hosts):
        intra = m[a, :, a, :] + m[a, :, :, :].sum(axis=1) - m[a, :, a, :]  # [i, j]: to j and j's rail
        i, j = np.nonzero((intra > 0) & off_diagonal)
        flows += _flow_tuples(devices, a * gpn + i, a * gpn + j, intra[i, j], a * gpn + i)
        rail = m[a].sum(axis=0)  # [host b, j]
        rail[a] = 0.0  # its own host: the intra-host flows
        b, j = np.nonzero(rail > 0)
        flows += _flow_tuples(devices, a * gpn + j, b * gpn + j, rail[b, j], np.full(len(j), -1 - a))
    return flows


def _flow_tuples(devices: list[str], src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, first: np.ndarray) -> list:
    """(src node, dst node, bytes, first source rank, dst rank) per entry of the rank arrays."""
    return list(
        zip(
            [devices[r] for r in src.tolist()],
            [devices[r] for r in dst.tolist()],
            nbytes.tolist(),
            first.tolist(),
            dst.tolist(),
        )
    )


def a2a_estimate_s(network, flows, routed: dict | None = None) -> float:
    """Bottleneck-link time of flows on the topology (even ECMP split) plus the longest path latency
    (of each flow's first path). `routed`: routes of earlier calls by their endpoints, kept there."""
    if not flows:
        return 0.0
    topo = network.topology
    srcs, dsts = [f[0] for f in flows], [f[1] for f in flows]
    nbytes = np.array([float(f[2]) for f in flows])
    ends = (tuple(srcs), tuple(dsts))
    if routed is not None and ends in routed:
        batch = routed[ends]
    else:
        batch = topo.route_batch(srcs, dsts) if len(flows) > 1 else None
        if routed is not None:
            routed[ends] = batch
    if batch is None:  # per-pair routes (memory tiers, media)
        load = np.zeros(topo.num_links)
        latency = 0.0
        for src, dst, size in zip(srcs, dsts, nbytes.tolist()):
            paths = [list(p) for p in topo.routes(src, dst) if p]
            for p in paths:
                load[p] += size / len(paths)
            if paths:
                latency = max(latency, topo.path_latency_s(tuple(paths[0])))
    else:
        per_path = nbytes[batch.owner] * np.asarray(batch.share, dtype=float)
        load = np.bincount(batch.flat, np.repeat(per_path, batch.lengths), minlength=topo.num_links)
        real = np.flatnonzero(batch.lengths > 0)
        first = real[np.unique(batch.owner[real], return_index=True)[1]]  # each flow's first path
        latency = float(batch.latency[first].max()) if len(first) else 0.0
    return float((load / topo.capacity).max()) + latency


def host_tier_loads(per_gpu: dict[int, list[Access]], model: CostModel) -> dict[int, dict[tuple[str, bool], float]]:
    """Bytes each host reads / writes on each host tier, keyed (tier, write), given per-GPU accesses."""
    out: dict[int, dict[tuple[str, bool], float]] = defaultdict(lambda: defaultdict(float))
    for rank, accesses in per_gpu.items():
        host = rank // model.gpus_per_node
        for a in accesses:
            if a.tier != "hbm":
                out[host][(a.tier, a.write)] += a.count * model.tiers[a.tier].bytes_moved(a.access_bytes)
    return out
