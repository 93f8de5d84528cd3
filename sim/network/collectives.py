"""Collectives built from point-to-point flows, run as NCCL runs them.

A collective algorithm is a *schedule*: a list of steps, each a list of `(src, dst, bytes)` flows
that run at the same time. `collective(..., protocol="auto")` (the default) runs it as NCCL does
(sim/network/nccl.py, sim/network/pipeline.py): a flat ring across hosts has one channel per rail
(`rail_rings`: ring c enters every host at local rank c, so the hosts' NICs all carry traffic); the
tuner picks the algorithm (with `auto`) and the protocol (LL, LL128, Simple; with `auto`) of least
estimated time for the size; the operation pays its per-operation latency, every step its hop
latency, and the schedule is cut into slices that flow through the steps (pipelining). With
`protocol=None` the schedule runs lock-step as built: a step starts when the previous one has
finished on every rank, no latency but the topology's. Each step is a `Step`: its flows and
the `StepKey` that names it (sim/engine/replay.py); a schedule that repeats a step repeats the same
`Step`, so the network sets it up once and may replay it (sim/network/replay.py). Running a
schedule on a network backend turns every flow into a real transfer, so on the flow backend two collectives sharing a link slow
each other down, and on the analytical backend each step costs max(latency + bytes / bandwidth).

Sizes follow nccl-tests: `nbytes` is the per-rank buffer for all_reduce and the total buffer for
all_gather / reduce_scatter; for all_to_all it is what each rank sends in all; for send_recv the
message each rank sends to its ring neighbour. `bus_factor` gives nccl-tests' busbw / algbw.

Algorithms: `ring` (one ring, or one per rail with the NCCL model); `tree` (binary tree reduce + broadcast, pipelined in chunks); `hierarchical`
(reduce-scatter inside each host over the scale-up fabric, a ring across hosts per local rank on the
NICs, all-gather inside the host); `direct` (all-to-all, send/recv); `auto` picks the schedule with
the smallest uncontended estimate on this topology.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import simpy

from sim.engine.replay import StepKey
from sim.network import nccl
from sim.network.analytical import AnalyticalNetwork
from sim.network.base import Flow, Network
from sim.network.pipeline import run_pipelined

RAIL_FLOWS_MAX = 32768  # flows per step of a rail-ring schedule: fewer channels beyond (very large groups)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
ALGORITHMS = ("ring", "tree", "hierarchical", "direct", "auto")


class Step(list[Flow]):
    """The flows of one step, which run at the same time, and the `StepKey` naming the step."""

    __slots__ = ("key",)

    def __init__(self, flows: Iterable[Flow] = (), label: str = "collective step") -> None:
        super().__init__(flows)
        self.key = StepKey(label)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests: busbw = algbw x this factor."""
    if n <= 1:
        return 1.0
    return {
        "all_reduce": 2 * (n - 1) / n,
        "all_gather": (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "send_recv": 1.0,
    }[op]


def _ring(group: Sequence[str], chunk: float, steps: int) -> list[Step]:
    n = len(group)
    step = Step((group[i], group[(i + 1) % n], chunk) for i in range(n))
    return [step] * steps  # identical steps are one Step


def rail_rings(group: Sequence[str], host_of: Callable[[str], int | None]) -> list[list[str]]:
    """NCCL's channels of a flat ring on rails: with H >= 2 hosts of L ranks each, L rings; ring c
    visits every host's ranks in the order c, c+1, ..., c-1, so it leaves a host from local rank
    c-1's NIC and enters the next at local rank c's: every NIC sends and receives one ring's
    traffic (at most RAIL_FLOWS_MAX / n rings: on 16K ranks, 2 channels). Otherwise the group
    itself (one ring)."""
    hosts: dict[int | None, list[str]] = {}
    for d in group:
        hosts.setdefault(host_of(d), []).append(d)
    local = list(hosts.values())
    sizes = {len(g) for g in local}
    if None in hosts or len(local) < 2 or len(sizes) != 1 or sizes == {1}:
        return [list(group)]
    L = sizes.pop()
    channels = max(1, min(L, RAIL_FLOWS_MAX // len(group)))  # bounded flows per step (event count)
    return [[g[(c + j) % L] for g in local for j in range(L)] for c in range(channels)]


def parallel(per_group: list[list[Step]]) -> list[Step]:
    """Step k of all groups at once; where every group repeats its previous step, so does the
    result (identical steps are one Step)."""
    combined: list[Step] = []
    for k in range(len(per_group[0])):
        if k and all(steps[k] is steps[k - 1] for steps in per_group):
            combined.append(combined[-1])
        else:
            combined.append(Step(flow for steps in per_group for flow in steps[k]))
    return combined


def channel_ring_schedule(op: str, rings: Sequence[Sequence[str]], nbytes: float) -> list[Step]:
    """`op` on several rings at once (channels), each carrying 1/len(rings) of the bytes."""
    if len(rings) == 1:
        return ring_schedule(op, rings[0], nbytes)
    return parallel([ring_schedule(op, r, nbytes / len(rings)) for r in rings])


def ring_schedule(op: str, group: Sequence[str], nbytes: float) -> list[Step]:
    n = len(group)
    if n < 2:
        return []
    if op == "all_reduce":
        return _ring(group, nbytes / n, 2 * (n - 1))
    if op in ("all_gather", "reduce_scatter"):
        return _ring(group, nbytes / n, n - 1)
    if op == "send_recv":
        return _ring(group, nbytes, 1)
    if op == "all_to_all":
        # n-1 shift steps: in step s rank i sends its block for rank i+s
        return [Step((group[i], group[(i + s) % n], nbytes / n) for i in range(n)) for s in range(1, n)]
    raise ValueError(f"ring does not implement {op}")


def direct_schedule(op: str, group: Sequence[str], nbytes: float) -> list[Step]:
    n = len(group)
    if n < 2:
        return []
    if op == "all_to_all":
        return [Step((group[i], group[j], nbytes / n) for i in range(n) for j in range(n) if i != j)]
    if op == "send_recv":
        return _ring(group, nbytes, 1)
    raise ValueError(f"direct does not implement {op}")


def tree_schedule(op: str, group: Sequence[str], nbytes: float, chunks: int | None = None) -> list[Step]:
    """Binary-tree all-reduce: reduce towards rank 0, then broadcast, pipelined in `chunks`."""
    if op != "all_reduce":
        raise ValueError(f"tree does not implement {op}")
    n = len(group)
    if n < 2:
        return []
    depth = max(int(math.floor(math.log2(i + 1))) for i in range(n))
    c = chunks or max(1, min(64, int(nbytes // (4 << 20))))
    chunk = nbytes / c
    by_level = {
        lvl: [i for i in range(1, n) if int(math.floor(math.log2(i + 1))) == lvl] for lvl in range(1, depth + 1)
    }
    reduce_steps: list[Step] = []
    for t in range(depth + c - 1):
        step = Step()
        for lvl in range(1, depth + 1):  # deepest level starts first
            k = t - (depth - lvl)
            if 0 <= k < c:
                step += [(group[i], group[(i - 1) // 2], chunk) for i in by_level[lvl]]
        reduce_steps.append(step)
    bcast_steps: list[Step] = []
    for t in range(depth + c - 1):
        step = Step()
        for lvl in range(1, depth + 1):  # shallowest level starts first
            k = t - (lvl - 1)
            if 0 <= k < c:
                step += [(group[(i - 1) // 2], group[i], chunk) for i in by_level[lvl]]
        bcast_steps.append(step)
    return reduce_steps + bcast_steps


def hierarchical_schedule(
    op: str, group: Sequence[str], nbytes: float, host_of: Callable[[str], int | None]
) -> list[Step]:
    """Scale-up inside hosts, rings across hosts per local rank (one NIC each)."""
    hosts: dict[int | None, list[str]] = {}
    for d in group:
        hosts.setdefault(host_of(d), []).append(d)
    local = [hosts[h] for h in sorted(hosts, key=lambda h: (h is None, h))]
    sizes = {len(g) for g in local}
    if len(sizes) != 1:
        raise ValueError("hierarchical needs the same number of ranks on every host")
    L, H = sizes.pop(), len(local)
    if H == 1 or L == 1:
        return ring_schedule(op, group, nbytes)
    rails = [[local[h][j] for h in range(H)] for j in range(L)]
    if op == "all_reduce":
        intra_rs = parallel([ring_schedule("reduce_scatter", g, nbytes) for g in local])
        inter = parallel([ring_schedule("all_reduce", r, nbytes / L) for r in rails])
        intra_ag = parallel([ring_schedule("all_gather", g, nbytes) for g in local])
        return intra_rs + inter + intra_ag
    if op == "all_gather":
        inter = parallel([ring_schedule("all_gather", r, nbytes / L) for r in rails])
        intra = parallel([ring_schedule("all_gather", g, nbytes) for g in local])
        return inter + intra
    if op == "reduce_scatter":
        intra = parallel([ring_schedule("reduce_scatter", g, nbytes) for g in local])
        inter = parallel([ring_schedule("reduce_scatter", r, nbytes / L) for r in rails])
        return intra + inter
    raise ValueError(f"hierarchical does not implement {op}")


def schedule(
    op: str, algorithm: str, group: Sequence[str], nbytes: float, host_of: Callable[[str], int | None] = lambda d: None
) -> list[Step]:
    """The steps of `op` with `algorithm` (not `auto`) on `group`."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(OPS)}")
    if algorithm == "ring":
        return ring_schedule(op, group, nbytes)
    if algorithm == "tree":
        return tree_schedule(op, group, nbytes)
    if algorithm == "direct":
        return direct_schedule(op, group, nbytes)
    if algorithm == "hierarchical":
        return hierarchical_schedule(op, group, nbytes, host_of)
    raise ValueError(f"unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")


def estimate_s(network: Network, steps: Sequence[Sequence[Flow]]) -> float:
    """Uncontended time of a schedule: sum over steps of the slowest flow (each `Step` once)."""
    cache: dict[StepKey, float] = {}
    total = 0.0
    for step in steps:
        key = step.key if isinstance(step, Step) else None
        t = cache.get(key) if key is not None else None
        if t is None:
            t = network.estimate_step_s(step)
            if key is not None:
                cache[key] = t
        total += t
    return total


def candidates(op: str) -> tuple[str, ...]:
    return {
        "all_reduce": ("ring", "tree", "hierarchical"),
        "all_gather": ("ring", "hierarchical"),
        "reduce_scatter": ("ring", "hierarchical"),
        "all_to_all": ("direct", "ring"),
        "send_recv": ("direct",),
    }[op]


def nccl_candidates(op: str) -> tuple[str, ...]:
    """The algorithms NCCL's tuner chooses from (it has no hierarchical algorithm: `hierarchical`
    runs only when asked for)."""
    return {"all_reduce": ("ring", "tree"), "all_to_all": ("direct",), "send_recv": ("direct",)}.get(op, ("ring",))


def choose(network: Network, op: str, algorithm: str, group: Sequence[str], nbytes: float) -> tuple[str, list[Step]]:
    """Resolve `auto` to the candidate with the smallest uncontended estimate; return (name, steps)."""
    host_of = network.topology.host_of
    if algorithm != "auto":
        return algorithm, schedule(op, algorithm, group, nbytes, host_of)
    best: tuple[float, str, list[Step]] | None = None
    for name in candidates(op):
        try:
            steps = schedule(op, name, group, nbytes, host_of)
        except ValueError:
            continue
        t = estimate_s(network, steps)
        if best is None or t < best[0]:
            best = (t, name, steps)
    if best is None:
        raise ValueError(f"no algorithm implements {op} on this group")
    return best[1], best[2]


def run_schedule(network: Network, steps: Sequence[Sequence[Flow]], name: str = "collective") -> simpy.Event:
    """Run the steps one after another on `network` (a `Step` under its key; plain lists of flows run
    as they are, set up anew each time): `Network.run_steps`, an event that fires when the last is done."""
    return network.run_steps(steps, name)


def step_costs(network: Network, steps: Sequence[Sequence[Flow]]) -> nccl.StepCosts:
    """Uncontended costs of a schedule's steps (each distinct step costed once): the bandwidth time
    of the step's most loaded link, whether it crosses hosts, its slowest path latency; and the
    total seconds of the link that carries most over the whole schedule."""
    per_step: dict[int, tuple[float, bool, float, np.ndarray | None]] = {}
    count: dict[int, int] = {}
    bandwidth, inter, latency = [], [], []
    for step in steps:
        known = per_step.get(id(step))
        if known is None:
            known = _one_step_costs(network, step)
            per_step[id(step)] = known
        count[id(step)] = count.get(id(step), 0) + 1
        bw, crosses, lat, _ = known
        bandwidth.append(bw)
        inter.append(crosses)
        latency.append(lat)
    busiest = _busiest_link_s(steps, per_step, count, network.topology.num_links)
    return nccl.StepCosts(tuple(bandwidth), tuple(inter), tuple(latency), busiest)


_CANDIDATE_REL = 1e-6  # links within this of the largest estimated total are summed exactly


def _busiest_link_s(steps: Sequence[Sequence[Flow]], per_step: dict, count: dict[int, int], num_links: int) -> float:
    """The largest total over links of the steps' link seconds, as the sum of every step's loads in
    schedule order gives it (the same floats). Summing a full link vector per step costs steps x
    links (a 16K-rank ring: 32K x 100K+); instead each distinct step's loads times its count
    estimate the totals (within ~steps x 1e-16 relative of the ordered sum), and only the links
    within `_CANDIDATE_REL` of the largest estimate are summed step by step."""
    estimate = np.zeros(num_links)
    for key, (_, _, _, loads) in per_step.items():
        if loads is not None:
            estimate += count[key] * loads
    top = float(estimate.max(initial=0.0))
    if top <= 0.0:
        return 0.0
    candidates = np.flatnonzero(estimate >= top * (1 - _CANDIDATE_REL))
    part = {key: loads[candidates] for key, (_, _, _, loads) in per_step.items() if loads is not None}
    total = np.zeros(len(candidates))
    for step in steps:
        loads = part.get(id(step))
        if loads is not None:
            total += loads
    return float(total.max())


def _one_step_costs(network: Network, step: Sequence[Flow]) -> tuple[float, bool, float, np.ndarray | None]:
    topo = network.topology
    if not step:
        return 0.0, False, 0.0, None
    crosses = any(topo.host_of(s) != topo.host_of(d) for s, d, _ in step)
    srcs, dsts = [f[0] for f in step], [f[1] for f in step]
    nbytes = np.array([float(f[2]) for f in step])
    batch = topo.route_batch(srcs, dsts) if len(step) > 1 else None
    if batch is None:  # per pair (a single flow, or endpoints the batch router does not take)
        flat: list[int] = []
        weights: list[float] = []
        latencies: list[float] = []
        for (s, d), b in zip(zip(srcs, dsts), nbytes.tolist()):
            paths = topo.routes(s, d)
            for path in paths:
                flat.extend(path)
                weights.extend([b / len(paths)] * len(path))
                latencies.append(topo.path_latency_s(path))
        flat_a, weights_a = np.asarray(flat, dtype=np.int64), np.asarray(weights, dtype=float)
        latency = max(latencies, default=0.0)
    else:
        flat_a = batch.flat
        weights_a = np.repeat(nbytes[batch.owner] * batch.share, batch.lengths)
        latency = float(batch.latency.max()) if len(batch.latency) else 0.0
    loads = np.bincount(flat_a, weights_a, minlength=topo.num_links) / topo.capacity
    return float(loads.max(initial=0.0)), crosses, latency, loads


def largest_flow_bytes(steps: Sequence[Sequence[Flow]]) -> float:
    """The most bytes of one flow over a schedule's steps (a repeated `Step` looked at once: a 16K-rank
    ring all-reduce repeats one step of 32K flows 32K times)."""
    distinct = {id(step): step for step in steps}.values()
    return max((b for step in distinct for _, _, b in step), default=0.0)


def nccl_schedule(
    op: str, algorithm: str, group: Sequence[str], nbytes: float, host_of: Callable[[str], int | None]
) -> list[Step]:
    """The schedule NCCL's model runs: a flat ring across hosts has one channel per rail."""
    if algorithm == "ring" and op in ("all_reduce", "all_gather", "reduce_scatter"):
        return channel_ring_schedule(op, rail_rings(group, host_of), nbytes)
    return schedule(op, algorithm, group, nbytes, host_of)


def plan(
    network: Network,
    op: str,
    algorithm: str,
    protocol: str,
    group: Sequence[str],
    nbytes: float,
    launch_s: float = 0.0,
) -> tuple[nccl.CollectivePlan, list[Step], nccl.StepCosts]:
    """NCCL's tuner: the (algorithm, protocol) of least estimated time (`auto` tries NCCL's candidates)
    with its schedule and step costs; `launch_s`: the kernel launch every plan pays (nccl.plan_for). On the analytical backend the schedule runs as one slice (its
    time is then the tuner's closed form: base + sum of step latency and bandwidth times)."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(OPS)}")
    if protocol != "auto" and protocol not in nccl.PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; allowed: auto, {', '.join(nccl.PROTOCOLS)}")
    host_of = network.topology.host_of
    nodes = len({host_of(d) for d in group})
    pipelined = not isinstance(network, AnalyticalNetwork)
    protocols = nccl.PROTOCOLS if protocol == "auto" else (protocol,)
    best: tuple[nccl.CollectivePlan, list[Step], nccl.StepCosts] | None = None
    for algo in nccl_candidates(op) if algorithm == "auto" else (algorithm,):
        try:
            steps = nccl_schedule(op, algo, group, nbytes, host_of)
        except ValueError:
            if algorithm != "auto":
                raise
            continue
        costs = step_costs(network, steps)
        largest = largest_flow_bytes(steps)
        bus_bytes = nbytes * bus_factor(op, len(group))
        for proto in protocols:
            p = nccl.plan_for(op, algo, proto, costs, len(group), nodes, bus_bytes, largest, pipelined, launch_s)
            if best is None or p.estimate_s < best[0].estimate_s:
                best = (p, steps, costs)
    if best is None:
        raise ValueError(f"no algorithm implements {op} on this group")
    return best


def collective(
    network: Network,
    op: str,
    group: Sequence[str],
    nbytes: float,
    algorithm: str = "auto",
    name: str | None = None,
    protocol: str | None = "auto",
    launch_s: float = 0.0,
):
    """Start collective `op` on `group`; returns (SimPy process, algorithm used). `protocol`: LL,
    LL128, Simple or auto (NCCL's model, see the module docstring), or None (the lock-step
    schedule as built, `choose` resolving `auto`). `launch_s`: the collective kernel's launch,
    paid once per operation with the NCCL model (the device's launch overhead; 0 leaves it out)."""
    if protocol is None:
        algo, steps = choose(network, op, algorithm, group, nbytes)
        return run_schedule(network, steps, name or op), algo
    chosen, steps, costs = plan(network, op, algorithm, protocol, group, nbytes, launch_s)
    proc = run_pipelined(network, steps, chosen, costs.bandwidth_s, costs.wire_latency_s, name or op)
    return proc, chosen.algorithm
