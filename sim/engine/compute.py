"""Compute streams: each device runs kernels one at a time per stream, and counts what it ran.

A `Device` wraps a hardware `DeviceSpec` with named streams (at least `compute` and `comm`), each a
SimPy resource of capacity one (`Stream`, sim/engine/stream.py), like CUDA streams: kernels on one
stream serialise, kernels on different streams overlap (communication hides under compute).

Its counters - busy seconds per stream (`busy_s`) and FLOPs done (`flop_done`) - are read by
anyone and written only through its own API:
- `run(name, duration_s, stream, flop, ...)`: a kernel (`KernelRun`, event for event a SimPy process)
  that waits for the stream, holds it for the kernel's duration (times `slowdown`), records a span
  and counts the time and FLOPs; returns the event of its end;
- `record(stream, busy_s, flop)`: counts time and FLOPs that passed without a SimPy wait of its own
  (kernels a caller ran back to back on a stream it holds, a GPU mirroring another's work);
- `usage()` / `add_usage(usage, times)`: a snapshot of the counters, and adding what a snapshot
  difference holds `times` over (exact replay of repeated work, sim/engine/replay.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from hardware_models.gpu import DeviceSpec
from sim.engine.simulation import Simulation
from sim.engine.stream import Stream

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
        self.streams: dict[str, Stream] = {}  # created on first use (16K devices, few used)
        self.busy_s = {name: 0.0 for name in streams}  # seconds each stream was busy (written by record)
        self.flop_done = 0.0  # FLOPs of the kernels run (written by record)
        self.slowdown = 1.0  # kernel time multiplier: a straggler GPU (sim/cluster/stragglers.py)

    def stream(self, name: str) -> Stream:
        if name not in self.streams:
            self.streams[name] = Stream(self.sim.env, capacity=1)
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
    ) -> simpy.Event:
        """Run a kernel of known duration on `stream`; returns the event of its end (`KernelRun`)."""
        return KernelRun(self, name, duration_s, stream, flop, nbytes, category).end

    # Convenience wrappers on the hardware cost functions ---------------------------------
    def gemm(
        self, name: str, m: float, n: float, k: float, dtype: str = "bf16", batch: float = 1, stream: str = "compute"
    ) -> simpy.Event:
        t = self.spec.gemm_time_s(m, n, k, dtype, batch)
        return self.run(name, t, stream, flop=2.0 * m * n * k * batch)

    def memory_kernel(self, name: str, nbytes: float, stream: str = "compute") -> simpy.Event:
        return self.run(name, self.spec.memory_time_s(nbytes), stream, nbytes=nbytes)


class KernelRun:
    """One kernel run (`Device.run`): a state machine that does event for event what a SimPy process
    running `with stream.request() as req: yield req; yield timeout(duration)` and then recording
    the kernel would: it starts as a process starts, appends its next step to the event it waits
    for where the process would yield it, and ends (`end` succeeds) as the process would return,
    right after releasing the stream. The same events in the same order, without a generator and
    its resumes (a 1,024-GPU iteration runs ~80K kernels)."""

    __slots__ = ("device", "name", "duration_s", "stream", "flop", "nbytes", "category", "end", "_request", "_start")

    def __init__(
        self, device: Device, name: str, duration_s: float, stream: str, flop: float, nbytes: float, category: str
    ) -> None:
        self.device, self.name, self.duration_s, self.stream = device, name, duration_s, stream
        self.flop, self.nbytes, self.category = flop, nbytes, category
        env = device.sim.env
        self.end = simpy.Event(env)
        self._request: simpy.Event | None = None
        self._start = 0.0
        env.start_machine(self._requested)

    def _requested(self, _event: simpy.Event) -> None:
        request = self._request = self.device.stream(self.stream).request()
        request.callbacks.append(self._granted)  # type: ignore[union-attr]

    def _granted(self, _event: simpy.Event) -> None:
        device = self.device
        self._start = device.sim.now
        self.duration_s *= device.slowdown
        device.sim.timeout(self.duration_s).callbacks.append(self._done)

    def _done(self, _event: simpy.Event) -> None:
        device = self.device
        device.record(self.stream, self.duration_s, self.flop)
        device.sim.span(
            device.node, self.stream, self.name, self._start, nbytes=self.nbytes, flop=self.flop, category=self.category
        )
        self._request.__exit__(None, None, None)  # type: ignore[union-attr]  # the `with` block's end: release
        self.end.succeed()
