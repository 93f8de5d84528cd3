"""The resource estimate of a `kind: trace_replay` run (sim/engine/cost.py), from the trace files'
sizes without parsing them: about one replayed node per recorded event, an event about
`BYTES_PER_EVENT` of JSON; each node is one kernel-like hold (3 events, a span), each collective a
few flows per rank.
"""

from __future__ import annotations

from sim.engine.cost import EVENTS_PER_KERNEL, Estimate

BYTES_PER_EVENT = 350.0  # a torch.profiler cpu_op event with record_shapes (measured ~300-450 B)
BYTES_PER_NODE_STATE = 600.0  # a Node, its done event and its parsed Event (rounded)


def trace_replay_estimate(cfg, hw, network_model: str) -> Estimate:
    try:
        size = sum(p.stat().st_size for p in cfg.files())
    except Exception:  # noqa: BLE001 - a missing file is reported by check(); estimate stays a guess
        size = 0.0
    nodes = max(size / BYTES_PER_EVENT, 1.0)
    est = Estimate(path="workload.trace", hint="a shorter trace (fewer profiled steps) or fewer ranks")
    est.events = EVENTS_PER_KERNEL * nodes
    est.kernels = nodes
    est.spans = nodes
    est.extra_bytes = BYTES_PER_NODE_STATE * nodes + 4.0 * size  # the parsed JSON while loading
    est.flows = est.simulated_flows = nodes / 100.0
    est.peak_flows = max(hw.num_gpus, 1)
    return est
