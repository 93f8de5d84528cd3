"""Running one phase (prefill or decode step) of context-parallel inference on the cluster.

Layout: CP rank c owns the TP group of global ranks c*tp .. c*tp+tp-1 (whole hosts when tp >=
gpus_per_node; multi-node TP when tp > gpus_per_node). Ring j joins TP index j of every CP rank:
one ring per KV head group, each on its GPU's own NIC, all tp rings at once.

Per layer, every simulated GPU runs the kernels of its `LayerPlan` on its `compute` stream. The TP
group meets for its all-reduces (sim.network.collectives schedules, as flows on the scale-up fabric, or over
the NICs for multi-node TP) while holding every member's `comm` stream. In the ring, step s starts
the send of the block the GPU holds (a flow on the network, holding the `comm` stream) and runs the
step's attention on the `compute` stream at the same time; step s+1 starts when that attention is
done and the block from the previous rank has arrived. pass-Q ends with an All2All of the partial
outputs (one grouped send of N-1 flows per GPU), then the merge.

Fidelity modes (`CpInferenceLayout.representative`, `layers_simulated`):
- all ranks: every GPU and every flow of the cluster is simulated.
- representative: only CP rank 0's TP group runs; its ring sends and All2All flows go out on the
  real network, and by symmetry what it receives at a step arrives when what it sent arrives. Exact
  when every CP rank sees the same network (cp_inference decides when; a test compares with all
  ranks). The other ranks' GPUs mirror the representative's activity: busy counters, and for the
  span observers (energy) its busy intervals per layer and stream (kernels merged, category
  `compute` or `comm`); the trace and the network's link counters show rank 0's only.
- one rank group alone (representative, or cp = 1), nothing else on the network (`exact_replay`):
  every layer starts from the same idle state, so the first layer (the k-th with
  layers_simulated = k) is recorded and replayed exactly for the others (replay.py: spans,
  observer calls, network traffic and counters shifted by whole layer times; the GPUs' streams are
  held meanwhile). Identical to simulating every layer, up to float rounding.
- otherwise, layers_simulated = k < layers: the first k layers run in full; the rest take k-th-layer
  time each (a test proves the per-layer timing identical to a full run): the GPUs' streams are held
  for that long, and the busy intervals of the k-th layer's streams (kernels merged) are recorded
  again, shifted, for every replayed layer (compute as category `replayed`, comm as `comm`), so
  per-GPU activity (energy) matches a full run; network flows are not replayed. Breakdowns scale
  the same way.

`PhaseRun.breakdown` splits the phase's time on GPU (rank 0, TP 0) into dense kernels, attention,
merges, exposed ring communication (time waiting for blocks after the step's attention), the
All2All and TP all-reduces; the parts add up to the phase time.
"""

from __future__ import annotations

from collections import defaultdict

from sim.engine.replay import delay_to
from sim.models.kernel import Kernel
from sim.network.operation_cost import OperationCost, operation_cost
from sim.network.pipeline import run_pipelined
from sim.workloads.cp_inference.latency_parts import LATENCY_PREFIX
from sim.workloads.cp_inference.plan import LayerPlan
from sim.workloads.cp_inference.replay import LayerRecording
from sim.workloads.parallel_layout import ParallelLayout


def _busy_intervals(spans: list[tuple[str, float, float, float]]) -> list[tuple[str, float, float]]:
    """(track, start, end, flop) spans -> disjoint busy intervals per track (touching ones merged)."""
    out: list[list] = []
    for track, start, end, _ in sorted(spans):
        if out and out[-1][0] == track and start <= out[-1][2]:
            out[-1][2] = max(out[-1][2], end)
        else:
            out.append([track, start, end])
    return [tuple(x) for x in out]


class CpInferenceLayout(ParallelLayout):
    """The tp x cp rank grid (`device(j, c)`: TP index j of CP rank c), and which CP ranks are simulated."""

    def __init__(self, cluster, tp: int, cp: int, representative: bool) -> None:
        super().__init__(cluster, tp, cp)
        self.representative = representative and cp > 1
        self._mirrors = (
            {self.device(j, 0).node: [self.device(j, c) for c in range(1, cp)] for j in range(tp)}
            if self.representative
            else {}
        )

    @property
    def simulated_ranks(self) -> range:
        return range(1) if self.representative else range(self.cp)

    def mirrors(self, device) -> list:
        """Representative mode: the GPUs (same TP index, other CP ranks) doing what `device` does."""
        return self._mirrors.get(device.node, [])


