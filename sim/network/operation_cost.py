"""What one communication operation costs beyond its bytes: NCCL's per-operation latency.

Every NCCL operation a workload issues (cp_inference's ring sends, pass-Q All2All and TP
all-reduces; training's TP / CP / EP collectives and pipeline sends; serving's sends) is one NCCL
operation. NCCL's tuner (sim/network/nccl.py, constants from NCCL 2.21.5, see
docs/references.md#nccl-protocols) charges each operation

    base latency (kernel launch, proxy and protocol set-up) + sum over steps of the hop latency

on top of the bytes / bandwidth time, and picks the protocol (LL, LL128, Simple) of least estimated
time for the message size. Small messages (a decode token's queries, 4 KB per GPU for Llama 3 405B
TP8) take LL: about 6.6 us per operation plus 2.7 us per network hop, far more than their wire time.

`operation_cost` asks sim.network.collectives.plan for NCCL's plan of the operation on the actual
endpoints and returns the *software latency*: base + the part of every step's hop latency that
exceeds the topology's path latency (the flows already pay the path latency on the network), and
the protocol's wire factor (LL moves 2 wire bytes per data byte), by which the flows' bytes are
scaled. Workloads pay it as a wait before the operation's flows (cp_inference's sends and All2All
on the sender's comm stream; training's collectives and pipeline sends), or run NCCL's plan itself
(cp_inference's TP all-reduces, sim/network/pipeline.py), whose latency part is reported the same
way. Nothing here is a new constant: all numbers come from sim/network/nccl.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.network.collectives import Step, plan
from sim.network.nccl import CollectivePlan, StepCosts


@dataclass(frozen=True)
class OperationCost:
    """NCCL's plan of one operation and what it adds to the flows: the software latency (s) and the
    wire bytes per payload byte."""

    plan: CollectivePlan
    steps: list[Step]
    costs: StepCosts
    software_latency_s: float
    wire_factor: float

    @property
    def protocol(self) -> str:
        return self.plan.protocol


def operation_cost(network, op: str, group: Sequence[str], nbytes: float, algorithm: str = "auto") -> OperationCost:
    """NCCL's plan of `op` (sizes as in sim.network.collectives) with the tuner's protocol choice.
    `send_recv` on [src, dst] is one ring send; `all_to_all` takes what each rank sends in all."""
    algo = "direct" if op in ("send_recv", "all_to_all") and algorithm == "auto" else algorithm
    chosen, steps, costs = plan(network, op, algo, "auto", list(group), nbytes)
    extra = sum(max(0.0, lat - wire) for lat, wire in zip(chosen.step_latency_s, costs.wire_latency_s))
    return OperationCost(chosen, steps, costs, chosen.base_latency_s + extra, chosen.wire_factor)
