"""The resource estimate of a `kind: training` run (sim/engine/cost.py): forward/backward ops of the
simulated stage groups (pp x replicas; one replica per equivalence class where representative);
with replay only one layer per op shape runs kernel by kernel; plus pipeline sends and the DP rings.
A layer's kernels and collectives are those the run will execute (`TrainingPlan`'s layer items);
each collective is counted as ring steps (n - 1 for all-gather and reduce-scatter, 2(n - 1) for
all-reduce) or one direct all-to-all step. On the flow network (even ECMP) a collective whose steps
have all been recorded is replayed as one (sim/network/flow.py, `run_steps`): a layer's collectives
run step by step the first time each group meets them and cost one replay each after that (their
flows are not simulated again).
"""

from __future__ import annotations

from typing import NamedTuple

from sim.engine.cost import EVENTS_PER_STEP, Estimate
from sim.models.training_shapes import CommOp
from sim.workloads.training.plan import TrainingPlan, kernel_runs, overlap_groups

# a run of back-to-back kernels: one event at the last one's end (sim/workloads/training/run.py `_kernels`)
EVENTS_PER_KERNEL_RUN = 1.0
EVENTS_PER_OP = 6.0  # a replayed forward/backward op (hold, p2p send, waits; measured ~7)
# a collective replayed as one on the flow network: its latency timeout, the replay's end and the event
# that wakes the layer, ~4 (measured: the 1,024-GPU MovieGen run on the flow network, 1.78M events for
# 49,152 layers: 36.3 a layer, 7.5 of them its kernel runs' ends and the rest its 7 collectives': 4.1 each)
EVENTS_PER_REPLAYED_COLLECTIVE = 4.0
TRAINING_CLASSES = 1  # assumption: replica equivalence classes on a regular fabric (+1 per straggler)
# Training's events are lighter than the median run's (~55 us, EVENTS_PER_S in sim/scenario/estimate.py).
# Analytical network: measured as `dcsim run --json` wall_s / events on a quiet 2-core machine, 25.7, 27
# and 41 us (llama3-16K seq8k, llama3-16K CP16, moviegen-1024; median 27 us). Flow network: a run's wall
# time was ~33 us per event plus ~6.2 us per simulated flow on a 2-core VM on 2026-11-27 (`dcsim run` of
# moviegen-1024, nemotron-1536, llama3-8K seq8k and the 16K-GPU CP16 benchmark: 62.5, 32.9, 208 and 138 s;
# the fit within 4-25 %): a flow's rate updates touch the flows it shares links with, which no event
# count sees. Scaled to the reference machine by 0.27, the factor that keeps the 16K run's earlier
# calibration (37 s there; that VM's probe read 0.18-0.32 of REFERENCE_EVENTS_PER_S): 8.9 and 1.7 us.
# Measured again on 2026-11-29 after the flow network's later speed-ups, each run between two engine
# probes (0.40-0.41 of REFERENCE_EVENTS_PER_S): the 16K CP16 benchmark, nemotron-1536, moviegen-1024 on
# the flow network, llama3-16K and llama3-8K seq8k on it took 49.6, 15.1, 19.3, 130.5 and 129.4 s, which
# those constants over-estimated by 1.85, 1.60, 2.06, 1.34 and 1.35x: both divided by the median, 1.6
# (the runs then within 0.84-1.29x of their estimates): 5.6 and 1.06 us.
EVENT_COST_BY_NETWORK = {"flow": 0.10, "analytical": 0.49}
SECONDS_PER_SIMULATED_FLOW = {"flow": 1.06e-6}


