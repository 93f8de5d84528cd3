"""Embedding sharding planners: which GPU holds which piece of each table, and on which tiers.

Schemes (`sharding.scheme`, or `auto` per table by size against a GPU's embedding HBM budget):
`data_parallel` (replica on every GPU, up to `data_parallel_max_bytes`), `table_wise` (up to
`max_shard_fraction` of the budget), `table_row_wise` (rows split over one host's GPUs, up to that
many budgets), `row_wise` (rows split over all GPUs), `column_wise` (columns split in
`column_shard_dim` slices, each placed like a table).

Planners (`sharding.planner`):
- `size_greedy`: capacity-balanced, the common size-based default. Shards largest first, each to
  the GPU with the fewest bytes assigned so far (HBM and host tiers; a table-row-wise table to the
  least-filled host); the whole shard in HBM if it fits, else whole on the first slower placement
  with room on that host (`uvm_cache`: all rows in DDR behind an HBM cache of `cache_load_factor`
  of them, or of as many as the GPU's HBM still holds).
- `recshard` (RecShard, arXiv 2201.10095; sim/workloads/embedding/recshard.py): per-row access frequencies decide
  how many of each shard's hottest rows stay in HBM and which tier holds the rest, and a cost model
  balances the GPUs (relaxation lower bound, greedy, refinement, optional MILP); its plan reports
  the optimality gap against the bound. Under `scheme: auto` it also proposes other table-wise /
  table-row-wise thresholds, and improves the best proposals by local search on the planner's
  estimate of an iteration (sim/workloads/embedding/proposals.py, search.py).
- `manual`: per table scheme, ranks, placement and hot-row fraction (`sharding.tables`).
A plan that cannot fit raises a ScenarioError saying by how much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.errors import ScenarioError
from sim.memory.tiers import ZipfRows
from sim.models.dlrm import Table
from sim.workloads.embedding.cost import CostModel, Shard

DENSE_BYTES_PER_PARAM = 16.0  # assumption: fp32 weights + grads + two Adam states for the dense part


@dataclass
class Capacities:
    hbm_bytes_per_gpu: float  # for embeddings, after the reservation and dense model
    host_tier_bytes: dict[str, float]  # per host, slow tier name -> bytes, fastest first


@dataclass
class Plan:
    planner: str
    shards: list[Shard]
    capacities: Capacities
    tier_labels: dict[str, str]  # tier name -> placement label ('ddr5-host' -> 'uvm')
    lower_bound_s: float | None = None
    max_load_s: float | None = None
    gap: float | None = None
    milp: object = None  # recshard: sim.workloads.embedding.milp.MilpResult of the reduced problem
    estimate_s: float | None = None  # recshard: its estimate of an iteration (estimate.py), what it minimised


def gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


# ------------------------------------------------------------------------------------------------
# shards from tables


def capacities(model: CostModel, dense_params: float) -> Capacities:
    cfg, hw = model.cfg, model.hw
    hbm = hw.gpu.memory * (1.0 - cfg.sharding.hbm_reserved_fraction) - dense_params * DENSE_BYTES_PER_PARAM
    tiers: dict[str, float] = {}
    for p in cfg.placements:
        if p != "hbm":
            name = model.tier_for(p)
            tiers.setdefault(name, model.host_tier_capacity(name))
    return Capacities(hbm, tiers)


def choose_scheme(
    table: Table, stored_bytes: float, model: CostModel, budget: float, max_shard_fraction: float | None = None
) -> str:
    """The table's scheme (manual, forced, or `auto` by size); `max_shard_fraction` overrides the
    config's (recshard tries several)."""
    sh = model.cfg.sharding
    frac = sh.max_shard_fraction if max_shard_fraction is None else max_shard_fraction
    manual = sh.tables.get(table.name) if sh.planner == "manual" else None
    if manual is not None:
        return manual.scheme
    if sh.scheme != "auto":
        return sh.scheme
    if stored_bytes <= sh.data_parallel_max_bytes:
        return "data_parallel"
    if stored_bytes <= frac * budget:
        return "table_wise"
    if model.hw.nodes > 1 and stored_bytes <= frac * budget * model.gpus_per_node:
        return "table_row_wise"
    return "row_wise"


