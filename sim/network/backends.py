"""Network backends: how bytes move between endpoints of a Topology.

Both backends offer the same interface:
- `transfer(src, dst, nbytes)` -> a SimPy process that ends when the bytes are delivered;
- `transfer_many([(src, dst, nbytes), ...])` -> one SimPy event that fires when all are delivered
  (a bulk path: no Python process or object per flow, so a step of a 1,024-GPU all-to-all with a
  million flows stays cheap);
- `link_table()` -> per-link bytes carried, busy time and utilisation.

`FlowNetwork` (scenario `network_model: flow`, the default): every transfer is a flow routed over
the topology's directed links. Flow rates are max-min fair over all active flows on all links
(exact progressive filling, sim/network/max_min.py), recomputed whenever flows start or finish; flows that
start or finish at the same instant are handled by one recomputation, which refills only the flows
whose rate can change (sim/network/flow_table.py). A flow first waits the latency of its path (per-hop and
NIC latencies), then sends. ECMP `even` splits a flow evenly over the equal-cost paths (one row
whose entries are the fraction of the flow on each link; fat-tree spines are aggregated for this,
which is exact); `hash` picks one path per flow from a seeded substream, as switches do.

`AnalyticalNetwork` (`network_model: analytical`): alpha-beta without contention: a transfer takes
path latency + bytes / bottleneck capacity. For very large scale.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hardware_models.topology import Topology
from sim.engine.simulation import Simulation
from sim.network.flow_table import FlowTable
from sim.network.max_min import DONE_BYTES as _DONE_BYTES
from sim.network.max_min import flow_matrix, max_min_fair, max_min_rates  # noqa: F401 (re-exported for callers)
from sim.network.replay import Trajectory

_SPANS_PER_FLOW_MAX = 1024   # bulk transfers larger than this record one span per source, not per flow
_PAIR_ROUTES_MAX_FLOWS = 65536   # routes of larger transfers are not kept for reuse by endpoints
_PAIR_ROUTES_MAX_SETS = 4096     # endpoint sets whose routes are kept
_ROWS_MAX_KEYS = 1 << 18        # flow backend: endpoint sets (or single pairs) whose rows are kept
_ROUTES_MAX_PAIRS = 1 << 18     # endpoint pairs whose paths (and trace track) are kept
_FEW_ENTRIES = 16               # analytical transfers of at most this many link entries: plain Python


@dataclass
class _Routed:
    """A batch of flows expanded into sub-flows (one per ECMP path) as flat arrays."""
    flat: np.ndarray          # link ids of all sub-flows, concatenated
    lengths: np.ndarray       # links per sub-flow
    nbytes: np.ndarray        # bytes per sub-flow
    flow: np.ndarray          # index of the owning flow in the batch, per sub-flow
    latency: np.ndarray       # path latency per sub-flow
    weights: np.ndarray | None = None   # per link entry: fraction of the flow on it (None: all 1)


@dataclass
class _Group:
    """One transfer call: its flows, completion event and bookkeeping for spans."""
    event: object
    srcs: list
    dsts: list
    nbytes: np.ndarray
    name: str
    track: str | None
    start_s: float
    open_subflows: int
    finish_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    on_flow_done: object = None          # called with the indices of flows done at an instant


class Network:
    """Shared parts of both backends: routing, link accounting, spans."""

    def __init__(self, sim: Simulation, topology: Topology, ecmp: str = "even") -> None:
        self.sim = sim
        self.topology = topology
        self.ecmp = ecmp
        self._link_bytes = np.zeros(topology.num_links)
        self._link_busy_s = np.zeros(topology.num_links)
        self.bytes_sent = 0.0
        self.bytes_delivered = 0.0
        self.flows_started = 0
        # objects with on_links(t0, t1, link_bytes) / on_subflows(t0, t1, flat, lengths, nbytes) that
        # see every byte moved, and when, and optionally on_flows(srcs, dsts, start_s, finish_s) that sees
        # each transfer's endpoints when it completes (sim/engine/activity.py: traffic- and activity-driven power)
        self.traffic_observers: list = []
        self._route_cache: dict[tuple[str, str], tuple[tuple[tuple[int, ...], ...], tuple[float, ...]]] = {}
        # id(step) -> (step, srcs, dsts, bytes, total bytes, routed flows): repeated steps are set up once
        self._keyed: dict[int, tuple] = {}
        self._track_cache: dict[tuple[str, str], str] = {}
        self._estimate_terms: dict[tuple[str, str], tuple] = {}   # (src, dst) -> estimate_time_s terms
        # (srcs, dsts) -> routes of one byte per flow: the same endpoints with other sizes reuse them
        self._pair_routes: dict[tuple[tuple[str, ...], tuple[str, ...]], _Routed] = {}

    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes carried per link so far."""
        self._settle()
        return self._link_bytes

    @property
    def link_busy_s(self) -> np.ndarray:
        """Seconds each link carried traffic so far."""
        self._settle()
        return self._link_busy_s

    def _settle(self) -> None:
        """Apply deferred accounting (the flow backend batches replayed steps)."""

    # ---- routing -------------------------------------------------------------------------
    def paths_for(self, src: str, dst: str) -> list[tuple[int, ...]]:
        """The paths a flow from src to dst uses (all equal-cost paths, or one hashed path)."""
        paths = self.topology.routes(src, dst)
        if self.ecmp == "hash" and len(paths) > 1:
            return [paths[int(self.sim.rng("ecmp").integers(len(paths)))]]
        return paths

    def _route(self, flows) -> _Routed:
        """Expand flows into sub-flows (one per equal-cost path; one hashed path with ecmp=hash)."""
        srcs, dsts = [f[0] for f in flows], [f[1] for f in flows]
        nbytes = np.array([float(f[2]) for f in flows])
        batch = self.topology.route_batch(srcs, dsts) if len(flows) > 1 else None
        if batch is None:
            return self._route_pairs(flows)
        routed = _Routed(batch.flat, batch.lengths, nbytes[batch.owner] * batch.share, batch.owner, batch.latency)
        if self.ecmp == "hash":
            counts = np.bincount(batch.owner, minlength=len(flows))
            if (counts > 1).any():
                first = np.cumsum(counts) - counts
                pick = self.sim.rng("ecmp").integers(0, counts)          # one path per flow
                keep = (np.arange(len(batch.owner)) - first[batch.owner]) == pick[batch.owner]
                routed = _select(routed, keep)
                routed.nbytes = nbytes[routed.flow]
        return routed

    def _route_sized(self, flows, srcs, dsts, nbytes) -> _Routed:
        """`_route`, reusing the routes of an earlier call with the same endpoints (exact: sub-flow
        bytes are the flow's bytes times its path share). Hashed ECMP draws per call: not reused."""
        if self.ecmp == "hash" or not 1 < len(flows) <= _PAIR_ROUTES_MAX_FLOWS:
            return self._route(flows)         # single flows: _route_pairs caches per pair already
        key = (tuple(srcs), tuple(dsts))
        unit = self._pair_routes.get(key)
        if unit is None:
            unit = self._route([(s, d, 1.0) for s, d in zip(srcs, dsts)])
            if len(self._pair_routes) >= _PAIR_ROUTES_MAX_SETS:
                self._pair_routes.clear()       # bounded memory; a later call routes again
            self._pair_routes[key] = unit
        return _Routed(unit.flat, unit.lengths, unit.nbytes * nbytes[unit.flow], unit.flow, unit.latency, unit.weights)

    def _route_pairs(self, flows) -> _Routed:
        flat, lengths, nbytes, owner, latency = [], [], [], [], []
        topo = self.topology
        for i, (s, d, b) in enumerate(flows):
            key = (s, d)
            cached = self._route_cache.get(key)
            if cached is None or self.ecmp == "hash":
                paths = tuple(p for p in self.paths_for(s, d))
                cached = (paths, tuple(topo.path_latency_s(p) for p in paths))
                if self.ecmp != "hash":
                    if len(self._route_cache) >= _ROUTES_MAX_PAIRS:
                        self._route_cache.clear()       # bounded memory; a later flow routes again
                    self._route_cache[key] = cached
            paths, lat = cached
            share = float(b) / len(paths)
            for p, l in zip(paths, lat):
                flat.extend(p)
                lengths.append(len(p))
                nbytes.append(share)
                owner.append(i)
                latency.append(l)
        return _Routed(np.asarray(flat, dtype=np.int64), np.asarray(lengths, dtype=np.int64),
                       np.asarray(nbytes, dtype=float), np.asarray(owner, dtype=np.int64),
                       np.asarray(latency, dtype=float))

    def estimate_time_s(self, src: str, dst: str, nbytes: float) -> float:
        """Uncontended time of one transfer (alpha-beta on the path), for planners and heuristics."""
        terms = self._estimate_terms.get((src, dst))
        if terms is None:
            paths = self.topology.routes(src, dst)
            if not paths or paths == [()]:
                terms = ((), 1)
            else:   # distinct (latency, bottleneck capacity) of the paths, and their number
                terms = (tuple({(self.topology.path_latency_s(p), float(self.topology.capacity[list(p)].min()))
                                for p in paths}), len(paths))
            self._estimate_terms[(src, dst)] = terms
        pairs, n_paths = terms
        share = nbytes / n_paths
        return max((latency + share / capacity for latency, capacity in pairs), default=0.0)

    # ---- transfers -----------------------------------------------------------------------
    def transfer(self, src: str, dst: str, nbytes: float, name: str = "transfer", track: str | None = None):
        """Move `nbytes` from `src` to `dst`; returns a SimPy process that ends on delivery."""
        event = self.transfer_many([(src, dst, nbytes)], name=name, track=track)

        def wait():
            yield event
        return self.sim.process(wait())

    def transfer_many(self, flows, name: str = "transfer", track: str | None = None, key: object = None,
                      on_flow_done=None):
        """Start all `(src, dst, nbytes)` flows now; returns an event that fires when all are done.

        `key`: an object that identifies a step repeated with exactly these flows (a collective's
        step list): its routes are computed once and, on the flow backend, it may be replayed
        (sim/network/replay.py - exact). `on_flow_done(indices)`: called at each instant at which
        flows of this call complete, with their indices in `flows` (one call for many flows that
        need not wait for each other, instead of one call per flow)."""
        keyed = key is not None and self.ecmp != "hash"
        if keyed and id(key) in self._keyed:
            _, srcs, dsts, nbytes, total, routed = self._keyed[id(key)]
        else:
            flows = list(flows)
            srcs, dsts = [f[0] for f in flows], [f[1] for f in flows]
            nbytes = np.array([float(f[2]) for f in flows]) if flows else np.zeros(0)
            total = float(nbytes.sum())
            routed = self._route_sized(flows, srcs, dsts, nbytes) if flows else None
            if keyed:
                self._keyed[id(key)] = (key, srcs, dsts, nbytes, total, routed)
        event = self.sim.env.event()
        self.flows_started += len(srcs)
        self.bytes_sent += total
        group = _Group(event, srcs, dsts, nbytes, name, track, self.sim.now, 0,
                       np.full(len(srcs), float(self.sim.now)), on_flow_done)   # float: now is int 0 at start
        if not srcs:
            event.succeed()
            return event
        self._start(group, routed, key if keyed else None)
        return event

    def _start(self, group: _Group, routed: _Routed, key: object) -> None:
        raise NotImplementedError

    def _complete(self, group: _Group) -> None:
        self.bytes_delivered += float(group.nbytes.sum())
        self._record(group)
        for observer in self.traffic_observers:
            if hasattr(observer, "on_flows"):        # optional part of the observer interface
                observer.on_flows(group.srcs, group.dsts, group.start_s, group.finish_s)
        group.event.succeed()

    def _record(self, group: _Group) -> None:
        track = group.track
        recorder = self.sim.recorder
        if recorder.limit is not None and len(recorder.rows) >= recorder.limit:
            recorder.dropped += len(group.srcs)          # trace full: skip the per-flow work
            return
        if len(group.srcs) <= _SPANS_PER_FLOW_MAX:           # a span per flow, recorded in bulk
            tracks = track or [self._first_link_kind(s, d) for s, d in zip(group.srcs, group.dsts)]
            recorder.spans(group.srcs, tracks, [f"{group.name} ->{d}" for d in group.dsts], group.start_s,
                           group.finish_s, group.nbytes, category="comm")
            return
        per_src: dict[str, float] = {}
        for s, b in zip(group.srcs, group.nbytes):
            per_src[s] = per_src.get(s, 0.0) + float(b)
        end = float(group.finish_s.max())
        for s, b in per_src.items():
            self.sim.span(s, track or "nic", f"{group.name} ({len(group.srcs)} flows)", group.start_s, end,
                          nbytes=b, category="comm")

    def _first_link_kind(self, src: str, dst: str) -> str:
        """Trace track of a flow: the kind of its first link (scale_up, nic, host, memory)."""
        kind = self._track_cache.get((src, dst))
        if kind is None:
            paths = self.topology.routes(src, dst)
            kind = self.topology.link_kind[paths[0][0]] if paths and paths[0] else "local"
            if len(self._track_cache) >= _ROUTES_MAX_PAIRS:
                self._track_cache.clear()               # bounded memory
            self._track_cache[(src, dst)] = kind
        return kind

    def link_table(self, elapsed_s: float | None = None) -> pd.DataFrame:
        """Per-link bytes, busy time and utilisation (bytes / (capacity x elapsed))."""
        topo = self.topology
        elapsed = elapsed_s if elapsed_s is not None else self.sim.now
        df = pd.DataFrame({
            "link": [topo.link_name(i) for i in range(topo.num_links)],
            "kind": topo.link_kind,
            "capacity_bytes_per_s": topo.capacity,
            "bytes": self.link_bytes,
            "busy_s": self.link_busy_s,
        })
        df["utilisation"] = df["bytes"] / (df["capacity_bytes_per_s"] * elapsed) if elapsed > 0 else 0.0
        return df