class PhaseRun:
    """One phase on the cluster; `run()` is a SimPy generator returning the breakdown dict."""

    def __init__(
        self,
        sim,
        network,
        layout: CpInferenceLayout,
        plan: LayerPlan,
        layers_simulated: int | None = None,
        allreduce_algorithm: str = "auto",
        exact_replay: bool = False,
    ) -> None:
        self.sim, self.network, self.layout, self.plan = sim, network, layout, plan
        self.exact_replay = exact_replay and len(layout.simulated_ranks) == 1
        # all layers: simulate the first and replay it exactly where allowed, else simulate them all
        self.layers_simulated = min(layers_simulated or (1 if self.exact_replay else plan.layers), plan.layers)
        self.allreduce_algorithm = allreduce_algorithm
        self.breakdown: dict[str, float] = defaultdict(float)
        self.ring_steps: list[dict] = []  # first layer, GPU (0, 0): per-step timing
        self._events: dict[tuple, object] = {}
        self._send_s: dict[int, float] = {}  # first layer, GPU (0, 0): duration of each ring send
        self._capture: dict[str, list] = {}  # node -> spans of the last simulated layer (for replay)
        self._to_mirror: dict[str, list] = defaultdict(list)  # node -> spans not yet mirrored
        self._allreduce_cost: dict[int, OperationCost] = {}
        self._p2p_cost: dict[tuple, OperationCost] = {}
        self.latency: dict[str, float] = {}  # GPU (0, 0): NCCL software latency per operation kind, s

    # ---- the phase ----------------------------------------------------------------------------
    def run(self):
        start = self.sim.now
        yield self.sim.all_of([self.sim.process(self._rank(c)) for c in self.layout.simulated_ranks])
        self.breakdown["total"] = self.sim.now - start
        for key in [k for k in self.breakdown if k.startswith(LATENCY_PREFIX)]:
            self.latency[key[len(LATENCY_PREFIX) :]] = self.breakdown.pop(key)
        return dict(self.breakdown)

    def _rank(self, c: int):
        plan, devices = self.plan, self.layout.tp_group(c)
        acc = self.breakdown if c == 0 else None
        if self.exact_replay:
            yield from self._layers_recorded(c, devices, acc)
        else:
            yield from self._layers_merged(c, devices, acc)
        yield from self._timed(acc, "dense", self._on_group(devices, plan.final, plan.layers))
        self._flush_mirrors(devices)

    def _layer(self, c: int, devices, acc, layer: int):
        """One transformer layer on CP rank c's TP group."""
        plan = self.plan
        yield from self._timed(acc, "dense", self._on_group(devices, plan.pre_attention, layer))
        if plan.cp > 1:
            t, busy = self.sim.now, self._kernel_time(acc)
            yield self.sim.all_of([self.sim.process(self._ring(c, j, layer)) for j in range(plan.tp)])
            if acc is not None:  # waiting for blocks (cancellation noise clipped at 1 ps)
                waited = (self.sim.now - t) - (self._kernel_time(acc) - busy)
                acc["ring_exposed"] += waited if waited > 1e-12 else 0.0
            if plan.exchange_bytes:
                yield from self._timed(
                    acc,
                    "all2all",
                    self.sim.all_of([self.sim.process(self._exchange(c, j, layer)) for j in range(plan.tp)]),
                )
        else:
            yield self._on_group(devices, plan.ring_steps[0], layer, acc)
        if plan.post_exchange:
            yield self._on_group(devices, plan.post_exchange, layer, acc)
        yield from self._timed(acc, "dense", self._on_group(devices, plan.out_proj, layer))
        yield from self._timed(acc, "tp_allreduce", self._allreduce(c, layer))
        yield from self._timed(acc, "dense", self._on_group(devices, plan.ffn, layer))
        yield from self._timed(acc, "tp_allreduce", self._allreduce(c, layer))
        self._flush_mirrors(devices)

    def _layers_recorded(self, c: int, devices, acc):
        """Exact replay (one rank group alone, replay.py): simulate layers until one is recorded
        (the `layers_simulated`-th), then replay it for the others, as far as it stays exact."""
        layers, layer, recording = self.plan.layers, 0, None
        while layer < layers:
            n = recording.replayable(layers - layer) if recording is not None else 0
            if n:
                recording.replay(n)
                for key, value in recording.breakdown.items():
                    acc[key] += n * value
                yield self._hold(devices, delay_to(self.sim.now, recording.end_s(n)))
                layer += n
                continue
            record = self.layers_simulated - 1 <= layer < layers - 1
            before = dict(acc)
            if record:
                recording = LayerRecording(self.sim, self.network, self.layout.cluster.devices, layer)
            yield from self._layer(c, devices, acc, layer)
            if record:
                recording.stop()
                recording.breakdown = {key: acc[key] - before.get(key, 0.0) for key in list(acc)}
            layer += 1

    def _layers_merged(self, c: int, devices, acc):
        """Every rank group (or none alone): the first `layers_simulated` layers run in full; the
        rest hold the streams for the last one's time and repeat its merged busy intervals."""
        plan = self.plan
        k = self.layers_simulated
        rest = plan.layers - k
        for layer in range(k):
            before = dict(acc) if acc is not None and layer == k - 1 else None
            if rest and layer == k - 1:
                self._capture.update({d.node: [] for d in devices})
            layer_start = self.sim.now
            yield from self._layer(c, devices, acc, layer)
            layer_s = self.sim.now - layer_start
        if rest:
            if acc is not None:
                for key in list(acc):
                    acc[key] += rest * (acc[key] - before.get(key, 0.0))
            spans = {d.node: self._capture.pop(d.node) for d in devices}
            captured = {node: _busy_intervals(s) for node, s in spans.items()}
            yield self._hold(devices, rest * layer_s)
            for d in devices:
                for m in (d, *self.layout.mirrors(d)):
                    m.record("compute", 0.0, flop=rest * sum(s[3] for s in spans[d.node]))
                for i in range(1, rest + 1):
                    shift = i * layer_s
                    for track, start, end in captured[d.node]:
                        self._record(
                            d,
                            track,
                            f"L{k - 1 + i} {track} (replayed)",
                            start + shift,
                            end + shift,
                            category="replayed" if track == "compute" else "comm",
                        )
            self._flush_mirrors(devices)

    # ---- helpers ------------------------------------------------------------------------------
    def _timed(self, acc, key: str, event):
        start = self.sim.now
        yield event
        if acc is not None:
            acc[key] += self.sim.now - start

    @staticmethod
    def _kernel_time(acc) -> float:
        return (acc["attention"] + acc["merge"]) if acc is not None else 0.0

    def _on_group(self, devices, kernels, layer: int, acc=None):
        procs = [
            self.sim.process(self._kernels(d, kernels, layer, acc if i == 0 else None)) for i, d in enumerate(devices)
        ]
        return self.sim.all_of(procs)

    def _kernels(self, device, kernels: tuple[Kernel, ...], layer: int, acc=None):
        """Kernels back to back on the device's compute stream."""
        sim = self.sim
        with device.stream("compute").request() as req:
            yield req
            for kern in kernels:
                start = sim.now
                yield sim.timeout(kern.duration_s * device.slowdown)  # slowdown: a straggler GPU
                self._record(
                    device, "compute", f"L{layer} {kern.name}", start, sim.now, kern.nbytes, kern.flop, kern.category
                )
                if acc is not None:
                    acc[kern.category] += sim.now - start

    def _hold(self, devices, duration_s: float):
        """Keep the devices' streams busy while replayed layers run."""

        def hold(device):
            with device.stream("compute").request() as rc, device.stream("comm").request() as rm:
                yield rc & rm
                yield self.sim.timeout(duration_s)

        return self.sim.all_of([self.sim.process(hold(d)) for d in devices])

    def _record(
        self,
        device,
        track: str,
        name: str,
        start: float,
        end: float,
        nbytes: float = 0.0,
        flop: float = 0.0,
        category: str = "",
    ) -> None:
        """A span on `device` (busy counters too, and those of its mirrors)."""
        self.sim.span(device.node, track, name, start, end, nbytes=nbytes, flop=flop, category=category)
        capture = self._capture.get(device.node)
        if capture is not None:
            capture.append((track, start, end, flop))
        mirrors = self.layout.mirrors(device)
        for d in (device, *mirrors):
            d.record(track, end - start, flop)
        if mirrors:
            self._to_mirror[device.node].append((track, start, end, flop))

    def _flush_mirrors(self, devices) -> None:
        """Show the span observers (energy) the merged busy intervals of `devices` on their mirrors."""
        observers = self.sim.recorder.observers
        for device in devices:
            spans = self._to_mirror.pop(device.node, None)
            if not spans or not observers:
                continue
            intervals = _busy_intervals(spans)
            for mirror in self.layout.mirrors(device):
                for track, start, end in intervals:
                    for observe in observers:
                        observe(mirror.node, track, "comm" if track == "comm" else "compute", start, end, 1.0)

    def _event(self, key: tuple):
        if key not in self._events:
            self._events[key] = self.sim.env.event()
        return self._events[key]

    def _cost(self, op: str, group: list[str], nbytes: float) -> OperationCost:
        """NCCL's plan of a send or All2All on these endpoints (cached per phase)."""
        key = (op, tuple(group), nbytes)
        if key not in self._p2p_cost:
            self._p2p_cost[key] = operation_cost(self.network, op, group, nbytes)
        return self._p2p_cost[key]

    def _comm(self, device, flows, name: str, cost: OperationCost, acc=None, part: str = ""):
        """Flows sent from `device` as one grouped NCCL call on its comm stream: NCCL's software
        latency, then the flows (bytes times the protocol's wire factor)."""
        with device.stream("comm").request() as req:
            yield req
            start = self.sim.now
            if cost.software_latency_s > 0:
                yield self.sim.timeout(cost.software_latency_s)
                if acc is not None:
                    acc[LATENCY_PREFIX + part] += cost.software_latency_s
            wire = cost.wire_factor
            yield self.network.transfer_many([(s, d, b * wire) for s, d, b in flows], name=name)
            self._record(device, "comm", name, start, self.sim.now, sum(f[2] for f in flows), category="comm")

    # ---- context parallelism --------------------------------------------------------------------
    def _ring(self, c: int, j: int, layer: int):
        plan, device = self.plan, self.layout.device(j, c)
        watch = c == 0 and j == 0
        acc = self.breakdown if watch else None
        for s in range(plan.cp):
            if s < plan.cp - 1:
                self.sim.process(self._send(c, j, layer, s))
            start = self.sim.now
            yield from self._kernels(device, plan.ring_steps[s], layer, acc)
            computed = self.sim.now
            if s < plan.cp - 1:
                key = ("ring", c, j, layer, s)
                yield self._event(key)
                del self._events[key]
            if watch and layer == 0:
                self.ring_steps.append(
                    {"step": s, "attention_s": computed - start, "exposed_s": self.sim.now - computed}
                )

    def _send(self, c: int, j: int, layer: int, s: int):
        nxt = (c + 1) % self.plan.cp
        device, peer = self.layout.device(j, c), self.layout.device(j, nxt)
        start = self.sim.now
        name = f"L{layer} {self.plan.ring} send {s}"
        cost = self._cost("send_recv", [device.node, peer.node], self.plan.ring_send_bytes)
        acc = self.breakdown if c == 0 and j == 0 else None
        yield from self._comm(
            device, [(device.node, peer.node, self.plan.ring_send_bytes)], name, cost, acc, "ring_sends"
        )
        if c == 0 and j == 0 and layer == 0:
            self._send_s[s] = self.sim.now - start
        receiver = c if self.layout.representative else nxt
        self._event(("ring", receiver, j, layer, s)).succeed()

    def _exchange(self, c: int, j: int, layer: int):
        """pass-Q All2All: return the partial outputs of the other ranks' queries to their owners."""
        device, cp = self.layout.device(j, c), self.plan.cp
        peers = [d for d in range(cp) if d != c]
        flows = [(device.node, self.layout.device(j, d).node, self.plan.exchange_bytes) for d in peers]
        group = [self.layout.device(j, d).node for d in range(cp)]
        cost = self._cost("all_to_all", group, cp * self.plan.exchange_bytes)  # nbytes / cp per peer
        acc = self.breakdown if c == 0 and j == 0 else None
        yield from self._comm(device, flows, f"L{layer} all2all partial outputs", cost, acc, "all2all")
        if self.layout.representative:
            return  # by symmetry, the blocks sent to us arrive now too
        for d in peers:
            self._event(("a2a", d, j, layer, c)).succeed()
        yield self.sim.all_of([self._event(("a2a", c, j, layer, d)) for d in peers])
        for d in peers:
            self._events.pop(("a2a", c, j, layer, d), None)

    # ---- tensor parallelism ---------------------------------------------------------------------
    def _allreduce(self, c: int, layer: int):
        if self.plan.tp == 1 or self.plan.allreduce_bytes <= 0:
            return self.sim.timeout(0)
        return self.sim.process(self._allreduce_proc(c, layer))

    def _allreduce_proc(self, c: int, layer: int):
        devices = self.layout.tp_group(c)
        if c not in self._allreduce_cost:
            group = [d.node for d in devices]
            self._allreduce_cost[c] = operation_cost(
                self.network, "all_reduce", group, self.plan.allreduce_bytes, self.allreduce_algorithm
            )
        cost = self._allreduce_cost[c]
        requests = [d.stream("comm").request() for d in devices]
        yield self.sim.all_of(requests)
        start = self.sim.now
        if c == 0:
            self.breakdown[LATENCY_PREFIX + "tp_allreduce"] += cost.software_latency_s
        yield run_pipelined(
            self.network,
            cost.steps,
            cost.plan,
            cost.costs.bandwidth_s,
            cost.costs.wire_latency_s,
            name=f"L{layer} tp all_reduce",
        )
        for d, req in zip(devices, requests):
            d.stream("comm").release(req)
            self._record(
                d, "comm", f"L{layer} tp all_reduce", start, self.sim.now, self.plan.allreduce_bytes, category="comm"
            )

    def ring_step_table(self) -> list[dict]:
        return [{**row, "send_s": self._send_s.get(row["step"], 0.0)} for row in self.ring_steps]
