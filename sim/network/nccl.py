"""NCCL's cost model of a collective: protocols, per-operation and per-step latency, and its tuner.

NCCL moves a collective's bytes with one of three protocols (docs/references.md#nccl-protocols):
- `LL` (low latency): 8-byte stores of 4 data bytes + a 4-byte flag, so half the wire carries data;
  the receiver polls the flag, no fence: the lowest latency per hop.
- `LL128`: 128-byte lines of 120 data bytes + an 8-byte flag (120/128 of the wire is data).
- `Simple`: plain data with a memory fence and a flag per chunk: full bandwidth, the highest latency.

NCCL's tuner (src/graph/tuning.cc) costs every (algorithm, protocol) as
    time = base latency + steps x hop latency + bytes / bandwidth
and runs the cheapest. The constants below are its tables: `BASE_LATENCY_US` (per operation: proxy and
protocol set-up; the kernel launch, the same for every candidate, is not in NCCL's table and is
passed as `launch_s`), `HOP_LATENCY_US` (per step over NVLink or the network), the
protocol bandwidth factors and the LL bandwidth caps; `NET_OVERHEAD_US` is the per-step proxy
overhead of an inter-node ring on an Intel host (x3 for Simple). They come from NCCL 2.21.5
(docs/references.md#nccl-protocols: read from the `nvidia-nccl-cu12` 2.21.5 library).

Pipelining: NCCL cuts a channel's data into chunks that flow through the steps, at most
`NCCL_STEPS` (8) slots in flight per connection. dcsim cuts a schedule into `slices` (at most
`NCCL_STEPS`, at least one `SLOT_BYTES` each, and a bounded number of transfers per collective); a
slice of step s starts when the same slice of step s-1 has arrived and the previous slice of step
s has had the time to leave (sim/network/pipeline.py). `pipelined_time_s` is the closed form of that
wavefront without contention: sum over steps of (slice time + hop latency) plus (slices - 1) x the
slowest slice, but never below the busiest link's total bytes / capacity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

PROTOCOLS = ("LL", "LL128", "Simple")
NCCL_STEPS = 8  # slots per connection: chunks in flight per channel (NCCL's NCCL_STEPS)
SLOT_BYTES = {"LL": 32 << 10, "LL128": 480 << 10, "Simple": 512 << 10}  # data bytes per slot (assumption, see docs)
MAX_TRANSFERS = 256  # (step, slice) transfers simulated per collective: bounds the event count

# NCCL 2.21.5 src/graph/tuning.cc, in microseconds: baseLat[algorithm][protocol]
BASE_LATENCY_US = {"tree": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0}, "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}}
# hwLat[NVLINK | NET][algorithm][protocol]
HOP_LATENCY_US = {
    "nvlink": {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 28.0}, "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}},
    "net": {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 28.0}, "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0}},
}
NET_OVERHEAD_US = 1.0  # getNetOverhead on an Intel x86 host; x3 for Simple
# data fraction of the wire (protocol line formats)
WIRE_EFFICIENCY = {"LL": 0.5, "LL128": 120.0 / 128.0, "Simple": 1.0}
# llMaxBws[0] (multi-node, Intel CPU) by 1 / 2 / more nodes; llMaxBws[Hopper][0] for one node (GB/s)
LL_MAX_BUSBW_GBPS_MULTINODE = (39.0, 39.0, 20.4)
LL_MAX_BUSBW_GBPS_HOPPER_ONE_NODE = 141.0


def table_of(algorithm: str) -> str:
    """NCCL's table an algorithm's latencies come from: `tree`, or `ring` (ring, hierarchical - rings
    per phase - and direct all-to-all / send-recv, assumed to cost as ring steps)."""
    return "tree" if algorithm == "tree" else "ring"


def bandwidth_factor(algorithm: str, protocol: str, op: str, nodes: int) -> float:
    """NCCL's busbw factor of a protocol on an algorithm (tuning.cc's "model refinements"); Simple 1.
    The LL factors are NCCL's (1/4 ring across nodes or all-reduce, else 1/3; tree 1/3.8)."""
    if protocol == "Simple":
        return 0.92 if algorithm == "tree" else 1.0
    if algorithm == "tree":
        return 1.0 / 3.8 if protocol == "LL" else 0.92 * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0)
    if protocol == "LL":
        return 1.0 / 4.0 if nodes > 1 or op == "all_reduce" else 1.0 / 3.0
    return 0.92  # ring LL128 with 2+ ranks per node (120/128 of the wire, rounded down by NCCL)


def ll_cap_bytes_per_s(nodes: int) -> float:
    """NCCL's ceiling on LL busbw (llMaxBw), bytes/s."""
    if nodes == 1:
        return LL_MAX_BUSBW_GBPS_HOPPER_ONE_NODE * 1e9
    return LL_MAX_BUSBW_GBPS_MULTINODE[min(nodes, 3) - 1] * 1e9


def ring_steps(op: str, ranks: int, nodes: int) -> tuple[int, int]:
    """NCCL's (steps, inter-node steps) of a ring `op` (tuning.cc: nsteps, nInterSteps)."""
    if op == "all_reduce":
        return 2 * (ranks - 1), (2 * nodes if nodes > 1 else 0)
    if op in ("all_gather", "reduce_scatter"):
        return ranks - 1, nodes - 1
    return ranks, nodes