class AnalyticalNetwork(Network):
    """Alpha-beta transfers without contention between transfers: latency + bytes / bandwidth.

    Within one transfer call (a collective step) the flows that share a link are serialised on it:
    a flow takes latency + max over its links of (the call's bytes on that link / capacity). For a
    ring step (one flow per link) that is bytes / bottleneck; for an all-to-all step it is the
    classic (n-1)/n * S / B of the sender's NIC."""

    def _start(self, group: _Group, routed: _Routed, key: object) -> None:
        capacity = self.topology.capacity
        if len(routed.flat) <= _FEW_ENTRIES:         # a few entries: plain Python, same arithmetic
            t_bw, finish = _alpha_beta_few(routed, capacity, len(group.srcs))
            flat, position = routed.flat.tolist(), 0
            for n, nbytes, busy in zip(routed.lengths.tolist(), routed.nbytes.tolist(), t_bw.tolist()):
                for link in flat[position:position + n]:
                    self._link_bytes[link] += nbytes
                    self._link_busy_s[link] += busy
                position += n
        else:
            t_bw, finish = _alpha_beta(routed, capacity, len(group.srcs))
            entry_bytes = np.repeat(routed.nbytes, routed.lengths)
            for total, values in ((self._link_bytes, entry_bytes), (self._link_busy_s, np.repeat(t_bw, routed.lengths))):
                if 8 * len(routed.flat) < len(capacity):          # few entries: in place
                    np.add.at(total, routed.flat, values)
                else:                                              # many: one pass over the links
                    total += np.bincount(routed.flat, values, minlength=len(capacity))
        for observer in self.traffic_observers:
            t0 = group.start_s + routed.latency
            observer.on_subflows(t0, t0 + t_bw, routed.flat, routed.lengths, routed.nbytes)
        group.finish_s = group.start_s + finish
        if group.on_flow_done is not None:
            offsets, which = np.unique(finish, return_inverse=True)
            for k, offset in enumerate(offsets.tolist()):
                self._notify_at(offset, group, np.flatnonzero(which.ravel() == k))
        done = self.sim.timeout(float(finish.max()))
        done.callbacks.append(lambda _e: self._complete(group))

    def _notify_at(self, delay: float, group: _Group, indices: np.ndarray) -> None:
        self.sim.timeout(delay).callbacks.append(lambda _e: group.on_flow_done(indices))


