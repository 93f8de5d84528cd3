"""The planner's estimate of one embedding-training iteration, and the plan as rows and a summary.

`estimate` composes the cost model's uncontended pieces in the order the simulation runs them:

    max(index all-to-all, bottom MLP fwd) + slowest GPU's embedding lookup + pooled all-to-all
    + top/interaction fwd+bwd + max(gradient all-to-all, bottom MLP bwd)
    + slowest GPU's embedding backward/update + all-reduce not hidden behind the last two

with each embedding kernel = max(HBM roofline, host-link traffic, its host's traffic on each shared
tier) and each all-to-all = bottleneck-link time of its flows on the topology. What it leaves out
(contention between phases, GPUs finishing at different times, sampled per-iteration lookups,
flows' max-min sharing) is what the simulation adds; `dcsim run` reports both.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from sim.network.collectives import choose, estimate_s
from sim.workloads.embedding.cost import CostModel, a2a_estimate_s, a2a_flows, comm_matrices, host_tier_loads
from sim.workloads.embedding.planner import Plan
from sim.workloads.embedding.recshard import proxy_s


def dense_split(dense, gemms):
    """(bottom MLP GEMMs, interaction + top MLP GEMMs)."""
    k = dense.bottom_count()
    return gemms[:k], gemms[k:]


def _gemm_s(gpu, gemms, dtype) -> float:
    return float(sum(gpu.gemm_time_s(m, n, k, dtype, b) for _, m, n, k, b in gemms))


def dense_times_s(gpu, config, tables) -> tuple[float, float, float]:
    """(bottom MLP forward, interaction + top MLP forward and backward + loss, bottom MLP backward +
    dense optimizer) seconds on one device: the GEMMs and the memory-bound passes around them
    (`DenseConfig.pointwise_passes`), each a kernel as the simulation runs them."""
    from sim.models.dlrm import DensePasses, backward_gemms

    dims = [t.dim for t in tables]
    gemms = config.dense.dense_gemms(config.batch_size_per_gpu, dims)
    bottom, top = dense_split(config.dense, gemms)
    passes = config.dense.pointwise_passes(config.batch_size_per_gpu, dims)
    dt = config.dense.dtype
    return (
        _gemm_s(gpu, bottom, dt) + DensePasses.time_s(gpu, passes.bottom_fwd),
        _gemm_s(gpu, top + backward_gemms(top), dt) + DensePasses.time_s(gpu, passes.top),
        _gemm_s(gpu, backward_gemms(bottom), dt) + DensePasses.time_s(gpu, passes.bottom_bwd),
    )


def allreduce_bytes(plan: Plan, config, tables) -> tuple[float, float]:
    """(top bucket, bottom bucket) gradient bytes: dense parameters and data-parallel tables."""
    dense = config.dense
    dims = [t.dim for t in tables]
    total = dense.dense_params(dims)
    bottom = sum(k * n + n for k, n in zip(dense.bottom_mlp, dense.bottom_mlp[1:]))
    dp = sum(s.rows * s.dim for s in plan.shards if s.scheme == "data_parallel")
    return (total - bottom + dp) * dense.grad_bytes_per_param, bottom * dense.grad_bytes_per_param


def estimate(plan: Plan, model: CostModel, network, config, tables, a2a_flows_by_kind: dict | None = None) -> dict:
    """The planner's closed-form iteration estimate (per phase, per GPU). `a2a_flows_by_kind`: the
    index, pooled and gradient all-to-alls' flows (`all_to_all_flows`), where the caller has them."""
    gpu, w, gpn = model.hw.gpu, model.num_gpus, model.gpus_per_node
    fwd: dict[int, list] = defaultdict(list)
    bwd: dict[int, list] = defaultdict(list)
    extra = np.zeros((w, 2))
    for s in plan.shards:
        tr = model.traffic(s)
        for r in range(w) if s.rank < 0 else [s.rank]:
            fwd[r] += tr.fwd
            bwd[r] += tr.bwd
            extra[r] += (tr.fwd_hbm_extra_bytes, tr.bwd_hbm_extra_bytes)
    host_fwd, host_bwd = host_tier_loads(fwd, model), host_tier_loads(bwd, model)
    fwd_s = np.array([model.kernel_estimate_s(fwd[r], extra[r, 0], host_fwd.get(r // gpn, {})) for r in range(w)])
    bwd_s = np.array([model.kernel_estimate_s(bwd[r], extra[r, 1], host_bwd.get(r // gpn, {})) for r in range(w)])
    nodes = network.topology.devices
    flows = a2a_flows_by_kind
    if flows is None:
        flows = all_to_all_flows(plan, model, nodes, config)
    routed: dict = {}  # the index and pooled all-to-alls have the same endpoints: routed once
    a2a = {k: a2a_estimate_s(network, f, routed) for k, f in flows.items()}
    bottom_fwd, top_s, bottom_bwd = dense_times_s(gpu, config, tables)
    ar_top, ar_bottom = allreduce_bytes(plan, config, tables)
    ar_s = 0.0
    if w > 1:
        for nbytes in (ar_top, ar_bottom):
            if nbytes > 0:
                _, steps = choose(network, "all_reduce", "auto", nodes, nbytes)
                ar_s += estimate_s(network, steps)
    parts = {
        "index_a2a": max(a2a["index"], bottom_fwd),
        "embedding_fwd": float(fwd_s.max()),
        "pooled_a2a_fwd": a2a["pooled"],
        "dense_top": top_s,
        "grad_a2a_bwd": max(a2a["grad"], bottom_bwd),
        "embedding_bwd": float(bwd_s.max()),
    }
    parts["allreduce_exposed"] = max(0.0, ar_s - parts["grad_a2a_bwd"] - parts["embedding_bwd"])
    hbm = np.zeros(w)
    for s in plan.shards:
        for r in range(w) if s.rank < 0 else [s.rank]:
            hbm[r] += model.hbm_bytes(s)
    return {
        "iteration_s": float(sum(parts.values())),
        "breakdown_s": parts,
        "allreduce_bytes": (ar_top, ar_bottom),
        "hbm_bytes_per_gpu_max": float(hbm.max()),
        "embedding_s_per_gpu": (fwd_s + bwd_s).tolist(),
    }


def all_to_all_flows(plan: Plan, model: CostModel, nodes: list[str], config) -> dict[str, list]:
    """The flows (`a2a_flows`) of an iteration's index, pooled and gradient all-to-alls, by kind."""
    index_m, pooled_m = comm_matrices(plan.shards, model)
    return {
        k: a2a_flows(m, nodes, model.gpus_per_node, config.all_to_all)
        for k, m in (("index", index_m), ("pooled", pooled_m), ("grad", pooled_m.T))
    }


def _ranks_text(ranks: list[int]) -> str:
    ranks = sorted(set(ranks))
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))


def plan_summary(plan: Plan, model: CostModel) -> dict:
    """table -> {scheme, shards, ranks, placement, hbm_fraction, hbm_bytes, slow_bytes, estimated_s}."""
    out: dict[str, dict] = {}
    for s in plan.shards:
        row = out.setdefault(
            s.table.name,
            {
                "scheme": s.scheme,
                "shards": s.count,
                "ranks": [],
                "placement": set(),
                "hbm_rows": 0,
                "rows": s.table.rows,
                "hbm_bytes": 0.0,
                "slow_bytes": 0.0,
                "estimated_s": 0.0,
            },
        )
        row["ranks"].append(s.rank)
        row["placement"].add(s.placement(plan.tier_labels))
        row["hbm_rows"] += s.hbm_rows if s.count > 1 or s.scheme != "column_wise" else s.hbm_rows / s.count
        copies = model.num_gpus if s.rank < 0 else 1
        row["hbm_bytes"] += model.hbm_bytes(s) * copies
        row["slow_bytes"] += sum(model.tier_bytes(s).values())
        row["estimated_s"] += proxy_s(model, s) * copies
    for row in out.values():
        row["ranks"] = "all" if -1 in row["ranks"] else _ranks_text(row["ranks"])
        row["placement"] = "|".join(sorted(row["placement"]))
        row["hbm_fraction"] = min(1.0, row.pop("hbm_rows") / row.pop("rows"))
    return out
