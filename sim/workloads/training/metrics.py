"""Set up a training run (plan, layout, fidelity), run it, and turn what happened into metrics.

Fidelity decisions (`simulate`):
- ranks `auto`: representatives per equivalence class (training_layout.replica_classes: a straggler
  GPU or link puts its replica in a class of its own) on the analytical network when every TP
  index's DP ring looks alike; all replicas otherwise. `representative` asks for it (an error on
  the flow network, where replicas contend).
- replay `auto`: on where it is exact - the analytical network, or a flow network where each stage
  group is one host or one GPU (its TP/CP traffic then has its scale-up links to itself).
- expert parallelism (ep > 1): the ep replicas of a block are simulated together (one driver, their
  all-to-alls couple them); every block is simulated (no representatives), and on the flow network
  layers replay only where a block is one whole host.

Time split per simulated driver GPU (training_accounting.driver_breakdown), averaged over the GPUs they
stand for: kernels, exposed TP/CP communication (blocking, inside ops), exposed DP/p2p communication
(outside ops, not under any kernel) and the rest, the bubble (idle: pipeline fill and drain, load
imbalance between stages).
"""

from __future__ import annotations

from sim.errors import ScenarioError
from sim.models.training_shapes import CommOp
from sim.network.analytical import AnalyticalNetwork
from sim.workloads.parallel_layout import ParallelLayout
from sim.workloads.training.accounting import driver_breakdown, weighted_mean
from sim.workloads.training.layout import (
    GroupComm,
    dp_rings_symmetric,
    replica_classes,
)
from sim.workloads.training.plan import TrainingPlan
from sim.workloads.training.run import TrainingRun


def fidelity(cluster, config, layout: ParallelLayout) -> tuple[bool, bool]:
    """(representative ranks, replay) for this run."""
    analytical = isinstance(cluster.network, AnalyticalNetwork)
    ranks, replay, ep = config.simulate.ranks, config.simulate.replay, config.parallelism.ep
    if ranks == "representative" and ep > 1:
        raise ScenarioError(
            "representative ranks need ep = 1 (an expert-parallel block's all-to-alls couple its replicas); "
            "allowed: auto, all",
            path="workload.simulate.ranks",
            value=ranks,
        )
    if ranks == "representative" and not analytical:
        raise ScenarioError(
            "representative ranks are exact only without contention: use network_model: analytical or ranks: all",
            path="workload.simulate.ranks",
            value=ranks,
        )
    if ranks == "representative" and not dp_rings_symmetric(layout):
        raise ScenarioError(
            "the DP rings of different TP ranks see different links here; use ranks: all",
            path="workload.simulate.ranks",
            value=ranks,
        )
    representative = ranks == "representative" or (
        ranks == "auto" and analytical and layout.dp > 1 and ep == 1 and dp_rings_symmetric(layout)
    )
    gpn = cluster.hardware.gpus_per_node
    if ep == 1:
        exact_replay = analytical or layout.group_size in (1, gpn)
    else:  # an expert-parallel block has its links to itself when it is one whole host
        block = [dev for e in range(ep) for dev in layout.group(0, e)]
        exact_replay = analytical or (len(block) == gpn and len({dev.host for dev in block}) == 1)
    return representative, (replay == "on" or (replay == "auto" and exact_replay))


def class_pairs(layout: ParallelLayout, plan: TrainingPlan, config) -> list[tuple[int, int]]:
    """Rank pairs of every flow replica 0 sends outside DP: p2p to the next stage group and its
    TP/CP collectives."""
    rank = {dev.node: r for r, dev in enumerate(layout.cluster.devices)}
    pairs = []
    p = layout.pp
    for j in range(plan.virtual_stages - 1):
        a, b = layout.group(j % p, 0), layout.group((j + 1) % p, 0)
        if j % p != (j + 1) % p:
            pairs += [(rank[x.node], rank[y.node]) for x, y in zip(a, b)]
    for s in range(p):
        comm = GroupComm(layout.cluster.network, layout.group(s, 0), layout.tp, layout.cp, config.collective_algorithm)
        pairs += [(rank[x], rank[y]) for x, y in comm.pairs(i for i in plan.stage_items(s) if isinstance(i, CommOp))]
    return pairs