def make_shards(
    tables: list[Table], model: CostModel, budget: float, max_shard_fraction: float | None = None
) -> list[Shard]:
    cfg, w, gpn = model.cfg, model.num_gpus, model.gpus_per_node
    shards: list[Shard] = []
    laws: dict[tuple[int, float], ZipfRows] = {}  # shards of equal rows and skew share one access law

    def shard(t: Table, scheme: str, k: int, n: int, rows: int, dim: int, lookups: float, **placed) -> Shard:
        key = (int(rows), t.zipf_alpha)
        if key not in laws:
            laws[key] = ZipfRows(rows, t.zipf_alpha)
        return Shard(t, scheme, k, n, rows, dim, lookups, **placed, law=laws[key])

    for t in tables:
        lookups_per_sample = 1.0 / model.dedup(t)
        stored = t.rows * (t.row_bytes + model.state_bytes_for(t.dim))
        scheme = choose_scheme(t, stored, model, budget, max_shard_fraction)
        lookups = cfg.batch_size_per_gpu * w * t.pooling * lookups_per_sample
        if scheme == "data_parallel":
            shards.append(
                shard(
                    t,
                    scheme,
                    0,
                    1,
                    t.rows,
                    t.dim,
                    cfg.batch_size_per_gpu * t.pooling * lookups_per_sample,
                    rank=-1,
                    hbm_rows=t.rows,
                )
            )
        elif scheme in ("row_wise", "table_row_wise"):
            n = w if scheme == "row_wise" else gpn
            edges = np.linspace(0, t.rows, n + 1).round().astype(int)
            for k in range(n):
                shards.append(
                    shard(
                        t,
                        scheme,
                        k,
                        n,
                        max(1, edges[k + 1] - edges[k]),
                        t.dim,
                        lookups / n,
                        rank=k if scheme == "row_wise" else -1,
                    )
                )
        elif scheme == "column_wise":
            n = max(1, math.ceil(t.dim / cfg.sharding.column_shard_dim))
            dims = np.diff(np.linspace(0, t.dim, n + 1).round().astype(int))
            shards += [shard(t, scheme, k, n, t.rows, int(dims[k]), lookups) for k in range(n)]
        else:
            shards.append(shard(t, scheme, 0, 1, t.rows, t.dim, lookups))
    return shards


# ------------------------------------------------------------------------------------------------
# planners


