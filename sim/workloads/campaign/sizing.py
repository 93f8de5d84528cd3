"""The resource estimate of a `kind: training_campaign` run (sim/engine/cost.py): one event per
checkpoint cycle and a few per failure, per replica and compared interval, plus the checkpoint
flows, and the training run that gives the iteration time (sim/workloads/training/sizing.py).
"""

from __future__ import annotations

import math

from sim.engine.cost import EVENTS_PER_FLOW, Estimate
from sim.workloads.training.sizing import training_estimate


def campaign_estimate(cfg, hw, network_model: str) -> Estimate:
    gpus, gpn = hw.num_gpus, hw.gpus_per_node
    rates = [f.rate_per_s(gpus, gpn) for f in cfg.faults]
    failures = sum(rates) * cfg.horizon + sum(len(f.at or []) for f in cfg.faults)
    interval = cfg.checkpoint.interval
    if interval == "young-daly":
        total = cfg.checkpoint.total_bytes(gpus)
        stall_s = (
            total / cfg.storage.bandwidth
            if cfg.checkpoint.mode == "blocking"
            else total / gpus / hw.host_link.bandwidth
        )
        unexpected = sum(r for f, r in zip(cfg.faults, rates) if not f.planned)
        interval = math.sqrt(2 * stall_s / unexpected) if unexpected > 0 else cfg.horizon
    intervals = [interval, *cfg.checkpoint.compare_intervals]
    cycles = sum(cfg.horizon / max(i, cfg.iteration_s or 0.0) for i in intervals)  # iteration_s: None with training
    histories = cfg.replicas * (cycles + 3 * failures * len(intervals))
    io_flows = 3 * gpus
    est = Estimate(
        events=histories + EVENTS_PER_FLOW * io_flows,
        flows=io_flows,
        simulated_flows=io_flows,
        peak_flows=gpus,
        listed_flows=gpus,
        spans=io_flows,
        path="workload.replicas",
        hint="fewer replicas or compare_intervals, or a shorter horizon",
    )
    if getattr(cfg, "training", None) is not None:  # one training run first gives the iteration time
        est.add(training_estimate(cfg.training, hw, network_model))
    return est