def hop_latency_s(algorithm: str, protocol: str, inter_node: bool, nodes: int) -> float:
    """Latency of one step over NVLink or the network (a ring step inside a node of a multi-node ring
    pays at least the proxy overhead), s."""
    table = table_of(algorithm)
    if inter_node:
        return HOP_LATENCY_US["net"][table][protocol] * 1e-6
    intra = HOP_LATENCY_US["nvlink"][table][protocol]
    if nodes > 1 and table == "ring":
        intra = max(intra, NET_OVERHEAD_US * (3 if protocol == "Simple" else 1))
    return intra * 1e-6


def base_latency_s(algorithm: str, protocol: str) -> float:
    """Per-operation latency (kernel launch, proxy and protocol set-up as NCCL's tuner charges it), s."""
    return BASE_LATENCY_US[table_of(algorithm)][protocol] * 1e-6


def step_latencies_s(
    op: str, algorithm: str, protocol: str, inter: Sequence[bool], ranks: int, nodes: int
) -> list[float]:
    """Hop latency of every step of a schedule (`inter[s]`: step s crosses hosts). A flat ring's
    steps share NCCL's ring total, (nsteps - nInter) x intra + nInter x inter, evenly (in a
    lock-step schedule every step has its inter-node edge, but a chunk crosses hosts only nInter
    times); other schedules pay the latency of each step's link class."""
    if not inter:
        return []
    if algorithm == "ring" and op in ("all_reduce", "all_gather", "reduce_scatter"):
        nsteps, n_inter = ring_steps(op, ranks, nodes)
        total = (nsteps - n_inter) * hop_latency_s(algorithm, protocol, False, nodes) + n_inter * hop_latency_s(
            algorithm, protocol, True, nodes
        )
        return [total / len(inter)] * len(inter)
    return [hop_latency_s(algorithm, protocol, x, nodes) for x in inter]


def slices_for(protocol: str, largest_flow_bytes: float, steps: int, pipelined: bool) -> int:
    """How many slices a schedule is cut into: one per slot of payload on the largest flow, at most
    NCCL_STEPS (the slots in flight per channel) and at most MAX_TRANSFERS / steps."""
    if not pipelined or steps < 2:
        return 1
    by_size = int(largest_flow_bytes // SLOT_BYTES[protocol])
    return max(1, min(NCCL_STEPS, by_size, MAX_TRANSFERS // steps))


@dataclass(frozen=True)
class StepCosts:
    """A schedule's uncontended costs per step: bandwidth time (Simple, achieved link rates), whether
    the step crosses hosts, its topology path latency; and the busiest link's total seconds."""

    bandwidth_s: tuple[float, ...]
    inter: tuple[bool, ...]
    wire_latency_s: tuple[float, ...]
    busiest_link_s: float


def pipelined_time_s(
    bandwidth_s: Sequence[float], latency_s: Sequence[float], slices: int, busiest_link_s: float
) -> float:
    """Closed form of the wavefront of `slices` slices through the steps (no contention between
    steps except the busiest link's bound): sum_s (b_s / k + l_s) + (k - 1) max_s b_s / k, and at
    least the busiest link's total."""
    if not bandwidth_s:
        return 0.0
    k = max(1, slices)
    path = sum(b / k + l for b, l in zip(bandwidth_s, latency_s)) + (k - 1) * max(bandwidth_s) / k
    return max(path, busiest_link_s + (min(latency_s) if latency_s else 0.0))


@dataclass(frozen=True)
class CollectivePlan:
    """How one collective runs: algorithm, protocol, slices, the per-operation latency, per-step hop
    latencies, the payload-to-wire factor of its flows, and the tuner's time estimate."""

    algorithm: str
    protocol: str
    slices: int
    base_latency_s: float
    step_latency_s: tuple[float, ...]
    wire_factor: float
    estimate_s: float


def plan_for(
    op: str,
    algorithm: str,
    protocol: str,
    costs: StepCosts,
    ranks: int,
    nodes: int,
    bus_bytes: float,
    largest_flow_bytes: float,
    pipelined: bool,
    launch_s: float = 0.0,
) -> CollectivePlan:
    """The plan of `op` with `algorithm` and `protocol` (not `auto`) and its estimated time.
    `bus_bytes`: the payload x nccl-tests' bus factor (so bus_bytes / time is busbw). `launch_s`: the
    collective kernel's launch (the device's launch overhead), which NCCL's tuner leaves out because
    every candidate pays it (its Tree/Simple base latency is 0): added to the per-operation latency,
    so it never changes the choice."""
    factor = bandwidth_factor(algorithm, protocol, op, nodes)
    simple_bw_s = sum(costs.bandwidth_s)
    if protocol == "LL" and simple_bw_s > 0:  # LL's busbw ceiling, as a lower factor
        factor = min(factor, ll_cap_bytes_per_s(nodes) * simple_bw_s / max(bus_bytes, 1.0))
    wire = 1.0 / factor
    protocol_latency = step_latencies_s(op, algorithm, protocol, costs.inter, ranks, nodes)
    latency = tuple(max(p, w) for p, w in zip(protocol_latency, costs.wire_latency_s))
    slices = slices_for(protocol, largest_flow_bytes, len(costs.bandwidth_s), pipelined)
    bandwidth = [b * wire for b in costs.bandwidth_s]
    busiest = costs.busiest_link_s * wire if slices > 1 else math.fsum(bandwidth)
    base = base_latency_s(algorithm, protocol) + launch_s
    estimate = base + pipelined_time_s(bandwidth, latency, slices, busiest if slices > 1 else 0.0)
    return CollectivePlan(algorithm, protocol, slices, base, tuple(latency), wire, estimate)


def best_plan(plans: Sequence[CollectivePlan]) -> CollectivePlan:
    """The tuner's choice: the smallest estimated time (first one on ties)."""
    return min(plans, key=lambda p: p.estimate_s)
