"""Running a collective schedule as NCCL does: a per-operation latency, then slices flowing through
the steps (a wavefront), each step's hop latency, and the protocol's extra wire bytes.

`run_pipelined(network, steps, plan)` (plan: sim/network/nccl.py `CollectivePlan`):
- waits the plan's per-operation latency (kernel launch, proxy set-up);
- cuts every step into `plan.slices` slices: slice i of step s is the step's flows with 1/slices of
  their bytes, times the protocol's wire factor (LL sends a flag with every 4 data bytes), so the
  flows carry what the wire carries and contention stays exact (the slices are real flows);
- slice i of step s starts when slice i of step s-1 has arrived (its flows delivered, plus what the
  step's hop latency exceeds the topology's path latency) and slice i-1 of step s has had its
  uncontended time to leave (the slot order of a connection; under contention slices overlap and
  share the links max-min fairly);
- with one slice this is the lock-step schedule plus latencies: each distinct step keeps its
  `StepKey`, so repeated steps on an idle flow network are replayed (sim/network/replay.py).
Slices of step s therefore overlap step s+1 of earlier slices: the NVLink reduce-scatter of
`hierarchical` overlaps its inter-node ring, and hop latencies hide under the bandwidth time.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:
    from sim.network.collectives import Step

from sim.network.base import Network
from sim.network.nccl import CollectivePlan


def slice_steps(steps: Sequence[Step], fraction: float) -> list[Step]:
    """The steps with every flow's bytes times `fraction`; a repeated step stays one `Step`."""
    scaled: dict[int, Step] = {}
    out: list[Step] = []
    for step in steps:
        one = scaled.get(id(step))
        if one is None:
            one = type(step)(((s, d, b * fraction) for s, d, b in step), label=step.key.label)
            scaled[id(step)] = one
        out.append(one)
    return out


def run_pipelined(
    network: Network,
    steps: Sequence[Step],
    plan: CollectivePlan,
    bandwidth_s: Sequence[float],
    wire_latency_s: Sequence[float],
    name: str = "collective",
) -> simpy.Process:
    """A SimPy process running `steps` per `plan` (see the module docstring). `bandwidth_s[s]`: the
    uncontended Simple bandwidth time of step s (paces the slices); `wire_latency_s[s]`: the path
    latency its flows already pay on the network."""
    sim = network.sim
    k = max(1, plan.slices)
    sliced = slice_steps(steps, plan.wire_factor / k)
    pace = [b * plan.wire_factor / k for b in bandwidth_s]
    extra = [max(0.0, lat - wire) for lat, wire in zip(plan.step_latency_s, wire_latency_s)]
    m = len(sliced)
    arrived = [[sim.env.event() for _ in range(k)] for _ in range(m)]
    left = [[sim.env.event() for _ in range(k)] for _ in range(m)]

    def one_slice(i: int) -> Generator[simpy.Event, object, None]:
        for s, step in enumerate(sliced):
            if s:
                yield arrived[s - 1][i]
            if i:
                yield left[s][i - 1]
            if i + 1 < k:  # the next slice may start once this one had the time to leave
                gate = left[s][i]
                sim.timeout(pace[s]).callbacks.append(lambda _e, g=gate: g.succeed())
            if step:
                yield network.transfer_many(step, name=f"{name}[{s}.{i}]", key=step.key)
            if extra[s] > 0:
                yield sim.timeout(extra[s])
            arrived[s][i].succeed()

    def proc() -> Generator[simpy.Event, object, None]:
        if plan.base_latency_s > 0:
            yield sim.timeout(plan.base_latency_s)
        if m == 0:
            return
        yield sim.all_of([sim.process(one_slice(i)) for i in range(k)])

    return sim.process(proc())
