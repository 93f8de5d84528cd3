"""One training run on the cluster: pipeline stages as SimPy processes, kernels on device streams,
collectives and p2p transfers as network flows.

Per simulated stage group (s, d) one process drives the group's GPUs (they run the same kernels;
TP and CP collectives move every member's flows). With expert parallelism (ep > 1, a MoE model) the
group is the block of ep consecutive replicas' stage groups (replicas d .. d + ep - 1), whose
all-to-alls couple them every MoE layer: one process drives the block, its EP all-to-alls move every
member's flows, and its DP collectives reduce the dense gradients over dp x cp ranks and the expert
gradients over the dp x cp / ep ranks holding the same experts. Per iteration:
1. sharded DP (`fsdp`): all-gathers of each DP unit's 16-bit weights (a layer, or a whole chunk), issued
   on the `comm` stream in the order the chunks are first used; a chunk's first forward waits for
   each unit's weights just before the layer that needs them;
2. the schedule's ops (training_schedule.py) on the `compute` stream: a forward waits for the
   activations of the previous virtual stage, a backward for the gradient of the next one; each op
   runs its layers' kernels, blocking on their TP/CP collectives (Megatron without TP overlap; with
   `tp_comm_overlap` a TP all-gather/reduce-scatter runs beside its GEMM), then sends its output to
   the neighbouring stage group as one flow per member (asynchronous: it overlaps the next op).
   Every TP/CP/EP collective and every pipeline send is one NCCL operation: it pays NCCL's per-
   operation software latency (sim/network/operation_cost.py: base latency and the hop latency beyond
   the path's, for its algorithm and the protocol NCCL's tuner picks for the size) before its flows,
   which carry the protocol's wire bytes;
3. in a chunk's last backward, each unit's gradients are reduce-scattered (`ddp`: all-reduced) on the
   `comm` stream as soon as they are complete, overlapping the rest of the backward;
4. the gradient-norm all-reduce over the pipeline (a barrier between the stages), then the
   optimizer step (a memory-bound kernel over the local shard).

DP collectives are streamed rings (training_layout.streamed_ring). Replicas reach a DP collective
independently; it starts when the last one arrives.

Replay (exact where the TP/CP traffic has its links to itself: always on the analytical network, on
the flow network when a stage group is one host or one GPU; the mechanism of sim/engine/replay.py):
the first time a layer of a given kind runs on a group of a given signature it is simulated kernel
by kernel and collective by collective and its timeline captured (a `SpanTape`, keyed by the
layer's name and the group's signature); later layers of that kind replay the tape (every span
re-recorded), and later ops of the same shape (keyed by kind, layers and signature) hold the
compute stream for the recorded duration and record one span. The pipeline's p2p flows and the
DP rings are network steps with their own `StepKey`s (set up once, replayed by the flow network).
The TP/CP flows of replayed layers are not sent again: the links table and network energy count the
first ones only. A replayed layer records its tape again (its TP/CP waits on the link kind they
leave by, GroupComm.link_kind); a replayed op records its kernels' time and then its exposed waits
per link kind (Capture.summary), so the critical path and the energy meter charge them as they do
the simulated ones. GPUs standing in (other group members, the members of a representative's class)
mirror the driver's busy periods as compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hardware_models.gpu import DTYPE_BYTES
from sim.engine.replay import SpanTape, StepKey
from sim.models.kernel import Kernel
from sim.models.training_shapes import CommOp
from sim.network.collectives import collective, run_schedule
from sim.network.operation_cost import operation_cost
from sim.workloads.training.accounting import DriverStats
from sim.workloads.training.layout import (
    GroupComm,
    flow_signature,
    mirror_components,
    ring_hop_latency_s,
    streamed_ring,
)
from sim.workloads.training.plan import kernel_run, overlap_groups

# Memory traffic of one Adam step per parameter (a memory-bound kernel): read the fp32 gradient, master
# weight and both moments (4 x 4 B), write master and moments (3 x 4 B) and the 16-bit weight (2 B) = 30 B.
ADAM_STEP_TRAFFIC_BYTES_PER_PARAM = 30.0


@dataclass
class Capture:
    """The totals of a segment or op, and a segment's recorded timeline (spans as offsets from its
    start) where segments are replayed (`TrainingRun.replay`)."""

    duration_s: float = 0.0
    kernel_s: float = 0.0
    comm_s: float = 0.0
    flop: float = 0.0
    executed_flop: float = 0.0
    tape: SpanTape = field(default_factory=SpanTape)
    comm_s_by_link: dict[str, float] = field(default_factory=dict)  # exposed comm_s by the link kind it waited on
    comm_s_by_group: dict[str, float] = field(default_factory=dict)  # exposed comm_s by collective group (tp, cp, ep)
    _summary: SpanTape | None = field(default=None, init=False, repr=False, compare=False)

    def add(self, other: Capture) -> None:
        """Another part's totals (an op's segments: their spans are recorded as they run; a replayed
        op records its `summary`, a replayed segment its own tape)."""
        self.kernel_s += other.kernel_s
        self.comm_s += other.comm_s
        for kind, seconds in other.comm_s_by_link.items():
            self.comm_s_by_link[kind] = self.comm_s_by_link.get(kind, 0.0) + seconds
        for group, seconds in other.comm_s_by_group.items():
            self.comm_s_by_group[group] = self.comm_s_by_group.get(group, 0.0) + seconds
        self.flop += other.flop
        self.executed_flop += other.executed_flop

    def summary(self) -> SpanTape:
        """The op as its kernels' time, then its exposed waits per link kind, back to back: what a
        replayed op records, names prefixed with the op's (its critical path and busy time add up as
        the captured op's do). Built once, when the capture is complete."""
        if self._summary is None:
            tape = SpanTape()
            tape.record("compute", "kernels", 0.0, self.kernel_s, flop=self.flop, category="compute")
            t = self.kernel_s
            for kind, seconds in self.comm_s_by_link.items():
                tape.record(kind, "exposed comm", t, t + seconds, category="comm")
                t += seconds
            self._summary = tape
        return self._summary


