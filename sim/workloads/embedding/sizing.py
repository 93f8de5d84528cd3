"""The resource estimate of a `kind: embedding_training` run (sim/engine/cost.py; not the planner's
estimate of an iteration, which is sim/workloads/embedding/estimate.py): per iteration the three
all-to-alls (PXN: n(L+H-2) flows, direct: n(n-1)), two bucketed all-reduces, the tier flows and the
kernels of every GPU; plus the tables' planner arrays.

Events: every GPU runs its dense kernels (the model's GEMMs forward and backward and its pointwise
passes, counted from the same DLRM graph the run uses) and two embedding kernels, each a process on
its compute stream (`EVENTS_PER_DEVICE_KERNEL`); an all-to-all is one bulk transfer per source (each
GPU, and with PXN each host's rail transfer), whose flows finish over a few network updates; the
all-reduces run as collective steps.
"""

from __future__ import annotations

from sim.engine.cost import EVENTS_PER_DEVICE_KERNEL, EVENTS_PER_FLOW, Estimate
from sim.models.dlrm import backward_gemms
from sim.network.collective_cost import collective_cost

BYTES_PER_TABLE = 1e4  # assumption: an embedding table, its shards and planner arrays
# events per all-to-all source: its process's start and end and the network updates at which its
# flows finish (measured: the 1,024-GPU iteration's 17,231 updates for 3 x 1,152 sources, ~5 each)
EVENTS_PER_A2A_SOURCE = 5.0
# its events are light: the 1,024-GPU iteration's 466K events took 14.4-15.3 s on a 2-core VM at
# 0.41-0.43x the reference speed (~13 us each there), the 128-GPU one's 64K 2.0 s (~13 us;
# `python benchmarks/run.py --no-startup --only embedding-1024gpu embedding-128gpu --repeats 3`,
# 2026-11-29, medians), the shipped 1- and 2-host scenarios ~7-15 us, against the median run's ~55 us
# (EVENTS_PER_S, sim/scenario/estimate.py); 0.26 puts those runs at 0.5-1.0x their estimates
EMBEDDING_EVENT_COST = 0.26


def embedding_estimate(cfg, hw, network_model: str) -> Estimate:
    explicit, generators = cfg.table_lists()
    tables = len(explicit) + sum(g.count for g in generators)
    n, per_host = hw.num_gpus, hw.gpus_per_node
    hosts = hw.nodes
    pxn = cfg.all_to_all == "pxn" and n > per_host
    a2a = n * (per_host + hosts - 2) if pxn else n * (n - 1)
    sources = n + hosts if pxn else n
    allreduce = collective_cost("all_reduce", "auto", n, hosts, per_host, 1e8, replay=False)
    tier_flows = 2 * n * max(1, len(cfg.placements) - 1)
    flows = 3 * a2a + 2 * allreduce.flows + tier_flows
    dims = [t.dim for t in explicit] + [g.dim for g in generators for _ in range(g.count)]
    kernels = n * (dense_kernels(cfg, dims) + 2)  # + the embedding lookup forward and its backward update
    per_iter = Estimate(  # a collective's flows run as its steps: their events are allreduce.events
        events=EVENTS_PER_DEVICE_KERNEL * kernels
        + EVENTS_PER_A2A_SOURCE * 3 * sources
        + EVENTS_PER_FLOW * tier_flows
        + 2 * allreduce.events,
        flows=flows,
        simulated_flows=flows,
        peak_flows=a2a + n,
        kernels=kernels,
        spans=kernels + flows,
        listed_flows=3 * a2a + allreduce.listed_flows,
        event_cost=EMBEDDING_EVENT_COST,
    )
    est = Estimate(
        path="workload.iterations",
        hint="fewer iterations or GPUs, or network_model: analytical",
        extra_bytes=tables * BYTES_PER_TABLE,
        notes=[f"{tables} tables"],
    )
    est.add(per_iter, times=cfg.iterations)
    return est


def dense_kernels(cfg, dims: list[int]) -> int:
    """Dense kernels one GPU runs per iteration with tables of these `dims`: the forward GEMMs, their
    input- and weight-gradient GEMMs and the pointwise passes around them (sim/models/dlrm.py, as the
    run builds them)."""
    gemms = cfg.dense.dense_gemms(cfg.batch_size_per_gpu, dims)
    passes = cfg.dense.pointwise_passes(cfg.batch_size_per_gpu, dims)
    return len(gemms) + len(backward_gemms(gemms)) + len(passes.bottom_fwd) + len(passes.top) + len(passes.bottom_bwd)
