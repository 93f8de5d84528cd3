"""Record and replay on the network (the mechanism of sim/engine/replay.py, for network traffic).

`Trajectory`: replay of repeated collective steps on the flow network, exact by construction.
A ring collective repeats one step (the same flows, one `StepKey`) 2(n-1) times; a 16K-GPU ring
all-reduce would recompute max-min rates for 16K flows 32K times. When a step runs with its links to
itself (no other flow uses them: max-min rates are fair per connected set of flows and links, so it
runs as on an idle network; other steps may run elsewhere meanwhile), the flow network records its
*trajectory*: at every rate change (breakpoint) the
offset from the step's start, each flow's remaining bytes and the cumulative bytes and busy time
per link. Rates are constant between breakpoints, so the state at any offset is a linear
interpolation.

When the step with the same key starts again with its links to itself it is *replayed*: it finishes
after the recorded duration and adds the recorded link totals. If another transfer that uses any
of its links starts during a replay, the replay is *materialised* first: the step's flows are put back into the network with
exactly the bytes they would have left at that instant (flows still in their latency phase
re-enter at their arrival time), and the simulation continues as if the step had never been
replayed. Hence replay never changes a result; it only skips work (tested against the plain path).

`TrafficTape`: what a stretch of simulated time (one repetition of some work, e.g. a transformer
layer) did to a network, whatever the backend: every call to its traffic observers (bytes per link
per interval of constant rates, sub-flows, transfer endpoints), and what it added to its counters
(bytes and busy time per link, flows started, bytes sent and delivered). `replay(origin_s, starts)`
does it again for each start: observer calls shifted in time, counters added once per start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim.engine.replay import StepKey
from sim.network.base import Routed

if TYPE_CHECKING:
    from sim.network.base import Network

SparseVector = tuple[np.ndarray, np.ndarray]  # (indices, values)


@dataclass(eq=False)  # hashed by identity: traffic observers key what they derive from it by the trajectory
class Trajectory:
    key: StepKey  # the step recorded
    gid: int  # flow group being recorded
    start_s: float
    nbytes: np.ndarray  # bytes per flow (merged ECMP rows, in routed order)
    arrival_offset: np.ndarray  # path latency per flow: when it enters the network
    routed: Routed  # the merged rows of the step
    links: np.ndarray  # the links its flows use (sorted): it had them to itself while recorded
    base_link_bytes: np.ndarray | None  # totals of those links when it started (dropped when it finishes)
    base_busy_s: np.ndarray | None
    offsets: list[float] = field(default_factory=list)
    remaining: list[np.ndarray] = field(default_factory=list)
    link_bytes: list[SparseVector] = field(default_factory=list)
    busy_s: list[SparseVector] = field(default_factory=list)
    finish_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0))
    duration_s: float = 0.0
    valid: bool = True
    last_offset: float = 0.0  # the largest finish offset, and the first flow with it (`finish`)
    last_index: int = 0
    _last_gap: float = math.inf  # to the next smaller finish offset
    row_of_flow: np.ndarray = field(init=False)
    seen: np.ndarray = field(init=False)  # per flow: was active at some snapshot (so gone = finished)

    def __post_init__(self) -> None:
        self.row_of_flow = np.zeros(int(self.routed.flow.max()) + 1 if len(self.routed.flow) else 0, dtype=np.int64)
        self.row_of_flow[self.routed.flow] = np.arange(len(self.routed.flow))
        self.seen = np.zeros(len(self.nbytes), dtype=bool)

    def snapshot(
        self, now: float, rows_flow: np.ndarray, rows_remaining: np.ndarray, link_bytes: np.ndarray, busy_s: np.ndarray
    ) -> None:
        """Record the state at `now`; rows_* are this group's active rows (flow index, bytes left);
        link_bytes, busy_s: the totals of `links` now."""
        assert self.base_link_bytes is not None and self.base_busy_s is not None, "snapshot after finish"
        offset = now - self.start_s
        rows = self.row_of_flow[rows_flow]
        self.seen[rows] = True
        # not active: finished if it was active before, else still to be admitted (arriving now or later)
        remaining = np.where(self.seen, 0.0, self.nbytes)
        remaining[rows] = rows_remaining
        self.offsets.append(offset)
        self.remaining.append(remaining)
        changed = np.flatnonzero((link_bytes != self.base_link_bytes) | (busy_s != self.base_busy_s))
        self.link_bytes.append((self.links[changed], link_bytes[changed] - self.base_link_bytes[changed]))
        self.busy_s.append((self.links[changed], busy_s[changed] - self.base_busy_s[changed]))

    def finish(self, now: float, finish_s: np.ndarray) -> None:
        self.duration_s = now - self.start_s
        self.finish_offsets = finish_s - self.start_s
        self.base_link_bytes = self.base_busy_s = None  # free the full-size copies
        offsets = self.finish_offsets
        if len(offsets):  # its last flow: when and which (`last_flow`)
            top = float(offsets.max())
            below = offsets[offsets < top]
            self.last_offset, self.last_index = top, int(offsets.argmax())
            self._last_gap = top - float(below.max()) if len(below) else math.inf

    def last_flow_terms(self) -> tuple[float, int, float]:
        """(largest finish offset, its flow, gap to the next smaller offset): `last_flow` is
        (start + offset, flow) wherever the gap exceeds 4 ulps of that end."""
        return self.last_offset, self.last_index, self._last_gap

    def last_flow(self, start_s: float) -> tuple[float, int]:
        """(end, index) of the last flow to finish when the step runs from `start_s`: the max and the
        argmax of `start_s + finish_offsets`, without the array. The max is start + the largest
        offset to the bit (rounding is monotone); the argmax is the largest offset's, unless a
        smaller offset lies within a few ulps of it and could round onto the same end."""
        end = start_s + self.last_offset
        if self._last_gap > 4 * math.ulp(end):
            return end, self.last_index
        return end, int((start_s + self.finish_offsets).argmax())

    def state_at(self, offset: float, num_links: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(remaining bytes per flow, link bytes delta, busy delta) at `offset` into the step."""
        offsets = self.offsets
        i = max(0, int(np.searchsorted(offsets, offset, side="right")) - 1)
        j = min(i + 1, len(offsets) - 1)
        span = offsets[j] - offsets[i]
        w = 0.0 if span <= 0 else min(max((offset - offsets[i]) / span, 0.0), 1.0)
        remaining = self.remaining[i] + w * (self.remaining[j] - self.remaining[i])
        remaining = np.where(self.arrival_offset > offset, self.nbytes, remaining)
        return (
            remaining,
            _lerp(self.link_bytes[i], self.link_bytes[j], w, num_links),
            _lerp(self.busy_s[i], self.busy_s[j], w, num_links),
        )

    def totals(self) -> tuple[SparseVector, SparseVector]:
        """What the whole step added: (links, bytes) and (links, busy seconds), links ascending."""
        return self.link_bytes[-1], self.busy_s[-1]


