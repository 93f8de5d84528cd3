"""Network backends: how bytes move between endpoints of a Topology.

Both backends offer the same interface:
- `transfer(src, dst, nbytes)` -> a SimPy process that ends when the bytes are delivered;
- `transfer_many([(src, dst, nbytes), ...])` -> one SimPy event that fires when all are delivered
  (a bulk path: no Python process or object per flow, so a step of a 1,024-GPU all-to-all with a
  million flows stays cheap);
- `link_table()` -> per-link bytes carried, busy time and utilisation.

`FlowNetwork` (scenario `network_model: flow`, the default): every transfer is a flow routed over
the topology's directed links. Flow rates are max-min fair over all active flows on all links
(exact progressive filling, `max_min_fair`), recomputed whenever flows start or finish; flows that
start or finish at the same instant are handled by one recomputation. A flow first waits the
latency of its path (per-hop and NIC latencies), then sends. ECMP `even` splits a flow into equal
sub-flows over the equal-cost paths (fat-tree spines are aggregated for this, which is exact);
`hash` picks one path per flow from a seeded substream, as switches do.

`AnalyticalNetwork` (`network_model: analytical`): alpha-beta without contention: a transfer takes
path latency + bytes / bottleneck capacity. For very large scale.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from hardware_models.topology import Topology
from sim.engine import Simulation
from sim.network_replay import Trajectory

_DONE_BYTES = 1e-3        # a sub-flow with fewer bytes left than this is complete
_REL_TOL = 1e-9
_SPANS_PER_FLOW_MAX = 1024   # bulk transfers larger than this record one span per source, not per flow
_PAIR_ROUTES_MAX_FLOWS = 65536   # routes of larger transfers are not kept for reuse by endpoints
_PAIR_ROUTES_MAX_SETS = 4096     # endpoint sets whose routes are kept


def flow_matrix(lengths: np.ndarray, flat_links: np.ndarray, num_links: int,
                weights: np.ndarray | None = None) -> sp.csr_matrix:
    """(links x flows) incidence from flows given as concatenated link ids and entries per flow.

    An entry is the fraction of the flow's rate that crosses the link: 1 on a single path; with
    ECMP even splitting over k paths, 1/k on each path's own links (repeated links add up, so the
    shared NIC links get 1)."""
    n = len(lengths)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    data = np.ones(len(flat_links)) if weights is None else weights.copy()
    flows_by_links = sp.csr_matrix((data, flat_links.copy(), indptr), shape=(n, num_links))
    flows_by_links.sum_duplicates()       # in place: hence the copies above
    return flows_by_links.T.tocsr()


def max_min_fair(matrix: sp.csr_matrix, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates by progressive filling (exact).

    `matrix` is the (links x flows) incidence (entries: fraction of the flow's rate on the link),
    `capacity` the links' capacities. All unfrozen flows grow at one common rate; the link that
    fills first (smallest remaining capacity / summed entries of its unfrozen flows) is a
    bottleneck: its unfrozen flows are frozen at that rate and their load leaves their links.
    Flows that cross no link are unconstrained (rate inf).
    """
    n_links, n = matrix.shape
    transpose = matrix.T.tocsr()
    remaining = capacity.astype(float).copy()
    rate = np.full(n, np.inf)
    frozen = np.diff(transpose.indptr) == 0
    while not frozen.all():
        counts = matrix @ (~frozen).astype(float)
        active = counts > 1e-12
        share = np.full(n_links, np.inf)
        share[active] = np.maximum(remaining[active], 0.0) / counts[active]
        level = share.min()
        bottleneck = active & (share <= level * (1 + _REL_TOL) + 1e-12)
        newly = (transpose @ bottleneck.astype(float) > 0) & ~frozen
        rate[newly] = level
        frozen |= newly
        remaining -= matrix @ np.where(newly, level, 0.0)
    return rate


