"""The resource estimate of a `kind: collective` run (sim/engine/cost.py): per message size, the
steps x flows per step of each algorithm's schedule (`auto` counts every candidate, as `choose`
builds them all; sim/network/collective_cost.py), plus the background flows.
"""

from __future__ import annotations

import math

from sim.engine.cost import EVENTS_PER_FLOW, Estimate
from sim.network.collective_cost import collective_cost


def collective_estimate(cfg, hw, network_model: str) -> Estimate:
    n = len(cfg.ranks(hw.num_gpus))
    per_host = min(hw.gpus_per_node, n)
    hosts = math.ceil(n / per_host)
    replay = network_model == "flow" and hw.topology.ecmp == "even" and not cfg.background
    est = Estimate(
        path="workload.bytes" if isinstance(cfg.bytes, list) else "hardware.nodes",
        hint="network_model: analytical, fewer ranks (workload.group) or another algorithm",
    )
    for size in cfg.sizes:
        one = collective_cost(cfg.op, cfg.algorithm, n, hosts, per_host, size, replay)
        one.peak_flows += len(cfg.background)
        one.flows += len(cfg.background)
        one.simulated_flows += len(cfg.background)
        est.add(one)
        est.spans += n
    est.events += EVENTS_PER_FLOW * len(cfg.background) * len(cfg.sizes)
    return est
