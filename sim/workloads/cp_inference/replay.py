"""Exact replay of identical transformer layers (cp_inference): record what one layer does to the rest
of the simulator, then do it again, shifted in time, for the layers that follow.

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
`end_s(layers)` is where the replayed layers end, which `delay_to` turns into an exact timeout.
The spans, link table and metrics (energy included) are those of simulating every layer, up to
float rounding of the times; tests/workloads/test_workload_fast_paths.py compares the two.

A recording is only replayed where it stands for the following layers exactly: `replayable(n)`
says how many of them can be replayed before the span recorder reaches its limit (past the limit
the network stops showing per-flow spans to observers, so the layer that crosses it is simulated,
and so is the next one, which is then recorded with the recorder full).
"""
from __future__ import annotations

import numpy as np


class LayerRecording:
    """Records one layer (from construction to `stop()`); `replay(n)` emits n more such layers."""

    def __init__(self, sim, network, devices: list, layer: int) -> None:
        self.sim, self.network, self.devices, self.layer = sim, network, devices, layer
        recorder = sim.recorder
        self._rows0, self._dropped0 = len(recorder.rows), recorder.dropped
        self._links0, self._busy0 = network.link_bytes.copy(), network.link_busy_s.copy()   # settles first
        self._counters0 = self._counters()
        self._devices0 = [(dict(d.busy_s), d.flop_done) for d in devices]
        self.start_s = sim.now
        self.spans: list[tuple] = []            # observer calls: (component, track, category, start, end, units)
        self.traffic: list[tuple] = []          # traffic observer calls: (method name, args)
        recorder.observers.insert(0, self._on_span)
        network.traffic_observers.insert(0, self)

    def _counters(self) -> np.ndarray:
        n = self.network
        return np.array([n.flows_started, n.bytes_sent, n.bytes_delivered], dtype=float)

    # ---- recording --------------------------------------------------------------------------------
    def _on_span(self, component, track, category, start_s, end_s, units) -> None:
        self.spans.append((component, track, category, start_s, end_s, units))

    def on_links(self, t0: float, t1: float, link_bytes: np.ndarray) -> None:
        self.traffic.append(("on_links", (t0, t1, np.array(link_bytes, dtype=float))))

    def on_subflows(self, t0, t1, flat, lengths, nbytes) -> None:
        self.traffic.append(("on_subflows", (np.array(t0, dtype=float), np.array(t1, dtype=float), np.array(flat),
                                             np.array(lengths), np.array(nbytes, dtype=float))))

    def on_flows(self, srcs, dsts, start_s: float, finish_s) -> None:
        self.traffic.append(("on_flows", (list(srcs), list(dsts), start_s, np.array(finish_s, dtype=float))))

    def stop(self) -> None:
        """End of the layer: what it added to the counters."""
        net, recorder = self.network, self.sim.recorder
        self.link_bytes = net.link_bytes - self._links0         # settles deferred accounting, still recorded
        self.link_busy_s = net.link_busy_s - self._busy0
        recorder.observers.remove(self._on_span)
        net.traffic_observers.remove(self)
        self.counters = self._counters() - self._counters0
        self.stop_s = self.sim.now
        self.duration_s = self.stop_s - self.start_s
        self.rows = recorder.rows[self._rows0:]
        self.dropped = recorder.dropped - self._dropped0
        self.device_deltas = [({k: v - busy.get(k, 0.0) for k, v in d.busy_s.items()}, d.flop_done - flop)
                              for d, (busy, flop) in zip(self.devices, self._devices0)]

    # ---- replaying -------------------------------------------------------------------------------
    def replayable(self, layers: int) -> int:
        """How many of the next `layers` layers replaying this recording reproduces exactly."""
        limit, recorder = self.sim.recorder.limit, self.sim.recorder
        per_layer = len(self.rows) + self.dropped
        if limit is None or per_layer == 0:
            return layers
        if self.dropped:                  # exact only if the recorder was full all layer long
            return layers if not self.rows else 0
        return max(0, min(layers, (limit - len(recorder.rows)) // per_layer))

    def bases(self, layers: int) -> list[float]:
        """Start times of the `layers` layers after the recorded one (each starts where the last ends)."""
        out = [self.stop_s]
        for _ in range(layers - 1):
            out.append(out[-1] + self.duration_s)
        return out

    def end_s(self, layers: int) -> float:
        """When `layers` replayed layers end."""
        return self.bases(layers)[-1] + self.duration_s

    def replay(self, layers: int) -> None:
        """Emit `layers` more layers, each starting where the previous one ends."""
        if layers <= 0:
            return
        bases = np.array(self.bases(layers))             # a recorded time t maps to base + (t - s0)
        self._replay_rows(bases)
        self._replay_spans(bases)
        self._replay_traffic(bases)
        net = self.network
        net.link_bytes[:] += self.link_bytes * layers
        net.link_busy_s[:] += self.link_busy_s * layers
        flows, sent, delivered = self.counters * layers
        net.flows_started += round(float(flows))
        net.bytes_sent += sent
        net.bytes_delivered += delivered
        for d, (busy, flop) in zip(self.devices, self.device_deltas):
            for stream, seconds in busy.items():
                d.busy_s[stream] = d.busy_s.get(stream, 0.0) + seconds * layers
            d.flop_done += flop * layers

    def _replay_rows(self, bases: np.ndarray) -> None:
        recorder = self.sim.recorder
        prefix, s0 = f"L{self.layer} ", self.start_s
        rows = [(c, t, n, s - s0, e - s0, b, f, cat) for c, t, n, s, e, b, f, cat in self.rows]
        for i, base in enumerate(bases.tolist(), start=1):
            kept = rows
            if recorder.limit is not None:
                room = max(0, recorder.limit - len(recorder.rows))
                recorder.dropped += max(0, len(rows) - room) + self.dropped
                kept = rows[:room]
            renamed = f"L{self.layer + i} "
            recorder.rows.extend((c, t, renamed + n[len(prefix):] if n.startswith(prefix) else n, base + s,
                                  base + e, b, f, cat) for c, t, n, s, e, b, f, cat in kept)

    def _replay_spans(self, bases: np.ndarray) -> None:
        if not self.spans:
            return
        start = np.array([s[3] for s in self.spans], dtype=float) - self.start_s
        end = np.array([s[4] for s in self.spans], dtype=float) - self.start_s
        units = np.array([s[5] for s in self.spans], dtype=float)
        starts = (start[None, :] + bases[:, None]).ravel()
        ends = (end[None, :] + bases[:, None]).ravel()
        for observe in self.sim.recorder.observers:
            if hasattr(observe, "add_spans"):          # bulk path (sim/engine/activity.py SpanActivity)
                keys = np.array([observe.key_id(s[:3]) for s in self.spans], dtype=np.int64)
                observe.add_spans(np.tile(keys, len(bases)), starts, ends, np.tile(units, len(bases)))
                continue
            for base in bases.tolist():
                for (component, track, category, _, _, u), s, e in zip(self.spans, start.tolist(), end.tolist()):
                    observe(component, track, category, base + s, base + e, u)

    def _replay_traffic(self, bases: np.ndarray) -> None:
        observers, s0 = self.network.traffic_observers, self.start_s
        relative = [(m, (a[0], a[1], a[2] - s0, a[3] - s0) if m == "on_flows" else (a[0] - s0, a[1] - s0, *a[2:]))
                    for m, a in self.traffic]
        for base in bases.tolist():
            for method, args in relative:
                if method == "on_flows":
                    srcs, dsts, start, finish = args
                    shifted = (srcs, dsts, base + start, base + finish)
                else:
                    shifted = (base + args[0], base + args[1], *args[2:])
                for observer in observers:
                    call = getattr(observer, method, None)
                    if call is not None:
                        call(*shifted)


def delay_to(now: float, target_s: float) -> float:
    """A delay d with now + d == target_s exactly (as the event loop adds it), for target_s >= now."""
    delay = max(target_s - now, 0.0)
    while now + delay < target_s:
        delay = np.nextafter(delay, np.inf)
    while delay > 0 and now + delay > target_s:
        delay = np.nextafter(delay, 0.0)
    return float(delay)