def max_min_rates(paths: list, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows given as link-id sequences over links of `capacity`."""
    if not len(paths):
        return np.zeros(0)
    lengths = np.array([len(p) for p in paths], dtype=np.int64)
    flat = np.concatenate([np.asarray(p, dtype=np.int64) for p in paths]) if lengths.sum() else np.zeros(0, np.int64)
    return max_min_fair(flow_matrix(lengths, flat, len(capacity)), capacity)


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
        # each transfer's endpoints when it completes (sim/activity.py: traffic- and activity-driven power)
        self.traffic_observers: list = []
        self._route_cache: dict[tuple[str, str], tuple[tuple[tuple[int, ...], ...], np.ndarray]] = {}
        # id(step) -> (step, srcs, dsts, bytes, total bytes, routed flows): repeated steps are set up once
        self._keyed: dict[int, tuple] = {}
        self._track_cache: dict[tuple[str, str], str] = {}
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
                lat = np.array([topo.path_latency_s(p) for p in paths])
                cached = (paths, lat)
                if self.ecmp != "hash":
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
        paths = self.topology.routes(src, dst)
        if not paths or paths == [()]:
            return 0.0
        share = nbytes / len(paths)
        return max(self.topology.path_latency_s(p) + share / self.topology.capacity[list(p)].min()
                   for p in paths)

    # ---- transfers -----------------------------------------------------------------------
    def transfer(self, src: str, dst: str, nbytes: float, name: str = "transfer", track: str | None = None):
        """Move `nbytes` from `src` to `dst`; returns a SimPy process that ends on delivery."""
        event = self.transfer_many([(src, dst, nbytes)], name=name, track=track)

        def wait():
            yield event
        return self.sim.process(wait())

    def transfer_many(self, flows, name: str = "transfer", track: str | None = None, key: object = None):
        """Start all `(src, dst, nbytes)` flows now; returns an event that fires when all are done.

        `key`: an object that identifies a step repeated with exactly these flows (a collective's
        step list): its routes are computed once and, on the flow backend, it may be replayed
        (sim/network_replay.py - exact)."""
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
                       np.full(len(srcs), float(self.sim.now)))   # float: now is int 0 at start
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
        if len(group.srcs) <= _SPANS_PER_FLOW_MAX:
            for s, d, b, end in zip(group.srcs, group.dsts, group.nbytes, group.finish_s):
                tr = track or self._first_link_kind(s, d)
                self.sim.span(s, tr, f"{group.name} ->{d}", group.start_s, float(end), nbytes=float(b), category="comm")
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
        starts = np.concatenate([[0], np.cumsum(routed.lengths)])
        capacity = self.topology.capacity
        load = np.bincount(routed.flat, weights=np.repeat(routed.nbytes, routed.lengths), minlength=len(capacity))
        slowest = np.zeros(len(routed.lengths))
        nonempty = routed.lengths > 0
        if nonempty.any():
            per_entry = load[routed.flat] / capacity[routed.flat]
            slowest[nonempty] = np.maximum.reduceat(per_entry, starts[:-1][nonempty])
        t_bw = np.where(nonempty, slowest, 0.0)
        per_sub = routed.latency + t_bw
        link_of = routed.flat
        np.add.at(self._link_bytes, link_of, np.repeat(routed.nbytes, routed.lengths))
        np.add.at(self._link_busy_s, link_of, np.repeat(t_bw, routed.lengths))
        for observer in self.traffic_observers:
            t0 = group.start_s + routed.latency
            observer.on_subflows(t0, t0 + t_bw, routed.flat, routed.lengths, routed.nbytes)
        finish = np.zeros(len(group.srcs))
        np.maximum.at(finish, routed.flow, per_sub)
        group.finish_s = group.start_s + finish
        done = self.sim.timeout(float(finish.max()))
        done.callbacks.append(lambda _e: self._complete(group))


class FlowNetwork(Network):
    """Max-min fair flows, recomputed on every start/finish (batched per instant)."""

    def __init__(self, sim: Simulation, topology: Topology, ecmp: str = "even") -> None:
        super().__init__(sim, topology, ecmp)
        n_links = topology.num_links
        self._capacity = topology.capacity
        self._num_links = n_links
        # active sub-flows as flat arrays
        self._flat = np.zeros(0, dtype=np.int64)
        self._weights = np.zeros(0)
        self._lengths = np.zeros(0, dtype=np.int64)
        self._remaining = np.zeros(0)
        self._rate = np.zeros(0)
        self._group = np.zeros(0, dtype=np.int64)      # owning group id
        self._flow = np.zeros(0, dtype=np.int64)       # flow index within the group
        self._groups: dict[int, _Group] = {}
        self._arrivals: list[tuple[float, int, int, _Routed]] = []   # (time, seq, group id, sub-flows)
        self._matrix = None
        self._used = np.zeros(n_links, dtype=bool)
        self._last_s = 0.0
        self._generation = 0
        self._seq = 0
        self._kick_scheduled = False
        self.recomputations = 0
        self.peak_active_subflows = 0
        self.replayed_steps = 0
        self.replay = True                                # replay repeated steps (exact; off for checks)
        self._merged: dict[int, _Routed] = {}             # id(step) -> merged rows
        self._trajectories: dict[int, Trajectory] = {}    # id(step) -> recorded trajectory
        self._recording: Trajectory | None = None
        self._replay: tuple | None = None                 # (gid, group, trajectory, token)
        self._deferred: list | None = None                # [trajectory, count, t0, t1] of back-to-back replays

    @property
    def active_flows(self) -> int:
        return len(self._lengths)

    # ---- admission ------------------------------------------------------------------------
    def _start(self, group: _Group, routed: _Routed, key: object) -> None:
        if self._replay is not None:
            self._materialise()
        if self._recording is not None:
            self._recording.valid = False                 # the recorded step no longer ran alone
        gid = self.sim.next_id("flow-group")
        self._groups[gid] = group
        real = (routed.lengths > 0) & (routed.nbytes > 0)
        group.open_subflows = int(real.sum())
        # sub-flows that cross no link (src == dst) or carry no bytes finish after their latency
        if group.open_subflows == 0:
            delay = float(routed.latency.max()) if len(routed.latency) else 0.0
            group.finish_s = np.full(len(group.srcs), self.sim.now + delay)
            self.sim.timeout(delay).callbacks.append(lambda _e: self._finish_group(gid))
            return
        if key is not None and id(key) in self._merged:
            routed = self._merged[id(key)]
        else:
            routed = _merge_paths(_select(routed, real))
            if key is not None:
                self._merged[id(key)] = routed
        group.open_subflows = len(routed.lengths)
        if key is not None and self.replay and self._idle():
            trajectory = self._trajectories.get(id(key))
            if trajectory is not None:
                self._start_replay(gid, group, trajectory)
                return
            self._settle()
            self._recording = Trajectory(key, gid, self.sim.now, routed.nbytes, routed.latency, routed,
                                         self._link_bytes.copy(), self._link_busy_s.copy())
        for latency in np.unique(routed.latency):
            part = _select(routed, routed.latency == latency)
            self._seq += 1
            heapq.heappush(self._arrivals, (self.sim.now + float(latency), self._seq, gid, part))
        if not self._kick_scheduled:          # one update per instant, however many transfers start
            self._kick_scheduled = True
            self.sim.timeout(0).callbacks.append(self._on_kick)

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
            rec = self._recording
            mine = self._group == rec.gid
            rec.snapshot(self.sim.now, self._flow[mine], self._remaining[mine], self._link_bytes, self._link_busy_s)
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
        if dt <= 0 or not len(self._lengths):
            return
        moved = self._rate * dt
        self._remaining = np.maximum(self._remaining - moved, 0.0)
        delta = self._matrix @ moved
        self._link_bytes += delta
        self._link_busy_s[self._used] += dt
        for observer in self.traffic_observers:
            observer.on_links(now - dt, now, delta)

    def _finish_done(self) -> None:
        # done: (almost) no bytes left, or fewer than the clock can resolve at this rate (at large
        # `now` a timer lands up to one ulp early; without this the leftover never finishes)
        resolution = 4 * np.spacing(self.sim.now) * self._rate if len(self._rate) == len(self._remaining) else 0.0
        finished = self._remaining <= np.maximum(_DONE_BYTES, resolution)
        if not finished.any():
            return
        now = self.sim.now
        done_groups, done_flows = self._group[finished], self._flow[finished]
        gids, counts = np.unique(done_groups, return_counts=True)
        for gid in gids:
            self._groups[int(gid)].finish_s[done_flows[done_groups == gid]] = now
        keep = ~finished
        entries = np.repeat(keep, self._lengths)
        self._flat = self._flat[entries]
        self._weights = self._weights[entries]
        self._lengths = self._lengths[keep]
        self._remaining = self._remaining[keep]
        self._group = self._group[keep]
        self._flow = self._flow[keep]
        for gid, count in zip(gids, counts):
            group = self._groups[int(gid)]
            group.open_subflows -= int(count)
            if group.open_subflows == 0:
                self._finish_group(int(gid))

    def _finish_group(self, gid: int) -> None:
        group = self._groups.pop(gid)
        rec = self._recording
        if rec is not None and rec.gid == gid:
            if rec.valid and len(rec.offsets) >= 2:
                rec.finish(self.sim.now, group.finish_s)
                self._trajectories[id(rec.key)] = rec
            self._recording = None
        self._complete(group)

    # ---- replay of recorded steps (sim/network_replay.py) ----------------------------------
    def _idle(self) -> bool:
        return not len(self._lengths) and not self._arrivals and self._replay is None \
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
        self._flat = np.concatenate([self._flat, rows.flat])
        self._weights = np.concatenate([self._weights, rows.weights])
        self._lengths = np.concatenate([self._lengths, rows.lengths])
        self._remaining = np.concatenate([self._remaining, remaining[active]])
        self._group = np.concatenate([self._group, np.full(len(rows.lengths), gid)])
        self._flow = np.concatenate([self._flow, rows.flow])
        for latency in np.unique(routed.latency[waiting]):
            part = _select(routed, waiting & (routed.latency == latency))
            self._seq += 1
            heapq.heappush(self._arrivals, (group.start_s + float(latency), self._seq, gid, part))
        self._recompute()
        self._schedule()

    def _admit_due(self) -> None:
        now = self.sim.now
        parts = []
        while self._arrivals and self._arrivals[0][0] <= now * (1 + 1e-15) + 1e-18:
            _, _, gid, part = heapq.heappop(self._arrivals)
            parts.append((gid, part))
        if not parts:
            return
        self._flat = np.concatenate([self._flat] + [p.flat for _, p in parts])
        self._weights = np.concatenate([self._weights] + [p.weights for _, p in parts])
        self._lengths = np.concatenate([self._lengths] + [p.lengths for _, p in parts])
        self._remaining = np.concatenate([self._remaining] + [p.nbytes for _, p in parts])
        self._group = np.concatenate([self._group] + [np.full(len(p.lengths), gid) for gid, p in parts])
        self._flow = np.concatenate([self._flow] + [p.flow for _, p in parts])

    def _recompute(self) -> None:
        self.recomputations += 1
        n = len(self._lengths)
        self.peak_active_subflows = max(self.peak_active_subflows, n)
        if n == 0:
            self._rate = np.zeros(0)
            self._matrix = None
            self._used = np.zeros(self._num_links, dtype=bool)
            return
        self._matrix = flow_matrix(self._lengths, self._flat, self._num_links, self._weights)
        self._used = np.diff(self._matrix.indptr) > 0
        self._rate = max_min_fair(self._matrix, self._capacity)

    def _schedule(self) -> None:
        self._generation += 1
        candidates = []
        if len(self._lengths):
            with np.errstate(divide="ignore"):
                candidates.append(float((self._remaining / self._rate).min()))
        if self._arrivals:
            candidates.append(self._arrivals[0][0] - self.sim.now)
        if not candidates:
            return
        generation = self._generation
        self.sim.timeout(max(min(candidates), 0.0)).callbacks.append(lambda _e: self._on_timer(generation))


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
    return _Routed(routed.flat, np.add.reduceat(routed.lengths, run_start), nbytes, owner[run_start],
                   np.maximum.reduceat(routed.latency, run_start), np.repeat(share, routed.lengths))


def make_network(model: str, sim: Simulation, topology: Topology, ecmp: str = "even") -> Network:
    if model == "flow":
        return FlowNetwork(sim, topology, ecmp)
    if model == "analytical":
        return AnalyticalNetwork(sim, topology, ecmp)
    raise ValueError(f"unknown network_model {model!r}; allowed: flow, analytical")