class FlowNetwork(Network):
    """Max-min fair flows, recomputed on every start/finish (batched per instant). The active flows
    live in a `FlowTable` (sim/network/flow_table.py), which refills only the flows whose rate can change."""

    def __init__(self, sim: Simulation, topology: Topology, ecmp: str = "even") -> None:
        super().__init__(sim, topology, ecmp)
        self._capacity = topology.capacity
        self._num_links = topology.num_links
        self._table = FlowTable(topology.capacity, shared=np.asarray(topology.link_kind) == "fabric")
        self._groups: dict[int, _Group] = {}
        self._arrivals: list[tuple[float, int, int, _Routed]] = []   # (time, seq, group id, rows)
        self._last_s = 0.0
        self._generation = 0
        self._seq = 0
        self._kick_scheduled = False
        self.recomputations = 0
        self.peak_active_subflows = 0
        self.replayed_steps = 0
        self.replay = True                                # replay repeated steps (exact; off for checks)
        self._rows: dict[tuple, _Routed] = {}             # (srcs, dsts) -> one row per flow, one byte each
        self._real_rows: dict[int, _Routed] = {}          # id(step) -> its rows that carry bytes
        self._trajectories: dict[int, Trajectory] = {}    # id(step) -> recorded trajectory
        self._recording: Trajectory | None = None
        self._replay: tuple | None = None                 # (gid, group, trajectory, token)
        self._deferred: list | None = None                # [trajectory, count, t0, t1] of back-to-back replays

    @property
    def active_flows(self) -> int:
        return self._table.n_alive

    @property
    def plain(self) -> bool:
        """True: the straightforward path, every flow refilled by `max_min_fair` at every change (for
        checks; the default incremental path gives the same rates)."""
        return self._table.plain

    @plain.setter
    def plain(self, value: bool) -> None:
        self._table.plain = bool(value)

    @property
    def _matrix(self):
        """(links x active flows) incidence, in the order of `_rate` (for checks)."""
        return self._table.matrix()[0] if self._table.n_alive else None

    @property
    def _rate(self) -> np.ndarray:
        return self._table.rates(self._table.slots())

    # ---- admission ------------------------------------------------------------------------
    def _route_sized(self, flows, srcs, dsts, nbytes) -> _Routed:
        """One row per flow: its ECMP paths merged (`_merge_paths`), entries the fraction of the
        flow on each link. Rows of the same endpoints are reused (hashed ECMP draws per call)."""
        if self.ecmp == "hash" or len(flows) > _PAIR_ROUTES_MAX_FLOWS:
            unit = self._unit_rows(srcs, dsts)
        else:
            key = (srcs[0], dsts[0]) if len(flows) == 1 else (tuple(srcs), tuple(dsts))
            unit = self._rows.get(key)
            if unit is None:
                unit = self._row(*key) if len(flows) == 1 else self._unit_rows(srcs, dsts)
                if len(self._rows) >= _ROWS_MAX_KEYS:
                    self._rows.clear()            # bounded memory; a later call routes again
                self._rows[key] = unit
        return _Routed(unit.flat, unit.lengths, nbytes[unit.flow], unit.flow, unit.latency, unit.weights)

    def _unit_rows(self, srcs: list, dsts: list) -> _Routed:
        """One row per flow of one byte (`_merge_paths` of its ECMP paths)."""
        batch = self.topology.route_batch(srcs, dsts) if len(srcs) > 1 and self.ecmp != "hash" else None
        if batch is None:
            return _merge_paths(self._route([(s, d, 1.0) for s, d in zip(srcs, dsts)]))
        return _merge_paths(_Routed(batch.flat, batch.lengths, np.asarray(batch.share, dtype=float),
                                    batch.owner, batch.latency))

    def _row(self, src: str, dst: str) -> _Routed:
        """The row of one flow of one byte from src to dst (`_merge_paths` of its ECMP paths)."""
        paths = self.topology.routes(src, dst)
        entries: dict[int, float] = {}
        for path in paths:
            for link in path:
                entries[link] = entries.get(link, 0.0) + 1.0 / len(paths)
        latency = max(self.topology.path_latency_s(p) for p in paths)
        return _Routed(np.fromiter(entries, dtype=np.int64, count=len(entries)), np.array([len(entries)]),
                       np.ones(1), np.zeros(1, dtype=np.int64), np.array([latency]),
                       np.fromiter(entries.values(), dtype=float, count=len(entries)))

    def _start(self, group: _Group, routed: _Routed, key: object) -> None:
        if self._replay is not None:
            self._materialise()
        if self._recording is not None:
            self._recording.valid = False                 # the recorded step no longer ran alone
        gid = self.sim.next_id("flow-group")
        self._groups[gid] = group
        rows = self._real_rows.get(id(key)) if key is not None else None
        if rows is None:
            # rows that cross no link (src == dst) or carry no bytes finish after their latency
            if len(routed.lengths) == 1:
                real = routed.lengths[0] > 0 and routed.nbytes[0] > 0
                rows = routed if real else _select(routed, np.zeros(1, dtype=bool))
            else:
                real = (routed.lengths > 0) & (routed.nbytes > 0)
                rows = routed if real.all() else _select(routed, real)
            if key is not None:
                self._real_rows[id(key)] = rows
        group.open_subflows = len(rows.lengths)
        if group.open_subflows == 0:
            delay = float(routed.latency.max()) if len(routed.latency) else 0.0
            group.finish_s = np.full(len(group.srcs), self.sim.now + delay)
            self.sim.timeout(delay).callbacks.append(lambda _e: self._finish_group(gid, notify=True))
            return
        if group.on_flow_done is not None and group.open_subflows < len(group.srcs):
            idle = np.setdiff1d(np.arange(len(group.srcs)), rows.flow)      # done at their start
            self.sim.timeout(0).callbacks.append(lambda _e: group.on_flow_done(idle))
        if key is not None and self.replay and group.on_flow_done is None and self._idle():
            trajectory = self._trajectories.get(id(key))
            if trajectory is not None:
                self._start_replay(gid, group, trajectory)
                return
            self._settle()
            self._recording = Trajectory(key, gid, self.sim.now, rows.nbytes, rows.latency, rows,
                                         self._link_bytes.copy(), self._link_busy_s.copy())
        self._enqueue(gid, rows, self.sim.now)
        if not self._kick_scheduled:          # one update per instant, however many transfers start
            self._kick_scheduled = True
            self.sim.timeout(0).callbacks.append(self._on_kick)

    def _enqueue(self, gid: int, rows: _Routed, start_s: float) -> None:
        """Rows enter the network after their path latency (one arrival per distinct latency)."""
        latency = rows.latency
        parts = [(latency[0], rows)] if len(latency) == 1 or (latency == latency[0]).all() else \
            [(lat, _select(rows, latency == lat)) for lat in np.unique(latency)]
        for lat, part in parts:
            self._seq += 1
            heapq.heappush(self._arrivals, (start_s + float(lat), self._seq, gid, part))

    def _on_kick(self, _event) -> None:
        self._kick_scheduled = False
        self._update()

    def _on_timer(self, generation: int) -> None:
        if generation == self._generation:
            self._update()

    # ---- the core loop: advance, finish, admit, recompute, schedule -----------------------
    def _update(self) -> None:
        self._advance()
        if self._recording is not None and self._recording.valid:
            rec, table = self._recording, self._table
            slots = table.slots()
            mine = slots[table.group[slots] == rec.gid]
            rec.snapshot(self.sim.now, table.flow[mine], table.left_at(mine, self.sim.now),
                         self._link_bytes, self._link_busy_s)
        self._finish_done()
        self._admit_due()
        self._recompute()
        self._schedule()

    def flush(self) -> None:
        """Account the bytes moved since the last rate change up to now (e.g. when a run ends mid-flow)."""
        self._advance()
        self._settle()

    def _advance(self) -> None:
        now = self.sim.now
        dt = now - self._last_s
        self._last_s = now
        if dt <= 0 or not self._table.n_alive:
            return
        delta = self._table.link_rate * dt
        self._link_bytes += delta
        self._link_busy_s[self._table.used_links()] += dt
        for observer in self.traffic_observers:
            observer.on_links(now - dt, now, delta)

    def _finish_done(self) -> None:
        table, now = self._table, self.sim.now
        slots = table.done(now)
        if not len(slots):
            return
        order = np.argsort(table.group[slots], kind="stable")
        done_groups, done_flows = table.group[slots][order], table.flow[slots][order]
        table.remove(slots)
        starts = np.flatnonzero(np.concatenate([[True], done_groups[1:] != done_groups[:-1]]))
        ends = np.append(starts[1:], len(done_groups))
        complete = []
        for gid, a, b in zip(done_groups[starts].tolist(), starts.tolist(), ends.tolist()):
            group = self._groups[gid]
            group.finish_s[done_flows[a:b]] = now
            group.open_subflows -= b - a
            if group.on_flow_done is not None:
                group.on_flow_done(done_flows[a:b])
            if group.open_subflows == 0:
                complete.append(gid)
        for gid in complete:
            self._finish_group(gid)

    def _finish_group(self, gid: int, notify: bool = False) -> None:
        group = self._groups.pop(gid)
        if notify and group.on_flow_done is not None:
            group.on_flow_done(np.arange(len(group.srcs)))
        rec = self._recording
        if rec is not None and rec.gid == gid:
            if rec.valid and len(rec.offsets) >= 2:
                rec.finish(self.sim.now, group.finish_s)
                self._trajectories[id(rec.key)] = rec
            self._recording = None
        self._complete(group)

    def _admit_due(self) -> None:
        now = self.sim.now
        parts = []
        while self._arrivals and self._arrivals[0][0] <= now * (1 + 1e-15) + 1e-18:
            _, _, gid, part = heapq.heappop(self._arrivals)
            parts.append((gid, part))
        if not parts:
            return
        if len(parts) == 1:
            gid, p = parts[0]
            self._table.add(p.flat, p.weights, p.lengths, p.nbytes, np.full(len(p.lengths), gid), p.flow, now)
            return
        cat = np.concatenate
        self._table.add(cat([p.flat for _, p in parts]), cat([p.weights for _, p in parts]),
                        cat([p.lengths for _, p in parts]), cat([p.nbytes for _, p in parts]),
                        np.repeat([gid for gid, _ in parts], [len(p.lengths) for _, p in parts]),
                        cat([p.flow for _, p in parts]), now)

    def _recompute(self) -> None:
        self.recomputations += 1
        self.peak_active_subflows = max(self.peak_active_subflows, self._table.n_alive)
        self._table.recompute(self.sim.now)

    def _schedule(self) -> None:
        self._generation += 1
        now = self.sim.now
        delay = min(self._table.next_finish(), self._arrivals[0][0] if self._arrivals else np.inf) - now
        if delay == np.inf:
            return
        generation = self._generation
        self.sim.timeout(max(delay, 0.0)).callbacks.append(lambda _e: self._on_timer(generation))

    # ---- replay of recorded steps (sim/network/replay.py) ----------------------------------
    def _idle(self) -> bool:
        return not self._table.n_alive and not self._arrivals and self._replay is None \
            and self._recording is None

    def _start_replay(self, gid: int, group: _Group, trajectory: Trajectory) -> None:
        self.replayed_steps += 1
        token = object()
        self._replay = (gid, group, trajectory, token)
        group.finish_s = self.sim.now + trajectory.finish_offsets
        self.sim.timeout(trajectory.duration_s).callbacks.append(lambda _e: self._end_replay(token))

    def _end_replay(self, token: object) -> None:
        if self._replay is None or self._replay[3] is not token:
            return
        gid, group, trajectory, _ = self._replay
        self._replay = None
        d = self._deferred
        if d is not None and d[0] is trajectory and d[3] == group.start_s:
            d[1] += 1                                     # back-to-back replays: account them at once
            d[3] = self.sim.now
        else:
            self._settle()
            self._deferred = [trajectory, 1, group.start_s, self.sim.now]
        self._finish_group(gid)

    def _settle(self) -> None:
        if self._deferred is not None:
            trajectory, count, t0, t1 = self._deferred
            self._deferred = None
            link_bytes, busy = trajectory.totals(self._num_links)
            self._account(t0, t1, link_bytes * count, busy * count)

    def _account(self, t0: float, t1: float, link_bytes: np.ndarray, busy: np.ndarray) -> None:
        self._link_bytes += link_bytes
        self._link_busy_s += busy
        for observer in self.traffic_observers:
            observer.on_links(t0, t1, link_bytes)

    def _materialise(self) -> None:
        """Another transfer starts during a replay: put the step's flows back with the bytes they
        would have left now, so the simulation continues exactly as without the replay."""
        gid, group, trajectory, _ = self._replay
        self._replay = None
        now = self.sim.now
        offset = now - group.start_s
        remaining, link_bytes, busy = trajectory.state_at(offset, self._num_links)
        self._account(group.start_s, now, link_bytes, busy)
        routed = trajectory.routed
        entered = routed.latency <= offset
        active = entered & (remaining > _DONE_BYTES)
        waiting = ~entered
        group.open_subflows = int(active.sum() + waiting.sum())
        group.finish_s[routed.flow[active | waiting]] = np.nan       # set when they finish
        self._groups[gid] = group
        if group.open_subflows == 0:
            self._finish_group(gid)
            return
        rows = _select(routed, active)
        self._last_s = now                     # the network was idle: nothing else to advance
        if len(rows.lengths):
            self._table.add(rows.flat, rows.weights, rows.lengths, remaining[active],
                            np.full(len(rows.lengths), gid), rows.flow, now)
        if waiting.any():
            self._enqueue(gid, _select(routed, waiting), group.start_s)
        self._recompute()
        self._schedule()


