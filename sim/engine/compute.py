"""Compute streams: each device runs kernels one at a time per stream, and counts what it ran.

A `Device` wraps a hardware `DeviceSpec` with named streams (at least `compute` and `comm`), each a
SimPy resource of capacity one, like CUDA streams: kernels on one stream serialise, kernels on
different streams overlap (communication hides under compute).

Its counters - busy seconds per stream (`busy_s`) and FLOPs done (`flop_done`) - are read by
anyone and written only through its own API:
- `run(name, duration_s, stream, flop, ...)`: a SimPy process that waits for the stream, holds it
  for the kernel's duration (times `slowdown`), records a span and counts the time and FLOPs;
- `record(stream, busy_s, flop)`: counts time and FLOPs that passed without a SimPy wait of its own
  (kernels a caller ran back to back on a stream it holds, a GPU mirroring another's work);
- `usage()` / `add_usage(usage, times)`: a snapshot of the counters, and adding what a snapshot
  difference holds `times` over (exact replay of repeated work, sim/engine/replay.py).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from hardware_models.gpu import DeviceSpec
from sim.engine.simulation import Simulation

DEFAULT_STREAMS = ("compute", "comm")


@dataclass(frozen=True)
class DeviceUsage:
    """A device's counters at one instant (or their change over an interval)."""

    busy_s: dict[str, float]
    flop: float

    def since(self, before: DeviceUsage) -> DeviceUsage:
        """What was added from `before` to this snapshot."""
        return DeviceUsage({k: v - before.busy_s.get(k, 0.0) for k, v in self.busy_s.items()}, self.flop - before.flop)


class Device:
    def __init__(
        self, sim: Simulation, node: str, spec: DeviceSpec, host: int, streams: tuple[str, ...] = DEFAULT_STREAMS
    ) -> None:
        self.sim = sim
        self.node = node
        self.spec = spec
        self.host = host
        self.streams: dict[str, simpy.Resource] = {}  # created on first use (16K devices, few used)
        self.busy_s = {name: 0.0 for name in streams}  # seconds each stream was busy (written by record)
        self.flop_done = 0.0  # FLOPs of the kernels run (written by record)
        self.slowdown = 1.0  # kernel time multiplier: a straggler GPU (sim/cluster/stragglers.py)

    def stream(self, name: str) -> simpy.Resource:
        if name not in self.streams:
            self.streams[name] = simpy.Resource(self.sim.env, capacity=1)
            self.busy_s.setdefault(name, 0.0)
        return self.streams[name]

    def record(self, stream: str, busy_s: float, flop: float = 0.0) -> None:
        """Count `busy_s` seconds on `stream` and `flop` FLOPs."""
        self.busy_s[stream] = self.busy_s.get(stream, 0.0) + busy_s
        self.flop_done += flop

    def usage(self) -> DeviceUsage:
        return DeviceUsage(dict(self.busy_s), self.flop_done)

    def add_usage(self, usage: DeviceUsage, times: int = 1) -> None:
        """Count what `usage` (a difference of snapshots) holds, `times` over."""
        for stream, seconds in usage.busy_s.items():
            self.busy_s[stream] = self.busy_s.get(stream, 0.0) + seconds * times
        self.flop_done += usage.flop * times

    def run(
        self,
        name: str,
        duration_s: float,
        stream: str = "compute",
        flop: float = 0.0,
        nbytes: float = 0.0,
        category: str = "compute",
    ) -> simpy.Process:
        """Run a kernel of known duration on `stream`; returns the SimPy process."""
        return self.sim.process(self._run(name, duration_s, stream, flop, nbytes, category))

    def _run(
        self, name: str, duration_s: float, stream: str, flop: float, nbytes: float, category: str
    ) -> Generator[simpy.Event, object, None]:
        with self.stream(stream).request() as req:
            yield req
            start = self.sim.now
            duration_s *= self.slowdown
            yield self.sim.timeout(duration_s)
            self.record(stream, duration_s, flop)
            self.sim.span(self.node, stream, name, start, nbytes=nbytes, flop=flop, category=category)

    # Convenience wrappers on the hardware cost functions ---------------------------------
    def gemm(
        self, name: str, m: float, n: float, k: float, dtype: str = "bf16", batch: float = 1, stream: str = "compute"
    ) -> simpy.Process:
        t = self.spec.gemm_time_s(m, n, k, dtype, batch)
        return self.run(name, t, stream, flop=2.0 * m * n * k * batch)

    def memory_kernel(self, name: str, nbytes: float, stream: str = "compute") -> simpy.Process:
        return self.run(name, self.spec.memory_time_s(nbytes), stream, nbytes=nbytes)
