"""`kind: embedding_training` — DLRM training with sharded embedding tables over tiered memory.

The tables (sim/models/dlrm.py) are sharded by a planner (sim/workloads/embedding/planner.py) over the GPUs' HBM and the
hosts' slower tiers; then every iteration runs on every GPU as TorchRec does:

1. index all-to-all (flows: each GPU sends its batch's indices, lengths and, with RecD dedup, inverse
   indices to the owners of each shard) while the bottom MLP runs on the compute stream;
2. embedding lookup: one fused kernel per GPU whose traffic is HBM reads (device roofline) and
   host-tier reads as flows from `h{i}/{tier}` over the host link (GPUs of a host share the tier);
   per-iteration lookups are drawn (Poisson total, multinomial split over tiers, seeded);
3. pooled-embedding all-to-all (flows; each owner starts sending when its lookup ends);
4. interaction and top MLP forward and backward (GEMMs on the compute stream);
5. gradient all-to-all back to the owners (flows) while the bottom MLP backward runs;
6. fused embedding backward + sparse optimizer: rows and optimizer state of the distinct rows
   touched are read and written on their tiers;
7. dense gradients all-reduced in two buckets (top after the top backward, bottom after the bottom
   backward; data-parallel tables in the first), overlapped with 5-6. The iteration ends when every
   GPU is done (synchronous training).

RecD (`dedup` > 1: average duplicates per distinct value within a batch) divides index bytes and
lookups by `dedup` and adds one inverse index per sample; with `dedup_pooled` the pooled embeddings
are exchanged deduplicated too (expanded at the receiver).

Metrics: `iteration_s`, `samples_per_s`, `load_imbalance` (max / mean embedding kernel time over
GPUs), `slow_tier_accesses_per_iteration`, `hbm_bytes_per_gpu_max`, `plan`, `planner_estimate_s`
(the planner's cost model, sim/workloads/embedding/estimate.py) beside the simulated time, and
`breakdown_s` (mean per GPU: the waits and kernels of steps 1-7, summing to the iteration time;
a wait includes waiting for slower GPUs) and `breakdown_s_critical_gpu` (the same for the GPU that
finished each iteration last).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Discriminator, Field, Tag, field_validator

from hardware_models.strict import StrictModel
from hardware_models.units import Bytes
from sim.errors import ScenarioError
from sim.memory.tiers import TieredMemory
from sim.models.dlrm import DenseConfig, TableConfig, TableGenerator, backward_gemms, expand_tables
from sim.network.collectives import collective
from sim.workloads.base import WorkloadBase
from sim.workloads.embedding.cost import (
    CACHED_PLACEMENTS,
    PLACEMENT_TIER_KIND,
    CostModel,
    comm_matrices,
    dram_cache_hit_rate,
)
from sim.workloads.embedding.estimate import all_to_all_flows, dense_split, estimate, plan_summary
from sim.workloads.embedding.planner import build_plan, min_hosts

Scheme = Literal["table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel"]
Placement = Literal["hbm", "uvm_cache", "uvm", "cxl", "scm", "ssd"]


def _entry_kind(v) -> str:
    if isinstance(v, dict):
        return "generator" if "count" in v else "table"
    return "generator" if isinstance(v, TableGenerator) else "table"


TableEntry = Annotated[
    Annotated[TableConfig, Tag("table")] | Annotated[TableGenerator, Tag("generator")], Discriminator(_entry_kind)
]


class ManualTable(StrictModel):
    scheme: Scheme = "table_wise"
    ranks: list[int] | None = Field(
        None, description="table/column-wise: shard ranks; table-row-wise: a rank of the host"
    )
    placement: Placement = "hbm"
    hbm_fraction: float | None = Field(None, ge=0, le=1, description="hottest rows kept in HBM, rest in placement")


class ShardingConfig(StrictModel):
    planner: Literal["size_greedy", "recshard", "manual"] = "recshard"
    scheme: Literal["auto", "table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel"] = "auto"
    max_shard_fraction: float = Field(0.5, gt=0, description="auto: table-wise up to this share of a GPU's budget")
    data_parallel_max_bytes: Bytes = Field(0, ge=0, description="auto: replicate tables up to this size")
    column_shard_dim: int = Field(64, ge=1)
    hbm_reserved_fraction: float = Field(0.15, ge=0, lt=1, description="TorchRec's default storage reservation (15%)")
    cache_load_factor: float = Field(
        0.2, gt=0, le=1, description="uvm_cache: cached share of rows (TorchRec default 0.2)"
    )
    cache_policy: CachePolicy = Field(
        "lru", description="uvm_cache: placement policy of the HBM cache (sim/memory/policies.py, steady state)"
    )
    refine_rounds: int = Field(500, ge=0)
    milp_max_binaries: int = Field(
        0, ge=0, description="recshard: also solve the reduced MILP up to this many binaries (0: off)"
    )
    milp_node_limit: int = Field(20, ge=1, description="recshard: branch-and-bound nodes (deterministic)")
    tables: dict[str, ManualTable] = Field(default_factory=dict, description="manual planner: per-table plan")


CachePolicy = Literal["lru", "static_hot_rows", "static", "numa_balancing", "tpp"]


class DramCacheConfig(StrictModel):
    capacity: Bytes = Field(
        0, ge=0, description="host DRAM per host caching rows of the scm / ssd placements (MTrainS); 0: no cache"
    )
    policy: CachePolicy = Field("lru", description="its policy: the HBM cache's model (sim/memory/policies.py)")


class Config(WorkloadBase):
    kind: Literal["embedding_training"]
    batch_size_per_gpu: int = Field(4096, ge=1)
    tables: list[TableEntry] = Field(
        description="explicit tables and/or generators {count, rows, dim, pooling, zipf_alpha, seed}; "
        "one generator mapping alone is accepted too"
    )
    dense: DenseConfig = DenseConfig()
    optimizer: Literal["sgd", "rowwise_adagrad", "adagrad", "adam"] = "rowwise_adagrad"
    sharding: ShardingConfig = ShardingConfig()
    placements: list[Placement] = Field(default_factory=lambda: ["hbm", "uvm"], min_length=1)
    dram_cache: DramCacheConfig = Field(
        default_factory=DramCacheConfig, description="host-DRAM cache in front of the scm / ssd tiers"
    )
    dedup: float = Field(
        1.0, ge=1.0, description="RecD: average duplicates per distinct value in a batch (tables may set their own)"
    )
    dedup_pooled: bool = Field(True, description="RecD: exchange deduplicated pooled embeddings")
    index_dtype: Literal["int32", "int64"] = "int64"
    embedding_backward: Literal["fused", "unfused"] = Field(
        "fused",
        description="fused: one kernel updates each distinct row touched (FBGEMM's table-batched "
        "embeddings, as TorchRec runs); unfused: eager autograd materialises every lookup's gradient "
        "row and updates rows once per lookup (read-modify-write, a row looked up twice is updated twice)",
    )
    pooled_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32", description="all-to-all dtype (TorchRec default fp32)"
    )
    all_to_all: Literal["pxn", "direct"] = "pxn"
    iterations: int = Field(20, ge=1)

    @field_validator("tables", mode="before")
    @classmethod
    def _one_generator(cls, v):
        return [v] if isinstance(v, dict) else v

    def table_lists(self) -> tuple[list[TableConfig], list[TableGenerator]]:
        return (
            [t for t in self.tables if isinstance(t, TableConfig)],
            [g for g in self.tables if isinstance(g, TableGenerator)],
        )

    def check(self, hardware) -> None:
        explicit, generators = self.table_lists()
        if not explicit and not generators:
            raise ScenarioError("needs at least one table or generator", path="workload.tables", value=[])
        names = [t.name for t in explicit]
        if len(set(names)) != len(names):
            raise ScenarioError("table names must be unique", path="workload.tables", value=names)
        if "hbm" not in self.placements:
            raise ScenarioError("placements must include hbm", path="workload.placements", value=self.placements)
        kinds = [t.kind for t in hardware.memory_tiers]
        for i, p in enumerate(self.placements):
            if p != "hbm" and PLACEMENT_TIER_KIND[p] not in kinds:
                raise ScenarioError(
                    f"needs a hardware.memory_tiers entry of kind {PLACEMENT_TIER_KIND[p]} "
                    f"(have: {', '.join(kinds) or 'none'})",
                    path=f"workload.placements.{i}",
                    value=p,
                )
        self._check_dram_cache(hardware)
        sh = self.sharding
        if sh.planner == "manual":
            for name, spec in sh.tables.items():
                bad = [r for r in spec.ranks or [] if not 0 <= r < hardware.num_gpus]
                if bad:
                    raise ScenarioError(
                        f"ranks must be in 0..{hardware.num_gpus - 1}",
                        path=f"workload.sharding.tables.{name}.ranks",
                        value=spec.ranks,
                    )
                if spec.placement != "hbm" and spec.placement not in self.placements:
                    raise ScenarioError(
                        f"placement not in workload.placements {self.placements}",
                        path=f"workload.sharding.tables.{name}.placement",
                        value=spec.placement,
                    )

    def _check_dram_cache(self, hardware) -> None:
        cache = self.dram_cache.capacity
        if cache <= 0:
            return
        ddr = next((t for t in hardware.memory_tiers if t.kind == "ddr"), None)
        if ddr is None:
            raise ScenarioError(
                "a host-DRAM cache needs a hardware.memory_tiers entry of kind ddr (have: "
                f"{', '.join(t.kind for t in hardware.memory_tiers) or 'none'})",
                path="workload.dram_cache.capacity",
                value=cache,
            )
        if cache > ddr.capacity:
            raise ScenarioError(
                f"must be at most the host DDR tier's capacity {ddr.capacity:.6g} bytes ({ddr.name})",
                path="workload.dram_cache.capacity",
                value=cache,
            )
        if not set(self.placements) & set(CACHED_PLACEMENTS):
            raise ScenarioError(
                f"caches the placements {', '.join(CACHED_PLACEMENTS)}, none of which is in workload.placements "
                f"{self.placements}; add one or set capacity 0",
                path="workload.dram_cache.capacity",
                value=cache,
            )


# ------------------------------------------------------------------------------------------------


def prepare(sim, hardware, config: Config):
    """Tables, cost model and plan (shared by `simulate` and `dcsim plan`)."""
    explicit, generators = config.table_lists()
    tables = expand_tables(explicit, generators, sim.rng)
    if config.sharding.planner == "manual":
        missing = [t.name for t in tables if t.name not in config.sharding.tables]
        if missing:
            raise ScenarioError(
                f"manual planner has no entry for {len(missing)} tables: {', '.join(missing[:5])}",
                path="workload.sharding.tables",
            )
    model = CostModel(hardware, config)
    dense_params = config.dense.dense_params([t.dim for t in tables])
    return tables, model, build_plan(tables, model, dense_params)


def plan_report(scenario) -> dict:
    """The plan of an embedding_training scenario as table rows, footer lines and a JSON summary."""
    from hardware_models.units import format_bytes
    from sim.cluster.cluster import Cluster
    from sim.engine.simulation import Simulation

    cfg = scenario.workload
    if cfg.kind != "embedding_training":
        raise ScenarioError("dcsim plan needs an embedding_training workload", path="workload.kind", value=cfg.kind)
    sim = Simulation(scenario.seed)
    cluster = Cluster.build(sim, scenario.hardware, scenario.network_model)
    tables, model, plan = prepare(sim, cluster.hardware, cfg)
    est = estimate(plan, model, cluster.network, cfg, tables)
    summary = plan_summary(plan, model)
    short = {"table_wise": "TW", "row_wise": "RW", "column_wise": "CW", "table_row_wise": "TWRW", "data_parallel": "DP"}
    rows = [
        [
            name,
            short[r["scheme"]],
            str(r["shards"]),
            r["ranks"],
            r["placement"],
            f"{100 * r['hbm_fraction']:.1f}%",
            format_bytes(r["hbm_bytes"]),
            format_bytes(r["slow_bytes"]),
            f"{1e3 * r['estimated_s']:.3f}",
        ]
        for name, r in summary.items()
    ]
    per_gpu = np.asarray(est["embedding_s_per_gpu"])
    hosts = min_hosts(tables, model, cfg.dense.dense_params([t.dim for t in tables]))
    footer = [
        f"planner {plan.planner}: estimated iteration {1e3 * est['iteration_s']:.3f} ms = "
        + " + ".join(f"{k} {1e3 * v:.3f}" for k, v in est["breakdown_s"].items()),
        f"embedding kernels per GPU (fwd+bwd): max {1e3 * per_gpu.max():.3f} ms, mean {1e3 * per_gpu.mean():.3f} ms; "
        f"HBM for embeddings per GPU: max {format_bytes(est['hbm_bytes_per_gpu_max'])} of "
        f"{format_bytes(plan.capacities.hbm_bytes_per_gpu)} budget",
        f"hosts needed to hold {format_bytes(sum(t.rows * model.stored_row_bytes_for(t) for t in tables))} of "
        f"tables with placements {cfg.placements}: {hosts} (scenario has {scenario.hardware.nodes})",
    ]
    if plan.gap is not None:
        footer.append(
            f"balancing cost: most loaded GPU {1e3 * plan.max_load_s:.3f} ms, lower bound "
            f"{1e3 * plan.lower_bound_s:.3f} ms, optimality gap {100 * plan.gap:.1f}%"
        )
    return {
        "title": f"{scenario.name}: {plan.planner} plan, {len(tables)} tables on {model.num_gpus} GPUs",
        "columns": ["table", "scheme", "shards", "ranks", "placement", "rows in HBM", "HBM", "slow tier", "est. ms"],
        "rows": rows,
        "footer": footer,
        "summary": {
            "planner": plan.planner,
            "planner_estimate_s": est["iteration_s"],
            "planner_estimate_breakdown_s": est["breakdown_s"],
            "planner_gap": plan.gap,
            "planner_lower_bound_s": plan.lower_bound_s,
            "min_hosts": hosts,
            "plan": summary,
        },
    }


def exchange(sim, network, flows, ready, gpus_per_node: int, name: str):
    """Start each flow when its source is ready (a PXN rail flow: when its whole host is ready):
    one bulk transfer per source, whose per-flow completions count down each receiver's pending
    flows. Returns one 'all my data arrived' event per rank."""
    done = [sim.env.event() for _ in ready]
    pending = [0] * len(ready)
    by_source: dict[int, list] = {}
    for src, dst, nbytes, first, dst_rank in flows:
        by_source.setdefault(first, []).append((src, dst, nbytes, dst_rank))
        pending[dst_rank] += 1

    def send(first: int, group: list):
        if first >= 0:
            yield ready[first]
        else:
            h = -1 - first
            yield sim.all_of(ready[h * gpus_per_node : (h + 1) * gpus_per_node])
        receivers = np.array([dst_rank for *_, dst_rank in group], dtype=np.int64)

        def arrived(indices: np.ndarray) -> None:
            for rank in receivers[indices].tolist():
                pending[rank] -= 1
                if pending[rank] == 0:
                    done[rank].succeed()

        network.transfer_many([(src, dst, nbytes) for src, dst, nbytes, _ in group], name=name, on_flow_done=arrived)

    for first, group in by_source.items():
        sim.process(send(first, group))
    for rank, n in enumerate(pending):
        if n == 0:
            done[rank].succeed()
    return done


PHASES = (
    "index_a2a",
    "embedding_fwd",
    "pooled_a2a_fwd",
    "dense_top",
    "grad_a2a_bwd",
    "embedding_bwd",
    "allreduce_exposed",
    "sync_wait",
)


def simulate(sim, cluster, config: Config):
    tables, model, plan = prepare(sim, cluster.hardware, config)
    memory = TieredMemory(sim, cluster)
    w, gpn = cluster.num_gpus, cluster.hardware.gpus_per_node
    dims = [t.dim for t in tables]
    gemms = config.dense.dense_gemms(config.batch_size_per_gpu, dims)
    bottom, top = dense_split(config.dense, gemms)
    passes = config.dense.pointwise_passes(config.batch_size_per_gpu, dims)
    index_m, pooled_m = comm_matrices(plan.shards, model)
    nodes = [d.node for d in cluster.devices]
    flows = all_to_all_flows(plan, model, nodes, config)
    est = estimate(plan, model, cluster.network, config, tables, flows)
    ar_top, ar_bottom = est["allreduce_bytes"]
    rng = sim.rng("embedding.lookups")
    shares = [np.array([p for _, p in model.region_shares(s)]) for s in plan.shards]
    shares = [p / p.sum() if p.sum() > 0 else p for p in shares]
    emb_s = np.zeros(w)
    phase_s = np.zeros((w, len(PHASES)))
    critical_s = np.zeros(len(PHASES))
    iter_s = []
    for _ in range(config.iterations):
        per_rank = _sample_traffic(plan.shards, shares, model, rng, w)
        ev = {k: [sim.env.event() for _ in range(w)] for k in ("start", "fwd_done", "top_done", "bottom_done")}
        for e in ev["start"]:
            e.succeed()
        index_in = exchange(sim, cluster.network, flows["index"], ev["start"], gpn, "index_a2a")
        pooled_in = exchange(sim, cluster.network, flows["pooled"], ev["fwd_done"], gpn, "pooled_a2a")
        grad_in = exchange(sim, cluster.network, flows["grad"], ev["top_done"], gpn, "grad_a2a")
        allreduce = sim.process(_allreduce(sim, cluster, ev, ar_top, ar_bottom))
        start = sim.now
        ranks = [
            sim.process(
                _rank(
                    sim,
                    cluster.devices[r],
                    memory,
                    per_rank[r],
                    bottom,
                    top,
                    passes,
                    config.dense.dtype,
                    index_in[r],
                    pooled_in[r],
                    grad_in[r],
                    allreduce,
                    ev["fwd_done"][r],
                    ev["top_done"][r],
                    ev["bottom_done"][r],
                )
            )
            for r in range(w)
        ]
        yield sim.all_of(ranks)
        iter_s.append(sim.now - start)
        this = np.zeros((w, len(PHASES)))
        for r, p in enumerate(ranks):
            marks, emb = p.value
            emb_s[r] += emb
            this[r] = np.diff(marks + [sim.now])
        phase_s += this
        critical_s += this[int(np.argmin(this[:, -1]))]  # the GPU that finished last waited least
    iteration_s = float(np.mean(iter_s))
    slow = {t: n / config.iterations for t, n in memory.accesses.items() if t != "hbm"}
    a2a_bytes = {k: float(m.sum()) for k, m in (("index", index_m), ("pooled_fwd", pooled_m), ("grad_bwd", pooled_m.T))}
    cache = {"dram_cache_hit_rate": dram_cache_hit_rate(plan.shards, model)} if model.cached_tiers else {}
    return {
        "iteration_s": iteration_s,
        "samples_per_s": config.batch_size_per_gpu * w / iteration_s,
        "load_imbalance": float(emb_s.max() / emb_s.mean()) if emb_s.mean() > 0 else 1.0,
        "slow_tier_accesses_per_iteration": float(sum(slow.values())),
        "slow_tier_accesses_by_tier": slow,
        "hbm_lookups_per_iteration": float(memory.accesses.get("hbm", 0.0) / config.iterations),
        "hbm_bytes_per_gpu_max": est["hbm_bytes_per_gpu_max"],
        "embedding_kernel_s_per_gpu_max": float(emb_s.max() / config.iterations),
        "embedding_kernel_s_per_gpu_mean": float(emb_s.mean() / config.iterations),
        "breakdown_s": dict(zip(PHASES, (phase_s.mean(axis=0) / config.iterations).tolist())),
        "breakdown_s_critical_gpu": dict(zip(PHASES, (critical_s / config.iterations).tolist())),
        "planner": plan.planner,
        "planner_estimate_s": est["iteration_s"],
        "planner_estimate_breakdown_s": est["breakdown_s"],
        "planner_estimate_error": (est["iteration_s"] - iteration_s) / iteration_s,
        "planner_lower_bound_s": plan.lower_bound_s,
        "planner_gap": plan.gap,
        "planner_milp_gap": plan.milp.gap if plan.milp is not None else None,
        "min_hosts_for_capacity": min_hosts(tables, model, config.dense.dense_params(dims)),
        "all_to_all_bytes_per_iteration": a2a_bytes,
        "allreduce_bytes_per_iteration": ar_top + ar_bottom,
        "tables": len(tables),
        "embedding_bytes": float(sum(t.rows * model.stored_row_bytes_for(t) for t in tables)),
        "plan": plan_summary(plan, model),
        **cache,
    }


def _sample_traffic(shards, shares, model: CostModel, rng: np.random.Generator, w: int):
    """Per rank: this iteration's (fwd accesses, bwd accesses, fwd extra HBM bytes, bwd extra).

    Lookups per shard ~ Poisson(mean); their split over the shard's tiers ~ multinomial(shares)."""
    out = [[[], [], 0.0, 0.0] for _ in range(w)]
    for s, p in zip(shards, shares):
        for r in range(w) if s.rank < 0 else [s.rank]:
            lookups = float(rng.poisson(s.lookups))
            counts = rng.multinomial(int(lookups), p).astype(float).tolist() if len(p) and not s.cache_rows else None
            tr = model.traffic(s, lookups, counts)
            out[r][0] += tr.fwd
            out[r][1] += tr.bwd
            out[r][2] += tr.fwd_hbm_extra_bytes
            out[r][3] += tr.bwd_hbm_extra_bytes
    return out