class Group:
    """Stage s of replica d (of the ep replicas d .. d + ep - 1 with expert parallelism), standing for
    the replicas `members`."""

    def __init__(self, layout, network, s: int, d: int, members: list[int], algorithm: str, ep: int = 1) -> None:
        self.s, self.d, self.members = s, d, members
        self.devices = [dev for e in range(ep) for dev in layout.group(s, d + e)]
        self.driver = self.devices[0]
        self.comm = GroupComm(network, self.devices, layout.tp, layout.cp, algorithm, ep)
        self.slowdown = max(dev.slowdown for dev in self.devices)
        self.mirrors = mirror_components(layout, s, members)
        self.stats = DriverStats()
        self._signature: bytes | None = None

    def signature(self, topology, plan) -> bytes:
        """What the timing of this group's ops depends on: the flows of its collectives (every item
        its stage can run, `plan.stage_items`) and its speed. Computed once."""
        if self._signature is None:
            items = plan.stage_items(self.s)
            pairs = self.comm.pairs(i for i in items if isinstance(i, CommOp))
            sig = flow_signature(topology, [p[0] for p in pairs], [p[1] for p in pairs])
            self._signature = sig.tobytes() + np.float64(self.slowdown).tobytes()
        return self._signature


class TrainingRun:
    def __init__(self, sim, cluster, layout, plan, config, classes: list[list[int]], replay: bool) -> None:
        self.sim, self.cluster, self.net, self.layout = sim, cluster, cluster.network, layout
        self.plan, self.config, self.replay = plan, config, replay
        self.classes = classes
        self.ep = config.parallelism.ep
        self.representative = len(classes) * self.ep < layout.dp  # some replicas stand in for others
        self.groups = {
            (s, m[0]): Group(layout, self.net, s, m[0], m, config.collective_algorithm, self.ep)
            for m in classes
            for s in range(layout.pp)
        }
        self._events: dict[tuple, object] = {}
        self._rendezvous: dict[tuple, list] = {}
        self._segments: dict[tuple, Capture] = {}
        self._ops: dict[tuple, Capture] = {}
        self._pp_flows: dict[tuple, tuple[list, StepKey, float]] = {}  # p2p flows between two stages, latency
        self._dp_steps: dict[tuple, tuple[list, float, StepKey]] = {}  # (flows, fill latency, their key)
        self._dp_rings: dict[int, tuple[list, float]] = {}  # stage -> (DP rings, hop latency)
        self._expert_rings: dict[int, tuple[list, float]] = {}  # stage -> (expert DP rings, hop latency)
        self.iteration_end_s: list[float] = [0.0] * config.iterations
        self.first_captures: dict[str, Capture] = {}

    # ---- the run ----------------------------------------------------------------------------
    def run(self):
        procs = [self.sim.process(self._stage(g)) for g in self.groups.values()]
        yield self.sim.all_of(procs)
        for g in self.groups.values():
            self._flush_mirror(g)

    def _stage(self, g: Group):
        plan, cfg = self.plan, self.config
        ops = plan.ops[g.s]
        reduce_op = "reduce_scatter" if cfg.data_parallel == "fsdp" else "all_reduce"
        for it in range(cfg.iterations):
            gathers: dict[tuple[int, int], object] = {}
            if cfg.data_parallel == "fsdp":
                for c in plan.chunk_order[g.s]:
                    for u in range(len(plan.dp_units(g.s, c))):
                        gathers[(c, u)] = self.sim.process(self._dp(g, it, c, u, "all_gather"))
            reductions: list = []
            for i, op in enumerate(ops):
                j = op.virtual_stage(g.s, self.layout.pp)
                if (op.kind == "F" and j > 0) or (op.kind == "B" and j < plan.virtual_stages - 1):
                    key = (g.d, it, op.kind, op.microbatch, j)
                    yield self._event(key)
                    del self._events[key]
                gate = done = None
                if op.kind == "F" and plan.first_forward[g.s][op.chunk] == i and gathers:
                    gate = {u: gathers[(op.chunk, u)] for u in range(len(plan.dp_units(g.s, op.chunk)))}
                if plan.last_backward[g.s][op.chunk] == i:

                    def done(u, c=op.chunk, it=it, reductions=reductions):
                        reductions.append(self.sim.process(self._dp(g, it, c, u, reduce_op)))

                yield from self._op(g, op, j, gate, done)
                if op.kind == "F" and j < plan.virtual_stages - 1:
                    self._send(g, it, "F", op.microbatch, j, j + 1)
                elif op.kind == "B" and j > 0:
                    self._send(g, it, "B", op.microbatch, j, j - 1)
            yield self.sim.all_of(reductions)
            yield from self._grad_norm(g, it)
            yield from self._optimizer(g)
            self.iteration_end_s[it] = max(self.iteration_end_s[it], self.sim.now)

    # ---- compute ----------------------------------------------------------------------------
    def _signature(self, g: Group) -> bytes:
        return g.signature(self.net.topology, self.plan)

    def _op(self, g: Group, op, j: int, gate: dict | None = None, done=None):
        """One forward or backward pass of a chunk on the group's compute stream. `gate`: DP unit ->
        its all-gather (the chunk's first forward waits for each unit's weights before using them);
        `done(unit)`: called when a unit's gradients are complete (the chunk's last backward)."""
        segments = self.plan.expanded(op.kind, j)
        key = (op.kind, tuple(name for name, _, _ in segments), self._signature(g)) if self.replay else None
        with g.driver.stream("compute").request() as req:
            yield req
            start = self.sim.now
            st = g.stats
            hooked = gate is not None or done is not None
            cap = self._ops.get(key) if self.replay and not hooked else None
            if cap is None:
                cap = Capture()
                for k, (name, seg, unit) in enumerate(segments):
                    if gate and unit in gate:
                        t0 = self.sim.now
                        yield gate.pop(unit)
                        st.waits_in_ops_s += self.sim.now - t0
                    part = yield from self._segment(
                        g, f"{op.kind}{op.microbatch} v{j} {name}", name.split(" L")[0], seg
                    )
                    cap.add(part)
                    if done is not None and (k + 1 == len(segments) or segments[k + 1][2] != unit):
                        done(unit)
                cap.duration_s = self.sim.now - start
                if not hooked:
                    self.first_captures.setdefault(f"{op.kind} v{j}", cap)
                    if self.replay:
                        self._ops[key] = cap
            else:
                yield self.sim.timeout(cap.duration_s)
                cap.summary().replay(self.sim, g.driver.node, start, prefix=f"{op.kind}{op.microbatch} v{j} ")
            st.ops.append((start, self.sim.now))
            st.kernel_s += cap.kernel_s
            st.comm_in_ops_s += cap.comm_s
            for group, seconds in cap.comm_s_by_group.items():
                st.comm_in_ops_by_group[group] = st.comm_in_ops_by_group.get(group, 0.0) + seconds
            st.flop += cap.flop
            st.executed_flop += cap.executed_flop
            self._mirror(g, start, self.sim.now)

    def _segment(self, g: Group, label: str, name: str, items):
        """Run one layer (or the embedding / LM-head part) kernel by kernel; returns its Capture."""
        key = (name, self._signature(g)) if self.replay else None
        cached = self._segments.get(key) if key is not None else None
        start = self.sim.now
        if cached is not None:
            yield self.sim.timeout(cached.duration_s)
            cached.tape.replay(self.sim, g.driver.node, start, prefix=f"{label} ")
            return cached
        cap = Capture()
        groups = overlap_groups(items, self.config.tp_comm_overlap)
        i = 0
        while i < len(groups):
            run = kernel_run(groups, i)
            if run:  # consecutive kernels alone: one wake-up at the last one's end
                yield from self._kernels(g, cap, label, start, run)
                i += len(run)
                continue
            group = groups[i]
            i += 1
            t0 = self.sim.now
            waits = []
            for item in group:
                if isinstance(item, Kernel):
                    waits.append(self.sim.timeout(item.duration_s * g.slowdown))
                else:
                    steps = g.comm.steps(item.group, item.op, item.nbytes)
                    latency_s = g.comm.latency_s(item.group, item.op, item.nbytes)
                    waits.append(self._collective(steps, latency_s, f"{label} {item.name}", alone=len(group) == 1))
            yield waits[0] if len(waits) == 1 else self.sim.all_of(waits)
            kernel_s, link, collective = 0.0, "local", None
            for item in group:
                if isinstance(item, Kernel):
                    d = item.duration_s * g.slowdown
                    kernel_s += d
                    cap.flop += item.flop
                    cap.executed_flop += item.executed_flop
                    span = ("compute", item.name, t0 - start, t0 + d - start, item.nbytes, item.flop, item.category)
                else:
                    link = g.comm.link_kind(item.group)  # the link its flows leave by: its resource
                    collective = item.group
                    span = (link, item.name, t0 - start, self.sim.now - start, item.nbytes, 0.0, "comm")
                self._record(g, cap, label, start, span)
            exposed = max(self.sim.now - t0 - kernel_s, 0.0)  # communication not hidden by a kernel
            cap.kernel_s += kernel_s
            cap.comm_s += exposed
            if exposed > 0 and link != "local":
                cap.comm_s_by_link[link] = cap.comm_s_by_link.get(link, 0.0) + exposed
            if exposed > 0 and collective is not None:
                cap.comm_s_by_group[collective] = cap.comm_s_by_group.get(collective, 0.0) + exposed
        cap.duration_s = self.sim.now - start
        if key is not None:
            self._segments[key] = cap
        return cap

    def _kernels(self, g: Group, cap: Capture, label: str, start: float, kernels: list):
        """Kernels back to back on the compute stream: each starts where the previous ends, as one
        timeout per kernel has them (t + d, in order, to the bit), with one event at the last end;
        their spans are then recorded in order, each caused by the one before, as one by one."""
        durations = [item.duration_s * g.slowdown for item in kernels]
        t = self.sim.now
        t0s = []
        for d in durations:
            t0s.append(t)
            t = t + d
        wake = self.sim.env.event()
        self.sim.env.schedule_at(wake, t)
        yield wake
        record, span, node = cap.tape.record, self.sim.recorder.span, g.driver.node  # `_record`, unrolled
        replay = self.replay
        for item, t0, d in zip(kernels, t0s, durations):
            cap.flop += item.flop
            cap.executed_flop += item.executed_flop
            rel0, rel1 = t0 - start, t0 + d - start
            if replay:
                record("compute", item.name, rel0, rel1, item.nbytes, item.flop, item.category)
            span(
                node,
                "compute",
                f"{label} {item.name}",
                start + rel0,
                start + rel1,
                item.nbytes,
                item.flop,
                item.category,
            )
            cap.kernel_s += d
            cap.comm_s += max((t0 + d) - t0 - d, 0.0)  # as a kernel's own wait has it: 0 or a rounding

    def _record(self, g: Group, cap: Capture, label: str, start: float, span: tuple) -> None:
        """Record a span of a segment (offsets from its `start`), and on its tape where segments are
        replayed (`_segment`)."""
        if self.replay:
            cap.tape.record(*span)
        self.sim.span(
            g.driver.node,
            span[0],
            f"{label} {span[1]}",
            start + span[2],
            start + span[3],
            nbytes=span[4],
            flop=span[5],
            category=span[6],
        )

    def _collective(self, steps: list, latency_s: float, name: str, alone: bool = False):
        """A TP / CP / EP collective: NCCL's per-operation software latency, then its flows. `alone`:
        nothing is started beside it (then its latency is a timeout whose callback starts the flows,
        without a process: the same events in the same order, less one)."""
        if not steps:
            return self.sim.timeout(0)
        if latency_s <= 0:
            return run_schedule(self.net, steps, name=name)
        if alone:
            done = self.sim.env.event()

            def flows(_e) -> None:
                ended = run_schedule(self.net, steps, name=name)
                if ended.callbacks is None:  # processed already
                    done.succeed()
                else:
                    ended.callbacks.append(lambda _e: done.succeed())

            self.sim.timeout(latency_s).callbacks.append(flows)
            return done

        def proc():
            yield self.sim.timeout(latency_s)
            yield run_schedule(self.net, steps, name=name)

        return self.sim.process(proc())

    def _optimizer(self, g: Group):
        nbytes = self.plan.optimizer_step_bytes(g.s, ADAM_STEP_TRAFFIC_BYTES_PER_PARAM)
        duration = g.driver.spec.memory_time_s(nbytes) * g.slowdown
        with g.driver.stream("compute").request() as req:
            yield req
            start = self.sim.now
            yield self.sim.timeout(duration)
            self.sim.span(
                g.driver.node, "compute", "optimizer step", start, self.sim.now, nbytes=nbytes, category="elementwise"
            )
        g.stats.ops.append((start, self.sim.now))
        g.stats.optimizer_s += self.sim.now - start
        self._mirror(g, start, self.sim.now)

    # ---- pipeline p2p -------------------------------------------------------------------------
    def _send(self, g: Group, it: int, kind: str, mb: int, j_from: int, j_to: int) -> None:
        p = self.layout.pp
        s_to = j_to % p
        key = (g.d, it, kind, mb, j_to)
        if s_to == g.s:  # the same GPUs (no pipeline parallelism)
            self._event(key).succeed()
            return
        pp = self._pp_flows.get((g.d, g.s, s_to))
        if pp is None:
            dst = self.groups[(s_to, g.d)].devices
            cost = operation_cost(self.net, "send_recv", [g.devices[0].node, dst[0].node], self.plan.p2p_bytes)
            wire = self.plan.p2p_bytes * cost.wire_factor
            flows = [(a.node, b.node, wire) for a, b in zip(g.devices, dst)]
            step = StepKey(f"pp {g.s}->{s_to} replica {g.d}")
            pp = self._pp_flows[(g.d, g.s, s_to)] = (flows, step, cost.software_latency_s)
        start = self.sim.now
        name = f"pp {kind}{mb} v{j_from}->v{j_to}"
        receiver = self.groups[(s_to, g.d)]

        def arrived(_e):
            receiver.stats.comm.append((start, self.sim.now))
            self._event(key).succeed()

        def send(_e=None):
            self.net.transfer_many(pp[0], name=name, key=pp[1]).callbacks.append(arrived)

        if pp[2] > 0:  # NCCL's per-operation software latency of the send, then its flows
            self.sim.timeout(pp[2]).callbacks.append(send)
        else:
            send()

    def _event(self, key: tuple):
        ev = self._events.get(key)
        if ev is None:
            ev = self._events[key] = self.sim.env.event()
        return ev

    # ---- data parallelism ---------------------------------------------------------------------
    def _dp(self, g: Group, it: int, chunk: int, unit: int, op: str):
        with g.driver.stream("comm").request() as req:
            yield req
            start = self.sim.now
            key = ("dp", it, g.s, chunk, unit, op)
            yield self._meet(key, len(self.classes), lambda: self._dp_flows(g.s, chunk, unit, op))
            if self.sim.now > start:
                rings = self._dp_rings.get(g.s, ([], 0.0))[0]
                link = self.net.first_link_kind(rings[0][0], rings[0][1]) if rings and len(rings[0]) > 1 else "nic"
                self.sim.span(  # on the link kind the DP ring leaves by: the resource its wait is charged to
                    g.driver.node, link, f"dp {op} chunk {chunk} unit {unit}", start, self.sim.now, category="comm"
                )
                g.stats.comm.append((start, self.sim.now))

    def _meet(self, key: tuple, parties: int, launch):
        """A rendezvous: the event fires when `launch()` (started by the last of `parties`) ends."""
        entry = self._rendezvous.setdefault(key, [0, self.sim.env.event()])
        entry[0] += 1
        if entry[0] == parties:
            done = entry[1]
            del self._rendezvous[key]

            def proc():
                yield from launch()
                done.succeed()

            self.sim.process(proc())
        return entry[1]

    def _dp_flows(self, s: int, chunk: int, unit: int, op: str):
        flows, fill_s, key = self._dp_schedule(s, chunk, unit, op)
        if flows:
            yield self.net.transfer_many(flows, name=f"dp {op} stage {s} chunk {chunk} unit {unit}", key=key)
        if fill_s > 0:
            yield self.sim.timeout(fill_s)

    def _dp_schedule(self, s: int, chunk: int, unit: int, op: str) -> tuple[list, float, StepKey]:
        """Streamed rings: one flow per ring edge with its whole share (the dense parameters over the
        dp x cp ranks, experts over the dp x cp / ep ranks holding them, at once); returns (flows,
        fill latency, the flows' step key)."""
        key = (s, chunk, unit, op)
        if key not in self._dp_steps:
            lay = self.layout
            n = lay.dp * lay.cp
            per_param = DTYPE_BYTES[self.config.dtype] if op == "all_gather" else DTYPE_BYTES[self.config.grad_dtype]
            nbytes = self.plan.dp_units(s, chunk)[unit] * per_param
            tps = range(1) if self.representative else range(lay.tp)  # representatives: TP rank 0's ring
            if s not in self._dp_rings:  # the same rings for every chunk, unit and op
                rings = [[dev.node for dev in lay.dp_ring(s, t)] for t in tps] if n > 1 else []
                self._dp_rings[s] = (rings, ring_hop_latency_s(self.net, rings))
            rings, hop_latency_s = self._dp_rings[s]
            flows, fill_s = streamed_ring(self.net, rings, op, nbytes, hop_latency_s)
            expert_bytes = self.plan.dp_expert_units(s, chunk)[unit] * per_param
            if expert_bytes > 0:
                if s not in self._expert_rings:
                    blocks = lay.dp // self.ep
                    rings = [
                        [lay.device(t, c, s, b * self.ep + e).node for b in range(blocks) for c in range(lay.cp)]
                        for t in tps
                        for e in range(self.ep)
                    ]
                    rings = rings if blocks * lay.cp > 1 else []
                    self._expert_rings[s] = (rings, ring_hop_latency_s(self.net, rings))
                expert_rings, expert_hop_s = self._expert_rings[s]
                more, more_fill_s = streamed_ring(self.net, expert_rings, op, expert_bytes, expert_hop_s)
                flows, fill_s = flows + more, max(fill_s, more_fill_s)
            self._dp_steps[key] = (flows, fill_s, StepKey(f"dp {op} stage {s} chunk {chunk} unit {unit}"))
        return self._dp_steps[key]

    def _grad_norm(self, g: Group, it: int):
        """Gradient-norm all-reduce over the pipeline: every stage of the replica meets here."""
        p = self.layout.pp
        if p == 1:
            return
        key = ("norm", it, g.d)
        drivers = [self.groups[(s, g.d)].driver.node for s in range(p)]

        def launch():
            proc, _ = collective(self.net, "all_reduce", drivers, 8.0, "ring", name="grad-norm all_reduce")
            yield proc

        yield self._meet(key, p, launch)

    # ---- energy mirrors -----------------------------------------------------------------------
    def _mirror(self, g: Group, start: float, end: float) -> None:
        """Coalesce busy periods; the other GPUs of the group and its class mirror them."""
        st = g.stats
        if st.mirror_open is not None and start <= st.mirror_open[1]:
            st.mirror_open[1] = end
            return
        self._flush_mirror(g)
        st.mirror_open = [start, end]

    def _flush_mirror(self, g: Group) -> None:
        st = g.stats
        if st.mirror_open is None:
            return
        start, end = st.mirror_open
        st.mirror_open = None
        for observe in self.sim.recorder.observers:
            bulk = getattr(observe, "add_components", None)  # optional part of the observer interface
            if bulk is not None:
                bulk(g.mirrors, "compute", "compute", start, end, key=g)
                continue
            for comp in g.mirrors:
                observe(comp, "compute", "compute", start, end, 1.0)