def training_estimate(cfg, hw, network_model: str) -> Estimate:
    """Simulated stage groups (pp x replicas; one replica per class where representative) run each
    forward/backward op; with replay only the first op of each shape runs layer by layer."""
    c = cfg.with_degrees(hw)
    par = c.parallelism
    tp, cp, pp, dp, ep = par.tp, par.cp, par.pp, par.dp or 1, par.ep
    group = tp * cp * ep  # a stage group; with expert parallelism the block of ep replicas' groups
    representative = ep == 1 and (
        cfg.simulate.ranks == "representative" or (cfg.simulate.ranks == "auto" and network_model == "analytical")
    )
    blocks = max(1, dp // ep)
    replicas = min(dp, TRAINING_CLASSES + len(hw.stragglers)) if representative else blocks
    replay = {"on": True, "off": False}.get(
        cfg.simulate.replay, network_model == "analytical" or group <= hw.gpus_per_node
    )
    ops = 2 * max(1, c.micro_batches) * c.virtual_stages  # forward + backward per micro-batch and chunk
    layers_per_op = max(1, c.family.layers // (pp * c.virtual_stages))
    groups = pp * replicas
    # replay: one layer of each op shape (forward, backward, recompute) per group signature in full
    detailed_layers = 4 * TRAINING_CLASSES if replay else groups * ops * layers_per_op
    layer = layer_costs(c, hw)
    kernels = detailed_layers * layer.kernels
    # layers whose collectives run step by step: all of them, or on the flow network the first one of
    # each op shape per group (the rest replay each collective as one)
    schedules_replayed = network_model == "flow" and hw.topology.ecmp == "even"
    stepped_layers = min(detailed_layers, 3 * groups) if schedules_replayed else detailed_layers
    replayed_layers = detailed_layers - stepped_layers
    collective_flows = detailed_layers * layer.flows
    p2p_flows = groups * ops * group if pp > 1 else 0
    dp_flows = (2 if cfg.data_parallel == "fsdp" else 1) * dp * cp * tp * pp
    flows = collective_flows + p2p_flows + dp_flows
    simulated_flows = flows - replayed_layers * layer.flows
    dp_collectives = (2 if cfg.data_parallel == "fsdp" else 1) * pp * c.virtual_stages * tp  # one streamed ring each
    events = (
        EVENTS_PER_KERNEL_RUN * detailed_layers * layer.kernel_runs
        + EVENTS_PER_STEP * (stepped_layers * layer.steps + dp_collectives)
        + EVENTS_PER_REPLAYED_COLLECTIVE * replayed_layers * layer.collectives
        + (EVENTS_PER_OP * groups * ops if replay else 0.0)
    )
    per_iter = Estimate(
        events=events,
        flows=flows,
        simulated_flows=simulated_flows,
        peak_flows=groups * group + dp_flows / 2,
        kernels=kernels,
        spans=kernels + p2p_flows + dp_flows + groups * ops,
        event_cost=EVENT_COST_BY_NETWORK.get(network_model, 1.0),
        extra_work_s=SECONDS_PER_SIMULATED_FLOW.get(network_model, 0.0) * simulated_flows,
    )
    est = Estimate(
        path="workload.iterations",
        hint="fewer iterations or micro-batches, simulate: {replay: on}, or network_model: analytical",
    )
    est.add(per_iter, times=cfg.iterations)
    return est


class LayerCosts(NamedTuple):
    """What one layer runs, forward and backward averaged."""

    kernels: float
    kernel_runs: float  # runs of back-to-back kernels (each wakes the layer's process once)
    steps: float  # collective steps
    flows: float  # collective flows
    collectives: float


def layer_costs(c, hw) -> LayerCosts:
    """The items the run executes (`TrainingPlan`'s layer parts), grouped as it runs them
    (`overlap_groups`). Every subgroup of a stage group (a block of ep replicas' groups) steps
    together: a ring step moves one flow per member."""
    par = c.parallelism
    size = {"tp": par.tp, "cp": par.cp, "ep": par.ep}
    members = par.tp * par.cp * par.ep
    plan = TrainingPlan(c, c.family, hw.gpu, c.shape())
    kernels = runs = steps = flows = collectives = 0.0
    for part in ("layer fwd", "layer bwd"):
        runs += kernel_runs(overlap_groups(plan.layer_items(part), c.tp_comm_overlap))
        for item in plan.layer_items(part):
            if not isinstance(item, CommOp):
                kernels += 1
                continue
            n = size.get(item.group, 1)
            if n <= 1:
                continue
            collectives += 1
            if item.op == "all_to_all":  # direct: one step, n - 1 flows per member
                steps += 1
                flows += members * (n - 1)
            else:
                ring = 2 * (n - 1) if item.op == "all_reduce" else n - 1
                steps += ring
                flows += ring * members
    return LayerCosts(kernels / 2, runs / 2, steps / 2, flows / 2, collectives / 2)
