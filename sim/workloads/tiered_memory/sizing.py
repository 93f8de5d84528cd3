"""The resource estimate of a `kind: tiered_memory` run (sim/engine/cost.py): the pages' state and
one transfer group per epoch; an epoch lasts at least its accesses x the fastest tier's latency /
outstanding accesses (or their bytes over both tiers' bandwidth), so the epochs are bounded by
`duration_s` (and a trace's length).
"""

from __future__ import annotations

import math

from sim.engine.cost import Estimate
from sim.memory.access import load_trace

EVENTS_PER_EPOCH = 12.0  # two transfer groups, a timeout and their flows per epoch
BYTES_PER_PAGE = 100.0  # page state arrays and per-epoch access counts (int64 + float)


def tiered_memory_estimate(cfg, hw, network_model: str) -> Estimate:
    fast, slow = cfg.tiers(hw)
    if cfg.footprint is not None or not cfg.access.trace:
        pages = float(cfg.pages())
    else:
        pages = float(load_trace(cfg.access.trace)[0].max()) + 1
    pages = float(cfg.address_space(int(pages)))  # + the allocation streams' pages
    n = cfg.epoch_accesses
    epoch_s = max(
        n * min(fast.latency, slow.latency) / cfg.outstanding_accesses,
        n * cfg.access.access_bytes / (fast.bandwidth + slow.bandwidth),
    )  # fastest an epoch can go
    epochs = (cfg.duration_s or math.inf) / epoch_s if epoch_s > 0 else math.inf
    if cfg.access.trace:
        epochs = min(epochs, float(load_trace(cfg.access.trace)[1].sum()) / n + 1)
    return Estimate(
        events=EVENTS_PER_EPOCH * epochs,
        flows=4 * epochs,
        simulated_flows=4 * epochs,
        peak_flows=4,
        spans=epochs,
        extra_bytes=pages * BYTES_PER_PAGE,
        path="workload.footprint",
        hint="a smaller footprint or larger page_bytes, a shorter duration_s or larger epoch_accesses",
        notes=[f"{pages:.3g} pages, up to {epochs:.3g} epochs"],
    )
