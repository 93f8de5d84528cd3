"""Where the ranks of a 4D-parallel job sit, and which of them are interchangeable.

Rank order and stage groups: sim/workloads/parallel_layout.py (`ParallelLayout`, TP innermost, replicas
outermost - so DP traffic crosses the most switches, where it hides best).

Equivalence (`replica_classes`): on the analytical network a transfer's time depends only on its
path's latency and bottleneck capacity (`flow_signature`), so two replicas whose PP sends and TP/CP
collectives see the same (latency, capacity) on every flow, and whose GPUs run at the same speed,
follow identical timelines. One representative per class is simulated; the DP collectives they
share still move every replica's flows, and the other members' GPUs mirror their representative's
busy intervals for the energy accounting. This is exact (tests compare with the full simulation)
on the analytical network; with contention (the flow network) every replica is simulated.

`streamed_ring`: the DP collectives' schedule - every ring edge carries its whole share as one flow
(NCCL keeps every ring link busy for the whole collective) plus the pipeline-fill latency of the
other hops; on an idle uniform ring it takes the lock-step ring's time of sim/network/collectives.py (tested),
under contention the flows share links for the whole collective as a real ring does.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from sim.network.collectives import Step, candidates, choose, schedule
from sim.network.operation_cost import operation_cost
from sim.workloads.parallel_layout import ParallelLayout


class GroupComm:
    """The TP, CP and EP collective schedules of one stage group (built once per op and size).

    The group's devices are ordered (e, c, t): `ep` stage groups of consecutive replicas (an expert-
    parallel block; one stage group when ep = 1), each tp x cp devices ordered (c, t)."""

    def __init__(self, network, devices: list, tp: int, cp: int, algorithm: str, ep: int = 1) -> None:
        self.network, self.devices, self.tp, self.cp, self.algorithm = network, devices, tp, cp, algorithm
        self.ep = ep
        self._steps: dict[tuple, list] = {}
        self._latency: dict[tuple, float] = {}
        self._link_kind: dict[str, str] = {}

    def subgroups(self, kind: str) -> list[list[str]]:
        nodes, tp, per = [d.node for d in self.devices], self.tp, self.tp * self.cp
        if kind == "tp":
            return [nodes[c * tp : (c + 1) * tp] for c in range(self.cp * self.ep)]
        if kind == "cp":
            return [nodes[e * per + t : (e + 1) * per : tp] for e in range(self.ep) for t in range(tp)]
        return [nodes[i::per] for i in range(per)]  # ep: one device per replica of the block

    def steps(self, kind: str, op: str, nbytes: float) -> list:
        """One schedule running every subgroup's collective at once (step k of each together). An
        all-to-all runs `direct` or `ring` as `collective_algorithm` says, else the faster of them.
        The flows carry the wire bytes of NCCL's protocol for the operation (`latency_s`)."""
        key = (kind, op, nbytes)
        if key not in self._steps:
            groups = self.subgroups(kind)
            if len(groups[0]) < 2:
                self._steps[key], self._latency[key] = [], 0.0
            else:
                algorithm = self.algorithm if op != "all_to_all" or self.algorithm in candidates(op) else "auto"
                algo, first = choose(self.network, op, algorithm, groups[0], nbytes)
                cost = operation_cost(self.network, op, groups[0], nbytes, algo)
                host_of = self.network.topology.host_of
                wire = nbytes * cost.wire_factor
                if cost.wire_factor != 1.0:
                    first = schedule(op, algo, groups[0], wire, host_of)
                per_group = [first] + [schedule(op, algo, g, wire, host_of) for g in groups[1:]]
                self._steps[key] = [Step(f for s in per_group for f in s[k]) for k in range(len(first))]
                self._latency[key] = cost.software_latency_s
        return self._steps[key]

    def latency_s(self, kind: str, op: str, nbytes: float) -> float:
        """NCCL's per-operation software latency of the collective (sim/network/operation_cost.py:
        base latency and the hop latency beyond the path's, for the algorithm `steps` runs and the
        protocol NCCL's tuner picks for the size), paid before its flows."""
        self.steps(kind, op, nbytes)
        return self._latency[(kind, op, nbytes)]

    def link_kind(self, kind: str) -> str:
        """The kind of link `kind`'s collectives leave a GPU by (`scale_up` inside a host, `nic`
        across hosts) - towards its slowest peer: the resource a TP/CP/EP wait is charged to where its
        flows are not recorded."""
        if kind not in self._link_kind:
            group = self.subgroups(kind)[0]
            if len(group) < 2:
                self._link_kind[kind] = "local"
            else:
                slowest = max(group[1:], key=lambda peer: self.network.estimate_time_s(group[0], peer, 2.0**20))
                self._link_kind[kind] = self.network.first_link_kind(group[0], slowest)
        return self._link_kind[kind]

    def pairs(self, items) -> list[tuple[str, str]]:
        """Distinct (src, dst) pairs of the collectives of `items` (CommOps), in schedule order."""
        seen: dict[tuple[str, str], None] = {}
        for item in items:
            for step in self.steps(item.group, item.op, item.nbytes):
                for s, d, _ in step:
                    seen.setdefault((s, d), None)
        return list(seen)


