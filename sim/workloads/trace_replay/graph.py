"""The replay graph: what each rank ran, on which track, after what.

A `Node` is one piece of recorded work on one *track* of one rank: a CPU thread (`cpu:<pid/tid>`),
a GPU stream (`gpu:<pid/tid>`) or, for Chakra traces, the rank's `compute` / `comm` queue. A track
runs its nodes one at a time in recorded order; a node also waits for its `deps` (node ids of the
same rank). Kinds:

- `busy`: measured time that is no modelled operation (an op's own time outside its children, the
  gaps between a thread's top-level ops: Python, dataloading) - replayed as measured (x scale);
- `op`: a compute operation of a modelled category (ops.py) - re-timed by the device model or kept
  as measured, per category; `share` is this node's part of the op's modelled time (an op whose
  work ran as several GPU kernels);
- `collective` / `send` / `recv`: communication through the network (`call`, `peer`);
- `mark`: zero-time markers (`step_begin:N`, `step_end:N`, a collective's issue).

`from_pytorch(rank_trace)` builds the nodes of one PyTorch profiler rank (pytorch_trace.py):
- each CPU thread's top-level events in time order, gaps between them as `busy` (category `gap`);
  an event of a modelled category is one `op` unless an event inside it is a GEMM, attention or
  embedding op (or, for an elementwise op, any modelled op) or a kernel launch; any other event is
  its own time around its children (`busy`: category `gap` for ProfilerStep and record_function
  regions - Python - and `other` for ops' framework time), recursively;
- GPU kernels per stream, each after the runtime call that launched it (same `correlation` id);
  a kernel takes the category and shapes of the innermost modelled op around its launch; NCCL
  kernels are collectives (op and bytes from the nccl:/c10d:: op around the launch);
- synchronising runtime calls (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
  blocking cudaMemcpy) wait for the last kernel launched so far on every stream;
- gloo: the k-th `c10d::` collective call on the main thread issues the k-th `gloo:` op, which runs
  on its worker thread (no gaps there: the worker idles between collectives); where a collective
  ends inside a gap of the thread that issued it, the gap was that thread waiting for it: the part
  before the collective's measured end becomes a dependency, the rest stays measured time.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from sim.workloads.trace_replay.ops import MODELLED, CollectiveCall, OpRecord, category, collective_of
from sim.workloads.trace_replay.pytorch_trace import STEP_RE, Event, RankTrace

LAUNCH_RE = re.compile(r"^(cuda|cu|hip)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|MemcpyAsync|"
                       r"MemsetAsync|GraphLaunch|Memcpy2DAsync|ModuleLaunchKernel|LaunchKernelEx)")  # fmt: skip
SYNC_RE = re.compile(r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy|Memcpy2D|Memset)$")
WORKER_COLLECTIVE_PREFIXES = ("gloo:",)
# an op of a modelled category is one `op` unless an op inside it ranks as high (linear holds addmm,
# matmul holds mm; a GEMM's bias copy inside addmm is part of the GEMM)
PRIORITY = {"gemm": 2, "attention": 2, "embedding": 2, "elementwise": 1}


@dataclass
class Node:
    id: int
    track: str
    kind: str  # busy | op | collective | send | recv | mark
    name: str
    category: str
    measured_s: float = 0.0
    deps: list[int] = field(default_factory=list)
    op: OpRecord | None = None
    share: float = 1.0
    call: CollectiveCall | None = None
    peer: int | None = None
    mark: str = ""
    measured_start_s: float = 0.0  # when it started in the trace (for inferred waits)


@dataclass
class RankGraph:
    rank: int
    nodes: list[Node]
    measured_steps_s: dict[int, float]  # ProfilerStep number -> its measured duration
    source: str = ""

    def by_track(self) -> dict[str, list[Node]]:
        tracks: dict[str, list[Node]] = {}
        for n in self.nodes:
            tracks.setdefault(n.track, []).append(n)
        return tracks


class _Builder:
    def __init__(self, trace: RankTrace) -> None:
        self.trace = trace
        self.nodes: list[Node] = []
        self.launch_node: dict[int, int] = {}  # correlation id -> node id of the launching call
        self.launch_event: dict[int, Event] = {}
        self.issues: list[tuple[int, str]] = []  # (mark node id, thread) of c10d collective calls, in order
        self.syncs: list[tuple[int, float]] = []  # (node id, measured start) of synchronising calls
        self.pinned: set[int] = set()  # nodes others depend on: later measured time is not merged into them

    def add(self, track: str, kind: str, name: str, cat: str, measured_s: float = 0.0, start: float = 0.0, **kw):
        node = Node(len(self.nodes), track, kind, name, cat, measured_s, measured_start_s=start, **kw)
        self.nodes.append(node)
        return node

    def busy(self, track: str, seconds: float, cat: str, name: str, start: float) -> None:
        if seconds <= 0:
            return
        last = self.nodes[-1] if self.nodes else None
        mergeable = last is not None and last.id not in self.pinned
        if mergeable and last.track == track and last.kind == "busy" and last.category == cat:
            last.measured_s += seconds  # merge adjacent measured time of one kind
            return
        self.add(track, "busy", name, cat, seconds, start)

    # ---- CPU threads ---------------------------------------------------------------------------
    def thread(self, tid: str, roots: list[Event], worker: bool) -> None:
        track = f"cpu:{tid}"
        prev_end = roots[0].start_s if roots else 0.0
        for ev in roots:
            if not worker:
                self.busy(track, ev.start_s - prev_end, "gap", "gap", prev_end)
            self.event(track, ev, worker)
            prev_end = max(prev_end, ev.end_s)

    def event(self, track: str, ev: Event, worker: bool = False) -> None:
        step = STEP_RE.match(ev.name)
        cat = category(ev.record)
        if step:
            self.add(track, "mark", ev.name, "other", start=ev.start_s, mark=f"step_begin:{step.group(1)}")
            self.container(track, ev)
            self.add(track, "mark", ev.name, "other", start=ev.end_s, mark=f"step_end:{step.group(1)}")
        elif worker and ev.name.startswith(WORKER_COLLECTIVE_PREFIXES):
            call = collective_of(ev.record, ev.args)
            self.add(track, "collective", ev.name, "collective", ev.dur_s, ev.start_s, op=ev.record, call=call)
        elif SYNC_RE.match(ev.name):
            node = self.add(track, "mark", ev.name, "other", start=ev.start_s, mark="sync")
            self.syncs.append((node.id, ev.start_s))
        elif LAUNCH_RE.match(ev.name):
            node = self.add(track, "busy", ev.name, "other", ev.dur_s, ev.start_s)
            corr = ev.args.get("correlation")
            if corr is not None:
                self.launch_node[corr] = node.id
                self.pinned.add(node.id)
                self.launch_event[corr] = ev
        elif cat in MODELLED and not any(
            PRIORITY.get(category(c.record), 0) >= PRIORITY[cat] or LAUNCH_RE.match(c.name)
            for c in ev.walk()
            if c is not ev
        ):
            self.add(track, "op", ev.name, cat, ev.dur_s, ev.start_s, op=ev.record)
        else:
            self.container(track, ev)
            if ev.name.startswith("c10d::") and cat == "collective" and not worker:
                node = self.add(track, "mark", ev.name, "collective", start=ev.end_s, mark="issue")
                self.issues.append((node.id, track))

    def container(self, track: str, ev: Event) -> None:
        own = "gap" if ev.cat == "user_annotation" else "other"  # a step or record_function region: Python
        t = ev.start_s
        for child in ev.children:
            self.busy(track, child.start_s - t, own, ev.name, t)
            self.event(track, child)
            t = max(t, child.end_s)
        self.busy(track, ev.end_s - t, own, ev.name, t)

    # ---- GPU streams ---------------------------------------------------------------------------
    def stream(self, sid: str, kernels: list[Event]) -> list[Node]:
        track, out = f"gpu:{sid}", []
        for k in kernels:
            corr = k.args.get("correlation")
            deps = [self.launch_node[corr]] if corr in self.launch_node else []
            launcher = self.launch_event.get(corr)
            owner = _modelled_ancestor(launcher)
            comm = _collective_ancestor(launcher) if k.name.lower().startswith("nccl") else None
            if comm is not None:
                node = self.add(track, "collective", k.name, "collective", k.dur_s, k.start_s, deps=deps)
                node.call, node.op = collective_of(comm.record, comm.args), comm.record
            elif owner is not None:
                node = self.add(
                    track, "op", k.name, category(owner.record), k.dur_s, k.start_s, deps=deps, op=owner.record
                )
            else:
                node = self.add(track, "busy", k.name, "other", k.dur_s, k.start_s, deps=deps)
            out.append(node)
        # an op whose work ran as several kernels: each kernel takes its measured share of the model time
        by_owner: dict[int, list[Node]] = {}
        for n in out:
            if n.kind == "op":
                by_owner.setdefault(id(n.op), []).append(n)
        for group in by_owner.values():
            total = sum(n.measured_s for n in group)
            for n in group:
                n.share = n.measured_s / total if total > 0 else 1.0 / len(group)
        return out


def _modelled_ancestor(ev: Event | None) -> Event | None:
    while ev is not None:
        if category(ev.record) in MODELLED:
            return ev
        ev = ev.parent
    return None


def _collective_ancestor(ev: Event | None) -> Event | None:
    found = None
    while ev is not None:
        if category(ev.record) == "collective" and collective_of(ev.record, ev.args) is not None:
            found = found or ev
            if ev.args.get("In msg nelems") is not None or ev.name.startswith("nccl:"):
                return ev
        ev = ev.parent
    return found


def from_pytorch(trace: RankTrace) -> RankGraph:
    b = _Builder(trace)
    workers = {
        tid
        for tid, roots in trace.threads.items()
        if tid != trace.main_thread and roots and all(r.name.startswith(WORKER_COLLECTIVE_PREFIXES) for r in roots)
    }
    for tid, roots in trace.threads.items():
        b.thread(tid, roots, tid in workers)
    kernels = {sid: b.stream(sid, evs) for sid, evs in trace.streams.items()}
    _link_syncs(b, kernels)
    _link_gloo(b, workers)
    steps = {int(STEP_RE.match(s.name).group(1)): s.dur_s for s in trace.steps}
    return RankGraph(trace.rank, b.nodes, steps, trace.source)


def _link_syncs(b: _Builder, kernels: dict[str, list[Node]]) -> None:
    """A synchronising call waits for the last kernel of each stream launched before it."""
    for node_id, start in b.syncs:
        for nodes in kernels.values():
            launched = [n for n in nodes if n.deps and b.nodes[n.deps[0]].measured_start_s <= start]
            if launched:
                b.nodes[node_id].deps.append(launched[-1].id)


def _link_gloo(b: _Builder, workers: set[str]) -> None:
    """k-th c10d call issues the k-th worker collective; a gap of the issuing thread in which the
    collective ended was a wait for it."""
    works = sorted(
        (n for n in b.nodes if n.kind == "collective" and n.track[4:] in workers), key=lambda n: n.measured_start_s
    )
    gaps: dict[str, list[Node]] = {}
    for n in b.nodes:
        if n.kind == "busy" and n.category == "gap":
            gaps.setdefault(n.track, []).append(n)
    starts = {t: [n.measured_start_s for n in ns] for t, ns in gaps.items()}
    for (issue_id, thread), work in zip(b.issues, works):
        work.deps.append(issue_id)
        end = work.measured_start_s + work.measured_s
        i = bisect.bisect_right(starts.get(thread, []), end) - 1
        if i < 0:
            continue
        gap = gaps[thread][i]
        if gap.id > issue_id and gap.measured_start_s <= end <= gap.measured_start_s + gap.measured_s:
            waited = end - gap.measured_start_s
            gap.measured_s -= waited
            gap.measured_start_s = end
            starts[thread][i] = end
            gap.deps.append(work.id)
