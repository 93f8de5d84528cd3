"""Observing and steering a running pipeline: the buffer trace, the `workers: auto` controller and
fault injection.

- `BufferMonitor` samples, every `interval_s`, the trainers' time-averaged buffer fill (fraction of
  their slots holding a batch), the fraction of trainer time stalled, the active workers and their
  core utilisation over the interval: the buffer trace.
- `Autoscaler` acts on each sample (observed buffer levels, nothing else): if trainers stalled, it
  grows the pool towards n / (1 - stall) (at least +1, at most x2 per step); if buffers ran below
  the low watermark it adds one worker; if they stayed above the high watermark and the remaining
  workers would stay under `scale_down_utilisation` of their cores, it retires one. After a change
  it waits for the new workers to start plus one interval. New workers take `startup_s` to start.
- `settle_time_s(trace, low)`: the end of the last interval in which trainers stalled or buffers
  sat below the low watermark; None if the last interval is still unsettled.
- `inject_faults`: `worker_crash` crashes `count` running workers (seeded choice), which the
  master notices after its heartbeat timeout; `storage_node_down` takes `count` storage nodes down
  (reads go to replicas). `restart_after_s` restarts the worker / brings the node back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_STALL_EPS = 1e-3


@dataclass(frozen=True)
class TraceRow:
    t_s: float
    buffer_fill: float
    stall_fraction: float
    workers: int
    core_utilisation: float

    def as_list(self) -> list[float]:
        return [self.t_s, self.buffer_fill, self.stall_fraction, self.workers, self.core_utilisation]


TRACE_COLUMNS = ["t_s", "buffer_fill", "stall_fraction", "workers", "core_utilisation"]


class BufferMonitor:
    def __init__(self, sim, pipeline, interval_s: float, controller=None) -> None:
        self.sim, self.pipeline, self.interval_s = sim, pipeline, interval_s
        self.controller = controller
        self.trace: list[TraceRow] = []
        self._area = self._stall = self._core_s = 0.0

    def run(self):
        while True:
            yield self.sim.timeout(self.interval_s)
            row = self.sample()
            self.trace.append(row)
            if self.controller is not None:
                self.controller.decide(row)

    def sample(self) -> TraceRow:
        trainers, p = self.pipeline.trainers, self.pipeline
        area = sum(t.level_area() for t in trainers)
        stall = sum(t.stall_so_far_s() for t in trainers)
        core_s = sum(w.cores_busy.area() for w in p.workers)
        slots = sum(t.capacity for t in trainers)
        active = p.active()
        cores = sum(w.cores_total for w in active if w.alive)
        d_area, d_stall, d_core = area - self._area, stall - self._stall, core_s - self._core_s
        self._area, self._stall, self._core_s = area, stall, core_s
        return TraceRow(
            self.sim.now,
            d_area / (slots * self.interval_s),
            d_stall / (len(trainers) * self.interval_s),
            len(active),
            d_core / (cores * self.interval_s) if cores else 0.0,
        )


class Autoscaler:
    def __init__(self, sim, pipeline, settings) -> None:
        self.sim, self.pipeline, self.s = sim, pipeline, settings
        self.quiet_until = 0.0
        self.changes: list[tuple[float, int]] = []

    def decide(self, row: TraceRow) -> None:
        if self.sim.now < self.quiet_until:
            return
        p, s = self.pipeline, self.s
        n = len(p.active())
        target = n
        if row.stall_fraction > _STALL_EPS:
            target = min(max(n + 1, math.ceil(n / max(1.0 - row.stall_fraction, 0.5))), 2 * n)
        elif row.buffer_fill < s.low_watermark:
            target = n + 1
        elif (
            row.buffer_fill > s.high_watermark
            and n > 1
            and row.core_utilisation * n / (n - 1) < s.scale_down_utilisation
        ):
            target = n - 1
        target = max(1, min(target, n + len(p.idle_hosts())))
        if target > n:
            for w in p.idle_hosts()[: target - n]:
                p.start(w, s.startup_s)
        elif target < n:
            newest = max((w for w in p.active() if w.alive), key=lambda w: w.started_s, default=None)
            if newest is None:
                return
            p.retire(newest)
        else:
            return
        self.changes.append((self.sim.now, target))
        self.quiet_until = self.sim.now + s.startup_s + s.interval_s


def settle_time_s(trace: list[TraceRow], low_watermark: float) -> float | None:
    """End of the last interval that stalled or ran below the low watermark (0 if none did)."""
    bad = [r for r in trace if r.stall_fraction > _STALL_EPS or r.buffer_fill < low_watermark]
    if not bad:
        return 0.0
    if trace and bad[-1] is trace[-1]:
        return None
    return bad[-1].t_s


def inject_faults(sim, pipeline, storage, faults) -> list:
    return [sim.process(_fault(sim, pipeline, storage, f, i)) for i, f in enumerate(faults)]


def _fault(sim, pipeline, storage, fault, index: int):
    rng = sim.rng(f"faults/{index}")
    yield sim.timeout(fault.at_s)
    if fault.kind == "worker_crash":
        running = [w for w in pipeline.workers if w.alive and not w.retiring]
        victims = sorted(rng.choice(len(running), size=min(fault.count, len(running)), replace=False))
        chosen = [running[int(i)] for i in victims]
        for w in chosen:
            pipeline.crash(w)
        if fault.restart_after_s is not None:
            yield sim.timeout(fault.restart_after_s)
            for w in chosen:
                if w.failed:
                    pipeline.start(w)
    else:
        up = [k for k in range(len(storage.hosts)) if k not in storage.down]
        chosen = [up[int(i)] for i in sorted(rng.choice(len(up), size=min(fault.count, len(up)), replace=False))]
        for k in chosen:
            storage.fail(k)
            sim.span(storage.hosts[k], "storage", "down", sim.now, sim.now, category="fault")
        if fault.restart_after_s is not None:
            yield sim.timeout(fault.restart_after_s)
            for k in chosen:
                storage.recover(k)