def _alpha_beta(routed: _Routed, capacity: np.ndarray, n_flows: int) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth time per sub-flow, finish offset per flow) of one analytical transfer: a sub-flow
    takes the slowest of its links at the call's bytes on that link (plus its path latency)."""
    starts = np.concatenate([[0], np.cumsum(routed.lengths)])
    entry_bytes = np.repeat(routed.nbytes, routed.lengths)
    slowest = np.zeros(len(routed.lengths))
    nonempty = routed.lengths > 0
    if nonempty.any():
        if 8 * len(routed.flat) < len(capacity):           # few entries: the links used only
            used, inverse = np.unique(routed.flat, return_inverse=True)
            load = np.bincount(inverse.ravel(), entry_bytes, minlength=len(used))[inverse.ravel()]
        else:
            load = np.bincount(routed.flat, entry_bytes, minlength=len(capacity))[routed.flat]
        per_entry = load / capacity[routed.flat]
        slowest[nonempty] = np.maximum.reduceat(per_entry, starts[:-1][nonempty])
    t_bw = np.where(nonempty, slowest, 0.0)
    finish = np.zeros(n_flows)
    np.maximum.at(finish, routed.flow, routed.latency + t_bw)
    return t_bw, finish


def _alpha_beta_few(routed: _Routed, capacity: np.ndarray, n_flows: int) -> tuple[np.ndarray, np.ndarray]:
    """`_alpha_beta` of a transfer with a few link entries, in plain Python (numpy's cost per call
    would dominate): the same operations in the same order, so the same times to the last bit."""
    flat, lengths = routed.flat.tolist(), routed.lengths.tolist()
    load: dict[int, float] = {}
    position = 0
    for n, nbytes in zip(lengths, routed.nbytes.tolist()):
        for link in flat[position:position + n]:
            load[link] = load.get(link, 0.0) + nbytes
        position += n
    t_bw, finish, position = [], [0.0] * n_flows, 0
    for n, latency, flow in zip(lengths, routed.latency.tolist(), routed.flow.tolist()):
        links = flat[position:position + n]
        position += n
        t = max(load[link] / float(capacity[link]) for link in links) if links else 0.0
        t_bw.append(t)
        finish[flow] = max(finish[flow], latency + t)
    return np.array(t_bw, dtype=float), np.array(finish, dtype=float)