def run_training(sim, cluster, config):
    par = config.parallelism
    layout = ParallelLayout(cluster, par.tp, par.cp, par.pp, par.dp)
    plan = TrainingPlan(config, config.family, cluster.devices[0].spec, config.shape())
    representative, replay = fidelity(cluster, config, layout)
    if representative:
        classes = replica_classes(layout, class_pairs(layout, plan, config), [d.slowdown for d in cluster.devices])
    else:  # every replica (every expert-parallel block of ep replicas)
        classes = [list(range(b, b + par.ep)) for b in range(0, par.dp, par.ep)]
    run = TrainingRun(sim, cluster, layout, plan, config, classes, replay)
    start = sim.now
    yield from run.run()
    return metrics(config, cluster, plan, run, sim.now - start, representative, replay)


def metrics(
    config, cluster, plan: TrainingPlan, run: TrainingRun, total_s: float, representative: bool, replay: bool
) -> dict:
    hw = cluster.hardware
    gpus = cluster.num_gpus
    its = config.iterations
    ends = run.iteration_end_s
    per_iteration = [b - a for a, b in zip([0.0] + ends[:-1], ends)]
    iteration_s = total_s / its
    flop = plan.model_flop_per_iteration
    achieved = flop / (iteration_s * gpus)
    peak = hw.gpu.peak_flop_per_s("bf16")
    rows, executed = [], 0.0
    for g in run.groups.values():
        weight = len(g.members)
        rows.append((weight, driver_breakdown(g.stats, total_s)))
        executed += weight * g.stats.executed_flop * run.layout.group_size
    split = weighted_mean(rows)
    memory = config.memory(hw)
    worst = max(memory, key=lambda m: m.total)
    out = {
        "iteration_s": iteration_s,
        "tokens_per_s": config.tokens_per_iteration / iteration_s,
        "tflop_per_s_per_gpu": achieved / 1e12,
        "mfu": achieved / peak,
        "hfu": executed / its / (iteration_s * gpus) / peak,
        "bubble_fraction": split["bubble_s"] / total_s,
        "exposed_comm_fraction": (split["exposed_tp_cp_s"] + split["exposed_dp_pp_s"] + split.get("exposed_ep_s", 0.0))
        / total_s,
        "peak_memory_per_gpu_bytes": worst.total,
        "memory_per_gpu_bytes": worst.as_dict(),
        "memory_per_stage_bytes": [m.total for m in memory],
        "iteration_s_each": per_iteration,
        "breakdown_s": {k: v / its for k, v in split.items()},
        "model_flop_per_iteration": flop,
        "tokens_per_iteration": config.tokens_per_iteration,
        "sequence_length": config.sequence,
        "micro_batches": config.micro_batches,
        "layers_per_virtual_stage": plan.layers_per_vstage,
        "parallelism": config.parallelism.degrees(),
        "model": config.family.name,
        "params": config.family.params,
        "schedule": config.schedule,
        "recompute": config.recompute,
        "gemm_dtype": config.gemm,
        "simulated_ranks": "representative" if representative else "all",
        "replica_classes": len(run.classes),
        "replay": replay,
        "op_s": {k: c.duration_s for k, c in run.first_captures.items()},
    }
    family = config.family
    if family.expert_layer_params:
        out["moe"] = moe_metrics(config, family, split, its)
    return out


def moe_metrics(config, family, split: dict, iterations: int) -> dict:
    """What the experts did: one GPU's dispatch all-to-all of one layer and micro-batch (the combine
    sends the same back; forward and backward run two each) and the exposed all-to-all time."""
    a2a = family.alltoall_bytes(config.shape())
    ep = config.parallelism.ep
    return {
        "experts": family.spec.experts,
        "experts_per_token": family.spec.experts_per_token,
        "ep": ep,
        "capacity_factor": family.capacity_factor,
        "active_params": family.matmul_params + family.first_params,
        "dispatch_bytes_per_gpu": a2a,
        "dispatch_bytes_sent_per_gpu": a2a * (ep - 1) / ep,
        "exposed_alltoall_s": split.get("exposed_ep_s", 0.0) / iterations,
    }