def _rank(
    sim,
    dev,
    memory,
    traffic,
    bottom,
    top,
    passes,
    dtype,
    index_in,
    pooled_in,
    grad_in,
    allreduce,
    fwd_done,
    top_done,
    bottom_done,
):
    """One GPU's iteration; returns (phase start times, embedding kernel seconds)."""
    fwd_acc, bwd_acc, fwd_extra, bwd_extra = traffic
    marks = [sim.now]
    for name, m, n, k, b in bottom:
        dev.gemm(name, m, n, k, dtype, b)
    for name, nbytes in passes.bottom_fwd:
        dev.memory_kernel(name, nbytes)
    yield index_in
    marks.append(sim.now)
    emb = yield memory.kernel(dev, "embedding_fwd", fwd_acc, category="embedding", extra_hbm_bytes=fwd_extra)
    fwd_done.succeed()
    marks.append(sim.now)
    yield pooled_in
    marks.append(sim.now)
    yield sim.all_of(
        [dev.gemm(name, m, n, k, dtype, b) for name, m, n, k, b in top + backward_gemms(top)]
        + [dev.memory_kernel(name, nbytes) for name, nbytes in passes.top]
    )
    top_done.succeed()
    marks.append(sim.now)
    bottom_bwd = sim.all_of(
        [dev.gemm(name, m, n, k, dtype, b) for name, m, n, k, b in backward_gemms(bottom)]
        + [dev.memory_kernel(name, nbytes) for name, nbytes in passes.bottom_bwd]
    )
    bottom_bwd.callbacks.append(lambda _e: bottom_done.succeed())
    yield grad_in
    marks.append(sim.now)
    emb += yield memory.kernel(dev, "embedding_bwd_update", bwd_acc, category="embedding", extra_hbm_bytes=bwd_extra)
    yield bottom_bwd
    marks.append(sim.now)
    yield allreduce
    marks.append(sim.now)
    return marks, emb


def _allreduce(sim, cluster, ev, top_bytes, bottom_bytes):
    group = [d.node for d in cluster.devices]
    for key, nbytes in (("top_done", top_bytes), ("bottom_done", bottom_bytes)):
        yield sim.all_of(ev[key])
        if nbytes > 0 and len(group) > 1:
            proc, _ = collective(cluster.network, "all_reduce", group, nbytes, "auto", name=f"allreduce_{key[:-5]}")
            yield proc