def _select(routed: _Routed, mask: np.ndarray) -> _Routed:
    entries = np.repeat(mask, routed.lengths)
    return _Routed(routed.flat[entries], routed.lengths[mask], routed.nbytes[mask], routed.flow[mask],
                   routed.latency[mask], None if routed.weights is None else routed.weights[entries])


def _merge_paths(routed: _Routed) -> _Routed:
    """One flow per transfer: its ECMP sub-flows (contiguous, same owner) become one row whose link
    entries are the fraction of the flow on each path (an evenly sprayed flow is one flow at its
    NIC, not k flows). Latency: the slowest path's."""
    owner = routed.flow
    run_start = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
    nbytes = np.add.reduceat(routed.nbytes, run_start)
    run_of = np.repeat(np.arange(len(run_start)), np.diff(np.append(run_start, len(owner))))
    share = routed.nbytes / nbytes[run_of]
    merged = _Routed(routed.flat, np.add.reduceat(routed.lengths, run_start), nbytes, owner[run_start],
                     np.maximum.reduceat(routed.latency, run_start), np.repeat(share, routed.lengths))
    if len(run_start) == len(owner):
        return merged
    # links that several paths of a flow share (its NIC) become one entry: their fractions add up
    base = int(merged.flat.max()) + 1
    key = np.repeat(np.arange(len(merged.lengths)), merged.lengths) * base + merged.flat
    key, inverse = np.unique(key, return_inverse=True)
    merged.weights = np.bincount(inverse.ravel(), merged.weights)
    merged.flat = key % base
    merged.lengths = np.bincount(key // base, minlength=len(merged.lengths))
    return merged


def make_network(model: str, sim: Simulation, topology: Topology, ecmp: str = "even") -> Network:
    if model == "flow":
        return FlowNetwork(sim, topology, ecmp)
    if model == "analytical":
        return AnalyticalNetwork(sim, topology, ecmp)
    raise ValueError(f"unknown network_model {model!r}; allowed: flow, analytical")
