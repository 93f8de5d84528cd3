"""Compute streams: each device runs kernels one at a time per stream.

A `Device` wraps a hardware `DeviceSpec` with named streams (at least `compute` and `comm`), each a
SimPy resource of capacity one, like CUDA streams: kernels on one stream serialise, kernels on
different streams overlap (communication hides under compute). `Device.run` returns a SimPy process
that waits for the stream, holds it for the kernel's duration and records a span.
"""
from __future__ import annotations

import simpy

from hardware_models.gpu import DeviceSpec
from sim.engine.simulation import Simulation

DEFAULT_STREAMS = ("compute", "comm")


class Device:
    def __init__(self, sim: Simulation, node: str, spec: DeviceSpec, host: int,
                 streams: tuple[str, ...] = DEFAULT_STREAMS) -> None:
        self.sim = sim
        self.node = node
        self.spec = spec
        self.host = host
        self.streams: dict[str, simpy.Resource] = {}    # created on first use (16K devices, few used)
        self.busy_s = {name: 0.0 for name in streams}
        self.flop_done = 0.0
        self.slowdown = 1.0          # kernel time multiplier: a straggler GPU (sim/cluster/stragglers.py)

    def stream(self, name: str) -> simpy.Resource:
        if name not in self.streams:
            self.streams[name] = simpy.Resource(self.sim.env, capacity=1)
            self.busy_s.setdefault(name, 0.0)
        return self.streams[name]

    def run(self, name: str, duration_s: float, stream: str = "compute", flop: float = 0.0,
            nbytes: float = 0.0, category: str = "compute"):
        """Run a kernel of known duration on `stream`; returns the SimPy process."""
        return self.sim.process(self._run(name, duration_s, stream, flop, nbytes, category))

    def _run(self, name, duration_s, stream, flop, nbytes, category):
        with self.stream(stream).request() as req:
            yield req
            start = self.sim.now
            duration_s *= self.slowdown
            yield self.sim.timeout(duration_s)
            self.busy_s[stream] += duration_s
            self.flop_done += flop
            self.sim.span(self.node, stream, name, start, nbytes=nbytes, flop=flop, category=category)

    # Convenience wrappers on the hardware cost functions ---------------------------------
    def gemm(self, name: str, m: float, n: float, k: float, dtype: str = "bf16", batch: float = 1,
             stream: str = "compute"):
        t = self.spec.gemm_time_s(m, n, k, dtype, batch)
        return self.run(name, t, stream, flop=2.0 * m * n * k * batch)

    def memory_kernel(self, name: str, nbytes: float, stream: str = "compute"):
        return self.run(name, self.spec.memory_time_s(nbytes), stream, nbytes=nbytes)
