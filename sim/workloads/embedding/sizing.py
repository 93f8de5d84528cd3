"""The resource estimate of a `kind: embedding_training` run (sim/engine/cost.py; not the planner's
estimate of an iteration, which is sim/workloads/embedding/estimate.py): per iteration the three
all-to-alls (PXN: n(L+H-2) flows, direct: n(n-1)), two bucketed all-reduces, the tier flows and the
kernels of every GPU; plus the tables' planner arrays.
"""

from __future__ import annotations

from sim.engine.cost import EVENTS_PER_FLOW, EVENTS_PER_KERNEL, Estimate
from sim.network.collective_cost import collective_cost

BYTES_PER_TABLE = 1e4  # assumption: an embedding table, its shards and planner arrays


def embedding_estimate(cfg, hw, network_model: str) -> Estimate:
    explicit, generators = cfg.table_lists()
    tables = len(explicit) + sum(g.count for g in generators)
    n, per_host = hw.num_gpus, hw.gpus_per_node
    hosts = hw.nodes
    pxn = cfg.all_to_all == "pxn" and n > per_host
    a2a = n * (per_host + hosts - 2) if pxn else n * (n - 1)
    allreduce = collective_cost("all_reduce", "auto", n, hosts, per_host, 1e8, replay=False)
    tier_flows = 2 * n * max(1, len(cfg.placements) - 1)
    flows = 3 * a2a + 2 * allreduce.flows + tier_flows
    kernels = n * (3 * (len(cfg.dense.bottom_mlp) + len(cfg.dense.top_mlp) + 2) + 4)
    per_iter = Estimate(  # a collective's flows run as its steps: their events are allreduce.events
        events=EVENTS_PER_FLOW * (3 * a2a + tier_flows) + EVENTS_PER_KERNEL * kernels + 2 * allreduce.events,
        flows=flows,
        simulated_flows=flows,
        peak_flows=a2a + n,
        kernels=kernels,
        spans=kernels + flows,
        listed_flows=3 * a2a + allreduce.listed_flows,
    )
    est = Estimate(
        path="workload.iterations",
        hint="fewer iterations or GPUs, or network_model: analytical",
        extra_bytes=tables * BYTES_PER_TABLE,
        notes=[f"{tables} tables"],
    )
    est.add(per_iter, times=cfg.iterations)
    return est
