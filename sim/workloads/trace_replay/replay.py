"""Replaying rank graphs (graph.py) on a simulated cluster.

Every track of every rank is one SimPy process that takes its nodes in recorded order: it waits for
a node's dependencies, then runs it -
- `busy` / `op` nodes on the rank's `Device` (sim/engine/compute.py `Device.run`, on a stream named
  after the track, so spans and busy time are recorded like any kind's kernels) for the time
  `duration_s(node)` gives (the device model's, or the measured time x scale);
- `collective` nodes meet their peers: the k-th collective (by recorded start) of every rank is one
  collective; when the last rank arrives it runs through the network with the same implementation
  the `collective` kind uses (sim/network/collectives.py `collective`; NCCL's protocol model, or the
  lock-step schedule for gloo collectives and with `protocol: lockstep`), and each rank continues
  when it completes. broadcast runs as an all_gather of its bytes, reduce as a reduce_scatter, barrier
  as a 4-byte all_reduce (their nearest schedules). `send`/`recv` pairs (Chakra) are one transfer;
- `mark` nodes take no time and note when they were reached (steps).

`Replay.run()` returns per-rank timings (`RankTimes`) for the metrics.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from sim.errors import ScenarioError
from sim.network.collectives import OPS, collective
from sim.workloads.trace_replay.graph import Node, RankGraph

NEAREST_OP = {"broadcast": "all_gather", "reduce": "reduce_scatter", "barrier": "all_reduce"}
BARRIER_BYTES = 4.0


@dataclass
class RankTimes:
    marks: dict[str, float] = field(default_factory=dict)
    by_category_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    end_s: float = 0.0


class Replay:
    def __init__(
        self,
        sim,
        cluster,
        graphs: list[RankGraph],
        duration_s: Callable[[Node], float],
        algorithm: str = "auto",
        collective_time: str = "network",
        protocol: str = "auto",
    ) -> None:
        self.sim, self.cluster, self.graphs = sim, cluster, graphs
        self.duration_s, self.algorithm, self.collective_time = duration_s, algorithm, collective_time
        self.protocol = protocol
        self.done = [{n.id: sim.env.event() for n in g.nodes} for g in graphs]
        self.times = [RankTimes() for _ in graphs]
        self.index = [self._collective_index(g) for g in graphs]
        self.meetings: dict[tuple, dict] = {}
        self.group = [cluster.devices[i].node for i in range(len(graphs))]
        counts = {g.rank: sum(1 for key in idx.values() if key[0] == "coll") for g, idx in zip(graphs, self.index)}
        if len(set(counts.values())) > 1:
            raise ScenarioError(
                "ranks recorded different numbers of collectives (profile the same steps on every rank)",
                path="workload.trace",
                value=counts,
            )

    @staticmethod
    def _collective_index(g: RankGraph) -> dict[int, tuple]:
        """Rendezvous key of each communication node: ('coll', k) for the k-th collective by recorded
        start, ('p2p', src, dst, k) for the k-th message between a pair."""
        out: dict[int, tuple] = {}
        colls = sorted((n for n in g.nodes if n.kind == "collective"), key=lambda n: (n.measured_start_s, n.id))
        for k, n in enumerate(colls):
            out[n.id] = ("coll", k)
        pairs: dict[tuple, int] = defaultdict(int)
        for n in g.nodes:
            if n.kind in ("send", "recv") and n.peer is not None:
                src, dst = (g.rank, n.peer) if n.kind == "send" else (n.peer, g.rank)
                out[n.id] = ("p2p", src, dst, pairs[(src, dst)])
                pairs[(src, dst)] += 1
        return out

    def run(self):
        procs = [
            self.sim.process(self._track(r, nodes))
            for r, g in enumerate(self.graphs)
            for nodes in g.by_track().values()
        ]
        yield self.sim.all_of(procs)
        return self.times

    def _track(self, r: int, nodes: list[Node]):
        device = self.cluster.devices[r]
        done, times = self.done[r], self.times[r]
        for node in nodes:
            deps = [done[d] for d in node.deps if not done[d].triggered]
            if deps:
                yield self.sim.all_of(deps)
            start = self.sim.now
            if node.kind in ("busy", "op"):
                seconds = self.duration_s(node)
                if seconds > 0:
                    yield device.run(node.name, seconds, stream=node.track, category=node.category)
            elif node.kind in ("collective", "send", "recv"):
                if self.collective_time == "measured":
                    yield self.sim.timeout(node.measured_s)
                else:
                    yield self._meet(r, node)
                self.sim.span(device.node, node.track, node.name, start, category="comm")
            elif node.mark.startswith("step_"):
                times.marks[node.mark] = start
            times.by_category_s[node.category] += self.sim.now - start
            times.end_s = max(times.end_s, self.sim.now)
            done[node.id].succeed()

    def _meet(self, r: int, node: Node):
        key = self.index[r][node.id]
        meeting = self.meetings.get(key)
        if meeting is None:
            meeting = self.meetings[key] = {"event": self.sim.env.event(), "arrived": 0, "node": node}
        meeting["arrived"] += 1
        if key[0] == "p2p":
            if meeting["arrived"] == 2:
                _, src, dst, _ = key
                nbytes = node.call.nbytes if node.call else 0.0
                self.sim.process(self._finish(meeting, self._transfer(src, dst, nbytes)))
        elif meeting["arrived"] == len(self.graphs):
            self.sim.process(self._finish(meeting, self._collective(meeting["node"])))
        return meeting["event"]

    def _transfer(self, src: int, dst: int, nbytes: float):
        net = self.cluster.network
        return net.transfer(self.group[src], self.group[dst], nbytes, name="send_recv") if nbytes > 0 else None

    def _collective(self, node: Node):
        call = node.call
        if call is None or len(self.group) < 2:
            return None
        op = NEAREST_OP.get(call.op, call.op)
        nbytes = BARRIER_BYTES if call.op == "barrier" else call.nbytes
        if op not in OPS or nbytes <= 0:
            return None
        algorithm = self.algorithm
        if algorithm in ("tree",) and op != "all_reduce" or algorithm == "direct" and op not in ("all_to_all",):
            algorithm = "auto"
        protocol: str | None = self.protocol
        if protocol == "lockstep" or (protocol == "auto" and node.name.startswith("gloo:")):
            protocol = None  # gloo runs plain point-to-point steps, not NCCL's protocols
        proc, _ = collective(self.cluster.network, op, self.group, nbytes, algorithm, name=node.name, protocol=protocol)
        return proc

    def _finish(self, meeting: dict, proc):
        if proc is not None:
            yield proc
        meeting["event"].succeed()