def size_greedy(shards: list[Shard], model: CostModel, caps: Capacities) -> Plan:
    w, gpn = model.num_gpus, model.gpus_per_node
    free = np.full(w, caps.hbm_bytes_per_gpu)
    host_free = {t: np.full(w // gpn, c) for t, c in caps.host_tier_bytes.items()}
    assigned = np.zeros(w)  # bytes per GPU, HBM and host tiers together
    slow = [p for p in model.cfg.placements if p != "hbm"]
    done: set[str] = set()
    for s in sorted(shards, key=lambda s: (-s.rows * model.stored_row_bytes(s), s.name)):
        if s.scheme == "data_parallel" or s.table.name in done:
            continue
        if s.scheme == "table_row_wise":  # the whole table on the least-filled host
            done.add(s.table.name)
            host = int(np.argmin(assigned.reshape(-1, gpn).sum(axis=1)))
            for x in (x for x in shards if x.table.name == s.table.name):
                x.host = host
                _place_whole(x, host * gpn + x.index, free, host_free, assigned, model, slow)
        elif s.scheme == "row_wise":
            _place_whole(s, s.rank, free, host_free, assigned, model, slow)
        else:
            _place_whole(s, int(np.argmin(assigned)), free, host_free, assigned, model, slow)
    return Plan("size_greedy", shards, caps, labels(model))


def _place_whole(s: Shard, g: int, free, host_free, assigned, model: CostModel, slow: list[str]) -> None:
    """Whole shard in GPU g's HBM if it fits, else on the first tier of g's host with room."""
    need = s.rows * model.stored_row_bytes(s)
    assigned[g] += need
    if need <= free[g]:
        s.rank, s.hbm_rows = g, s.rows
        free[g] -= need
        return
    if _spill(s, g, slow, need, free, host_free, model):
        return
    host = g // model.gpus_per_node
    room = max([f[host] for f in host_free.values()], default=0.0)
    raise ScenarioError(
        f"size_greedy: table {s.name} ({gb(need)}) fits neither in GPU {g}'s HBM ({gb(free[g])} free) "
        f"nor on a tier of host {host} ({gb(room)} free), short by {gb(need - max(room, free[g]))}",
        path="workload.tables",
    )


def _spill(s: Shard, g: int, slow: list[str], need: float, free, host_free, model: CostModel) -> bool:
    host = g // model.gpus_per_node
    for p in slow:
        tier = model.tier_for(p)
        if host_free[tier][host] < need:
            continue
        cache = 0
        if p == "uvm_cache":  # the cache_load_factor share of rows, or as many as the GPU's HBM has room for
            cache = min(
                math.ceil(model.cfg.sharding.cache_load_factor * s.rows),
                int(max(free[g], 0.0) // model.stored_row_bytes(s)),
            )
        s.rank, s.hbm_rows, s.cache_rows, s.tier_rows = g, 0, cache, {tier: s.rows}
        free[g] -= cache * model.stored_row_bytes(s)
        host_free[tier][host] -= need
        return True
    return False


def manual(shards: list[Shard], model: CostModel, caps: Capacities) -> Plan:
    gpn = model.gpus_per_node
    for s in shards:
        spec = model.cfg.sharding.tables[s.table.name]
        if s.scheme in ("table_wise", "column_wise"):
            ranks = spec.ranks or [0]
            s.rank = int(ranks[s.index % len(ranks)])
        elif s.scheme == "table_row_wise":
            s.host = (spec.ranks or [0])[0] // gpn
            s.rank = s.host * gpn + s.index
        if s.scheme == "data_parallel" or spec.placement == "hbm":
            s.hbm_rows = s.rows
            continue
        tier = model.tier_for(spec.placement)
        if spec.placement == "uvm_cache":
            s.cache_rows = math.ceil(model.cfg.sharding.cache_load_factor * s.rows)
            s.tier_rows = {tier: s.rows}
        else:
            s.hbm_rows = int(round((spec.hbm_fraction or 0.0) * s.rows))
            s.tier_rows = {tier: s.rows - s.hbm_rows} if s.rows > s.hbm_rows else {}
    return Plan("manual", shards, caps, labels(model))


def labels(model: CostModel) -> dict[str, str]:
    out = {}
    for p in model.cfg.placements:
        if p != "hbm":
            out.setdefault(model.tier_for(p), "uvm" if p == "uvm_cache" else p)
    return out


def check_capacity(plan: Plan, model: CostModel) -> None:
    """Every GPU's HBM and every host tier within capacity; else a ScenarioError with the excess."""
    w, gpn = model.num_gpus, model.gpus_per_node
    hbm = np.zeros(w)
    tiers: dict[str, np.ndarray] = {t: np.zeros(w // gpn) for t in model.tiers}
    for s in plan.shards:
        ranks = range(w) if s.rank < 0 else [s.rank]
        for r in ranks:
            hbm[r] += model.hbm_bytes(s)
        for t, nbytes in model.tier_bytes(s).items():
            if s.rank >= 0:
                tiers[t][s.rank // gpn] += nbytes
    over = hbm - plan.capacities.hbm_bytes_per_gpu
    if over.max() > 1.0:
        g = int(np.argmax(over))
        raise ScenarioError(
            f"{plan.planner} plan puts {gb(hbm[g])} of embeddings in GPU {g}'s HBM, over its "
            f"{gb(plan.capacities.hbm_bytes_per_gpu)} budget by {gb(over[g])}",
            path="workload.sharding",
        )
    for t, used in tiers.items():
        cap = model.host_tier_capacity(t)
        if used.max() > cap + 1.0:
            h = int(np.argmax(used))
            raise ScenarioError(
                f"{plan.planner} plan puts {gb(used[h])} in host {h}'s {t}, over its {gb(cap)} by {gb(used[h] - cap)}",
                path="workload.placements",
            )


def min_hosts(tables: list[Table], model: CostModel, dense_params: float) -> int:
    """Fewest hosts whose HBM budgets and allowed host tiers hold all tables (rows split freely)."""
    caps = capacities(model, dense_params)
    per_host = model.gpus_per_node * caps.hbm_bytes_per_gpu + sum(caps.host_tier_bytes.values())
    need = sum(t.rows * model.stored_row_bytes_for(t) for t in tables)
    return max(1, math.ceil(need / per_host)) if per_host > 0 else 0


def build_plan(tables: list[Table], model: CostModel, dense_params: float) -> Plan:
    caps = capacities(model, dense_params)
    if caps.hbm_bytes_per_gpu <= 0:
        raise ScenarioError(
            f"the dense model and reservation leave no HBM for embeddings (short by {gb(-caps.hbm_bytes_per_gpu)})",
            path="workload.sharding.hbm_reserved_fraction",
        )
    shards = make_shards(tables, model, caps.hbm_bytes_per_gpu)
    replicas = sum(s.rows * model.stored_row_bytes(s) for s in shards if s.scheme == "data_parallel")
    if replicas > caps.hbm_bytes_per_gpu:
        raise ScenarioError(
            f"data-parallel tables need {gb(replicas)} on every GPU, over the {gb(caps.hbm_bytes_per_gpu)} "
            f"budget by {gb(replicas - caps.hbm_bytes_per_gpu)}",
            path="workload.sharding.data_parallel_max_bytes",
        )
    caps.hbm_bytes_per_gpu -= replicas
    from sim.workloads.embedding.recshard import recshard

    planner = {"size_greedy": size_greedy, "recshard": recshard, "manual": manual}[model.cfg.sharding.planner]
    plan = planner(shards, model, caps)
    caps.hbm_bytes_per_gpu += replicas
    check_capacity(plan, model)
    assign_dram_cache(plan, model)
    return plan


def assign_dram_cache(plan: Plan, model: CostModel) -> None:
    """Split each host's DRAM cache (`workload.dram_cache.capacity`) over the rows its shards keep on
    the cached tiers (scm, ssd), in proportion to their bytes (a per-table cache share, as TorchRec's
    `cache_load_factor`): a cache as large as those rows holds them all. The planners place rows
    without it; the estimate and the simulation count its hits."""
    if not model.cached_tiers:
        return
    gpn = model.gpus_per_node
    regions: dict[int, list[tuple[Shard, str, float]]] = {}
    for s in plan.shards:
        for t, n in s.tier_rows.items():
            if t in model.cached_tiers and n > 0 and s.rank >= 0:
                regions.setdefault(s.rank // gpn, []).append((s, t, n * model.stored_row_bytes(s)))
    for items in regions.values():
        total = sum(b for *_, b in items)
        share = min(1.0, model.dram_cache_bytes / total)
        for s, t, _ in items:
            s.dram_cache_rows[t] = int(math.floor(share * s.tier_rows[t] + 1e-9))
