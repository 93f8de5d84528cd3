"""Exact replay of identical transformer layers (cp_inference): record what one layer does to the rest
of the simulator, then do it again, shifted in time, for the layers that follow (the mechanism of
sim/engine/replay.py: a `RecorderTape`, a `TrafficTape` and the devices' usage, composed).

When one group of GPUs runs alone (a representative CP rank group, or cp = 1; no background flows;
no other job on the network), every layer starts from the same idle state - streams free, no flow
in flight - and runs the same kernels and flows, so every layer does exactly what the one before
did, one layer time later. A `LayerRecording` is started when a layer starts and stopped when it
ends; meanwhile it records everything the rest of the simulator sees of the layer:
- the span recorder's new rows (and how many it dropped past its limit), and every call to its
  observers (the energy meter's activity accounting, mirrored ranks included);
- every call to the network's traffic observers (bytes per link per interval of constant rates,
  sub-flows, transfer endpoints), and the network's counters (bytes and busy time per link, flows
  and bytes sent and delivered);
- every device's busy time per stream and FLOPs.
`replay(layers)` then emits all of it again for each following layer: rows and observer calls
moved to the layer they stand for (span names "L{n} ..." renamed), counters added. A time t of the
recorded layer [s0, e0] becomes base + (t - s0), where the following layers' bases are e0,
e0 + d, e0 + d + d, ... (d = e0 - s0): a layer then ends exactly where the next one starts, as in
a simulation of every layer, so ties between spans (which the critical path follows) stay ties;
`end_s(layers)` is where the replayed layers end, which `delay_to` turns into an exact
timeout.
The spans, link table and metrics (energy included) are those of simulating every layer, up to
float rounding of the times; tests/workloads/test_workload_fast_paths.py compares the two.

A recording is only replayed where it stands for the following layers exactly: `replayable(n)`
says how many of them can be replayed before the span recorder reaches its limit (past the limit
the network stops showing per-flow spans to observers, so the layer that crosses it is simulated,
and so is the next one, which is then recorded with the recorder full).
"""

from __future__ import annotations

import numpy as np

from sim.engine.compute import Device
from sim.engine.replay import RecorderTape, repetition_starts
from sim.engine.simulation import Simulation
from sim.network.base import Network
from sim.network.replay import TrafficTape


class LayerRecording:
    """Records one layer (from construction to `stop()`); `replay(n)` emits n more such layers."""

    def __init__(self, sim: Simulation, network: Network, devices: list[Device], layer: int) -> None:
        self.sim, self.network, self.devices, self.layer = sim, network, devices, layer
        self.breakdown: dict[str, float] = {}  # what the layer added to the phase breakdown (set by the caller)
        self._spans = RecorderTape(sim.recorder)
        self._traffic = TrafficTape(network)
        self._usage0 = [d.usage() for d in devices]
        self.start_s = sim.now
        self.stop_s = self.duration_s = 0.0
        self.usage = self._usage0

    def stop(self) -> None:
        """End of the layer: what it added."""
        self._traffic.stop()
        self._spans.stop()
        self.stop_s = self.sim.now
        self.duration_s = self.stop_s - self.start_s
        self.usage = [d.usage().since(before) for d, before in zip(self.devices, self._usage0)]

    def replayable(self, layers: int) -> int:
        """How many of the next `layers` layers replaying this recording reproduces exactly."""
        return self._spans.replayable(layers)

    def bases(self, layers: int) -> list[float]:
        """Start times of the `layers` layers after the recorded one (each starts where the last ends)."""
        return repetition_starts(self.stop_s, self.duration_s, layers)

    def end_s(self, layers: int) -> float:
        """When `layers` replayed layers end."""
        return self.bases(layers)[-1] + self.duration_s

    def replay(self, layers: int) -> None:
        """Emit `layers` more layers, each starting where the previous one ends."""
        if layers <= 0:
            return
        bases = np.array(self.bases(layers))  # a recorded time t maps to base + (t - s0)
        self._spans.replay(self.start_s, bases, rename=lambda i: (f"L{self.layer} ", f"L{self.layer + i} "))
        self._traffic.replay(self.start_s, bases)
        for d, usage in zip(self.devices, self.usage):
            d.add_usage(usage, layers)