def _dense(sparse_vec: SparseVector, n: int) -> np.ndarray:
    idx, val = sparse_vec
    out = np.zeros(n)
    out[idx] = val
    return out


def _lerp(a: SparseVector, b: SparseVector, w: float, n: int) -> np.ndarray:
    return _dense(a, n) * (1 - w) + _dense(b, n) * w


class TrafficTape:
    """Records what `network` sees from construction to `stop()` (a traffic observer meanwhile)."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self._links0, self._busy0 = network.link_bytes.copy(), network.link_busy_s.copy()  # settles first
        self._counters0 = self._counters()
        self.calls: list[tuple[str, tuple]] = []  # observer calls: (method name, args)
        self.link_bytes = self.link_busy_s = self.counters = np.zeros(0)
        network.traffic_observers.insert(0, self)

    def _counters(self) -> np.ndarray:
        n = self.network
        return np.array([n.flows_started, n.bytes_sent, n.bytes_delivered], dtype=float)

    # ---- the traffic observer interface (sim/engine/link_traffic.py LinkTraffic) -----------------
    def on_links(self, t0: float, t1: float, links: np.ndarray, link_bytes: np.ndarray) -> None:
        self.calls.append(("on_links", (t0, t1, np.array(links), np.array(link_bytes, dtype=float))))

    def on_subflows(
        self, t0: np.ndarray, t1: np.ndarray, flat: np.ndarray, lengths: np.ndarray, nbytes: np.ndarray
    ) -> None:
        self.calls.append(
            (
                "on_subflows",
                (
                    np.array(t0, dtype=float),
                    np.array(t1, dtype=float),
                    np.array(flat),
                    np.array(lengths),
                    np.array(nbytes, dtype=float),
                ),
            )
        )

    def on_flows(
        self, srcs: list[str], dsts: list[str], start_s: float, finish_s: np.ndarray, key: StepKey | None = None
    ) -> None:
        self.calls.append(("on_flows", (list(srcs), list(dsts), start_s, np.array(finish_s, dtype=float), key)))

    def stop(self) -> None:
        """End of the recording: what it added to the counters."""
        net = self.network
        self.link_bytes = net.link_bytes - self._links0  # settles deferred accounting, still recorded
        self.link_busy_s = net.link_busy_s - self._busy0
        net.traffic_observers.remove(self)
        self.counters = self._counters() - self._counters0

    def replay(self, origin_s: float, starts: np.ndarray) -> None:
        """Do it again for each of `starts`: a recorded time t becomes start + (t - origin_s)."""
        self._replay_calls(origin_s, starts)
        net, times = self.network, len(starts)
        net.link_bytes[:] += self.link_bytes * times
        net.link_busy_s[:] += self.link_busy_s * times
        flows, sent, delivered = self.counters * times
        net.flows_started += round(float(flows))
        net.bytes_sent += sent
        net.bytes_delivered += delivered

    def _replay_calls(self, origin_s: float, starts: np.ndarray) -> None:
        observers = self.network.traffic_observers
        calls = self.calls
        if all(hasattr(o, "on_links_repeated") for o in observers if hasattr(o, "on_links")):
            # link bytes of every start at once per recorded call (binned in another order; the
            # other calls, whose order their observers may depend on, go start by start below)
            starts_s = np.asarray(starts, dtype=float)
            for _, (t0, t1, links, link_bytes) in (c for c in calls if c[0] == "on_links"):
                t0s, t1s = starts_s + (t0 - origin_s), starts_s + (t1 - origin_s)
                for observer in observers:
                    if hasattr(observer, "on_links"):
                        observer.on_links_repeated(t0s, t1s, links, link_bytes)
            calls = [c for c in calls if c[0] != "on_links"]
        # sub-flows of every start at once per recorded call (the flow backend reports its links'
        # bytes this way: per link, the interval of each rate): one call with per-sub-flow times
        starts_s = np.asarray(starts, dtype=float)
        for _, (t0, t1, flat, lengths, nbytes) in (c for c in calls if c[0] == "on_subflows"):
            t0s = (starts_s[:, None] + (np.broadcast_to(t0, lengths.shape) - origin_s)).ravel()
            t1s = (starts_s[:, None] + (np.broadcast_to(t1, lengths.shape) - origin_s)).ravel()
            k = len(starts_s)
            for observer in observers:
                if hasattr(observer, "on_subflows"):
                    observer.on_subflows(t0s, t1s, np.tile(flat, k), np.tile(lengths, k), np.tile(nbytes, k))
        calls = [c for c in calls if c[0] != "on_subflows"]
        stepped = [o for o in observers if hasattr(o, "on_steps_until")]
        if stepped and any(c[0] == "on_flows" for c in calls):
            # transfers' ends of every start at once, in the order the calls one by one give them
            # (`on_steps_until`: `on_flows` of each, told the last flow's end: base + the recorded
            # last end is the largest of base + each end, addition being monotonic); such an
            # observer's other calls (link bytes) keep state of their own
            flows = [
                (a[0], a[1], a[2] - origin_s, (a[3].max().item() if len(a[3]) else a[2]) - origin_s, a[4])
                for m, a in calls
                if m == "on_flows"
            ]
            ends = [
                (srcs, dsts, base + start, base + end, key)
                for base in starts.tolist()
                for srcs, dsts, start, end, key in flows
            ]
            for observer in stepped:
                observer.on_steps_until(ends)
        relative = [
            (
                m,
                (a[0], a[1], a[2] - origin_s, a[3] - origin_s, a[4])
                if m == "on_flows"
                else (a[0] - origin_s, a[1] - origin_s, *a[2:]),
            )
            for m, a in calls
        ]
        for base in starts.tolist():
            for method, args in relative:
                if method == "on_flows":
                    srcs, dsts, start, finish, key = args
                    shifted = (srcs, dsts, base + start, base + finish, key)
                else:
                    shifted = (base + args[0], base + args[1], *args[2:])
                for observer in observers:
                    call = getattr(observer, method, None)
                    if call is not None and not (method == "on_flows" and observer in stepped):
                        call(*shifted)