def flow_signature(topology, srcs: list[str], dsts: list[str]) -> np.ndarray:
    """Per sub-flow (flow index, path latency, bottleneck capacity / share of the flow): what an
    uncontended transfer's time depends on."""
    if not srcs:
        return np.zeros((0, 3))
    batch = topology.route_batch(srcs, dsts)
    if batch is None:  # endpoints the batch router does not know
        rows = []
        for i, (s, d) in enumerate(zip(srcs, dsts)):
            paths = topology.routes(s, d)
            for p in paths:
                cap = topology.capacity[list(p)].min() if p else np.inf
                rows.append((i, topology.path_latency_s(p), cap * len(paths)))
        return np.asarray(rows, dtype=float)
    starts = np.concatenate([[0], np.cumsum(batch.lengths)[:-1]])
    cap = np.full(len(batch.lengths), np.inf)
    nonempty = batch.lengths > 0
    if nonempty.any():
        cap[nonempty] = np.minimum.reduceat(topology.capacity[batch.flat], starts[nonempty])
    rows = np.column_stack([batch.owner, batch.latency, cap / batch.share])
    return rows[np.argsort(batch.owner, kind="stable")]  # the router groups flows by kind: restore order


def _split(sig: np.ndarray, flows_per_part: int, parts: int) -> list[bytes]:
    """Cut a signature of parts x flows_per_part flows into one hashable key per part."""
    owner = sig[:, 0].astype(np.int64)
    part = owner // max(flows_per_part, 1)
    local = sig.copy()
    local[:, 0] = owner % max(flows_per_part, 1)
    bounds = np.searchsorted(part, np.arange(parts + 1))
    return [local[bounds[i] : bounds[i + 1]].tobytes() for i in range(parts)]


def replica_classes(
    layout: ParallelLayout, rank_pairs: list[tuple[int, int]], slowdown: list[float]
) -> list[list[int]]:
    """Replicas grouped by identical signatures (first member = representative).

    `rank_pairs`: the (src, dst) ranks of every flow replica 0 sends in its PP transfers and its
    TP/CP collectives; replica d sends the same pairs shifted by d x (ranks per replica)."""
    per = layout.tp * layout.cp * layout.pp
    devices = layout.cluster.devices
    pairs = np.asarray(rank_pairs, dtype=np.int64).reshape(-1, 2)
    keys: dict[bytes, list[int]] = defaultdict(list)
    if len(pairs):
        shift = (np.arange(layout.dp) * per)[:, None]
        src = (pairs[:, 0][None, :] + shift).ravel()
        dst = (pairs[:, 1][None, :] + shift).ravel()
        sig = flow_signature(layout.cluster.topology, [devices[r].node for r in src], [devices[r].node for r in dst])
        parts = _split(sig, len(pairs), layout.dp)
    else:
        parts = [b""] * layout.dp
    for d in range(layout.dp):
        speed = np.asarray(slowdown[d * per : (d + 1) * per], dtype=float).tobytes()
        keys[parts[d] + speed].append(d)
    return sorted(keys.values())


def dp_rings_symmetric(layout: ParallelLayout) -> bool:
    """Whether, per stage, every TP index's DP ring sees the same (latency, capacity) on its edges."""
    if layout.dp * layout.cp < 2 or layout.tp == 1:
        return True
    for s in range(layout.pp):
        rings = [layout.dp_ring(s, t) for t in range(layout.tp)]
        n = len(rings[0])
        src = [r[i].node for r in rings for i in range(n)]
        dst = [r[(i + 1) % n].node for r in rings for i in range(n)]
        parts = _split(flow_signature(layout.cluster.topology, src, dst), n, layout.tp)
        if len(set(parts)) > 1:
            return False
    return True


def mirror_components(layout: ParallelLayout, s: int, members: list[int]) -> list[str]:
    """Components that mirror the driver of stage group (s, members[0]): its group peers and the
    groups of the other replicas in `members` - a whole host as `h{i}` where the group holds whole
    hosts (one observer call per host), single devices otherwise; the driver's own host as devices."""
    driver = layout.group(s, members[0])[0]
    out: list[str] = []
    whole = layout.whole_hosts()
    for d in members:
        group = layout.group(s, d)
        if whole:
            hosts = sorted({dev.host for dev in group})
            out += [f"h{h}" for h in hosts if h != driver.host]
            out += [dev.node for dev in group if dev.host == driver.host and dev is not driver]
        else:
            out += [dev.node for dev in group if dev is not driver]
    return out


def ring_hop_latency_s(network, rings: list[list[str]]) -> float:
    """The slowest edge latency of `rings` (uncontended, zero bytes): one hop of a ring's pipeline fill."""
    return max(
        (network.estimate_time_s(ring[i - 1], ring[i], 0.0) for ring in rings for i in range(len(ring))), default=0.0
    )


def streamed_ring(
    network, rings: list[list[str]], op: str, nbytes: float, hop_latency_s: float | None = None
) -> tuple[list, float]:
    """A ring collective (all_gather / reduce_scatter: `nbytes` the whole buffer; all_reduce: the
    per-rank buffer) on each of `rings` at once, as one flow per ring edge carrying everything that
    edge carries (hops x nbytes / n), and the pipeline-fill latency of the other hops-1 hops.
    Returns (flows, fill latency). On an uncontended uniform ring its time equals the lock-step ring
    of sim/network/collectives.py. `hop_latency_s`: `ring_hop_latency_s(network, rings)`, if known already."""
    flows: list = []
    if not rings or nbytes <= 0 or len(rings[0]) < 2:
        return flows, 0.0
    n = len(rings[0])
    hops = 2 * (n - 1) if op == "all_reduce" else n - 1
    for ring in rings:
        flows += [(ring[i], ring[(i + 1) % n], nbytes * hops / n) for i in range(n)]
    if hop_latency_s is None:
        hop_latency_s = ring_hop_latency_s(network, rings)
    return flows, (hops - 1) * hop_latency_s
