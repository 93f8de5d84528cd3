"""The network interface: how bytes move between endpoints of a Topology, whatever the backend.

Every backend (sim/network/analytical.py, sim/network/flow.py; `make_network` in
sim/network/backends.py picks one by name) offers:
- `transfer(src, dst, nbytes)` -> a SimPy process that ends when the bytes are delivered;
- `transfer_many([(src, dst, nbytes), ...], key=...)` -> one SimPy event that fires when all are
  delivered (a bulk path: no Python process or object per flow, so a step of a 1,024-GPU
  all-to-all with a million flows stays cheap). `key`: the `StepKey` (sim/engine/replay.py) of a
  step repeated with exactly these flows: its routes are set up once and, on the flow backend, it
  may be replayed (sim/network/replay.py, exact);
- `link_table()` -> per-link bytes carried, busy time and utilisation; `estimate_time_s` -> the
  uncontended time of one transfer (for planners).

What they share lives here: routing flows into sub-flows (`Routed`: one row per equal-cost path, or
one hashed path with ECMP `hash`) with caches of routes per endpoint pair and per endpoint set,
per-link accounting (`link_bytes`, `link_busy_s`), the counters (`bytes_sent`, `bytes_delivered`,
`flows_started`), traffic observers, and the spans of completed transfers (`TransferGroup`).
A backend implements `_start(group, routed, key)`: when the group's flows finish; it may offer a
plain-Python path for calls of one flow (`_transfer_one`, completed by `_complete_one`) with exactly
the general path's effects (the analytical backend does: a batch or a storage read per call).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
import simpy

from hardware_models.topology import Topology
from sim.engine.replay import StepKey
from sim.engine.simulation import Simulation

if TYPE_CHECKING:  # pandas: `link_table` only (a run's report takes `link_columns`)
    import pandas as pd

Flow = tuple[str, str, float]

_BATCH_KINDS_MIN = 64  # flows of a transfer whose trace tracks are looked up in one batch routing
_SPANS_PER_FLOW_MAX = 1024  # bulk transfers larger than this record one span per source, not per flow
PAIR_ROUTES_MAX_FLOWS = 65536  # routes of larger transfers are not kept for reuse by endpoints
_PAIR_ROUTES_MAX_SETS = 4096  # endpoint sets whose routes are kept
ROUTES_MAX_PAIRS = 1 << 20  # endpoint pairs whose paths (and trace track) are kept (~150 MB at
# most; a 400-worker ingestion run sends between ~390K pairs: fewer would evict and route again)


@dataclass
class Routed:
    """A batch of flows expanded into sub-flows (one per ECMP path) as flat arrays."""

    flat: np.ndarray  # link ids of all sub-flows, concatenated
    lengths: np.ndarray  # links per sub-flow
    nbytes: np.ndarray  # bytes per sub-flow
    flow: np.ndarray  # index of the owning flow in the batch, per sub-flow
    latency: np.ndarray  # path latency per sub-flow
    weights: np.ndarray | None = None  # per link entry: fraction of the flow on it (None: all 1)


@dataclass
class TransferGroup:
    """One transfer call: its flows, completion event and bookkeeping for spans."""

    event: simpy.Event | None  # fires when every flow is delivered (None: nothing waits for it)
    srcs: list[str]
    dsts: list[str]
    nbytes: np.ndarray
    name: str
    track: str | None
    start_s: float
    open_subflows: int
    finish_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    on_flow_done: Callable[[np.ndarray], None] | None = None  # called with the indices of flows done at an instant
    key: StepKey | None = None  # the step's key, if it is one
    cause: int = -1  # the span that released the call (sim/engine/simulation.py, "Causes")


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
        # objects with on_links(t0, t1, links, link_bytes) (bytes moved on those links, sparse) /
        # on_subflows(t0, t1, flat, lengths, nbytes) that see every byte moved, and when (optionally
        # on_subflow(t0, t1, links, nbytes) for one sub-flow); optionally
        # on_flows(srcs, dsts, start_s, finish_s, key) that sees each transfer's endpoints (and step
        # key) when it completes (or on_flows_until(srcs, dsts, start_s, end_s, key), given only its
        # last flow's end, where the network has it without the flows'; on_steps_until([(srcs, dsts,
        # start_s, end_s, key), ...]) for a replayed schedule's steps in one call, if it has it), and
        # on_step(t0s, t1s, step, times, links, link_bytes) for runs of
        # replayed steps (else on_links per run, with times x link_bytes) (sim/engine/link_traffic.py:
        # traffic- and activity-driven power)
        self.traffic_observers: list = []
        self._route_cache: dict[tuple[str, str], tuple[tuple[tuple[int, ...], ...], tuple[float, ...]]] = {}
        # step key -> (srcs, dsts, bytes, total bytes, routed flows): repeated steps are set up once
        self._keyed: dict[StepKey, tuple[list[str], list[str], np.ndarray, float, Routed | None]] = {}
        self._track_cache: dict[tuple[str, str], str] = {}
        self._skeleton_where: dict = {}  # StepKey -> interned codes of its flows' skeletons (a full trace)
        self._estimate_terms: dict[tuple[str, str], tuple] = {}  # (src, dst) -> estimate_time_s terms
        # (srcs, dsts) -> routes of one byte per flow: the same endpoints with other sizes reuse them
        self._pair_routes: dict[tuple[tuple[str, ...], tuple[str, ...]], Routed] = {}

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

    def settle(self) -> None:
        """Apply deferred accounting up to the last update: link counters, and what traffic observers
        have been told (the flow backend reports a link's bytes when its rate changes). Call it
        before reading an observer's totals."""
        self._settle()

    def _settle(self) -> None:
        """Apply deferred accounting (the flow backend batches replayed steps and rate reports)."""

    # ---- routing -------------------------------------------------------------------------
    def paths_for(self, src: str, dst: str) -> list[tuple[int, ...]]:
        """The paths a flow from src to dst uses (all equal-cost paths, or one hashed path)."""
        paths = self.topology.routes(src, dst)
        if self.ecmp == "hash" and len(paths) > 1:
            return [paths[int(self.sim.rng("ecmp").integers(len(paths)))]]
        return paths

    def _route(self, flows: list[Flow]) -> Routed:
        """Expand flows into sub-flows (one per equal-cost path; one hashed path with ecmp=hash)."""
        srcs, dsts = [f[0] for f in flows], [f[1] for f in flows]
        nbytes = np.array([float(f[2]) for f in flows])
        batch = self.topology.route_batch(srcs, dsts) if len(flows) > 1 else None
        if batch is None:
            return self._route_pairs(flows)
        routed = Routed(batch.flat, batch.lengths, nbytes[batch.owner] * batch.share, batch.owner, batch.latency)
        if self.ecmp == "hash":
            counts = np.bincount(batch.owner, minlength=len(flows))
            if (counts > 1).any():
                first = np.cumsum(counts) - counts
                pick = self.sim.rng("ecmp").integers(0, counts)  # one path per flow
                keep = (np.arange(len(batch.owner)) - first[batch.owner]) == pick[batch.owner]
                routed = select_rows(routed, keep)
                routed.nbytes = nbytes[routed.flow]
        return routed

    def _route_sized(self, flows: list[Flow], srcs: list[str], dsts: list[str], nbytes: np.ndarray) -> Routed:
        """`_route`, reusing the routes of an earlier call with the same endpoints (exact: sub-flow
        bytes are the flow's bytes times its path share). Hashed ECMP draws per call: not reused."""
        if self.ecmp == "hash" or not 1 < len(flows) <= PAIR_ROUTES_MAX_FLOWS:
            return self._route(flows)  # single flows: _route_pairs caches per pair already
        key = (tuple(srcs), tuple(dsts))
        unit = self._pair_routes.get(key)
        if unit is None:
            unit = self._route([(s, d, 1.0) for s, d in zip(srcs, dsts)])
            if len(self._pair_routes) >= _PAIR_ROUTES_MAX_SETS:
                self._pair_routes.clear()  # bounded memory; a later call routes again
            self._pair_routes[key] = unit
        return Routed(unit.flat, unit.lengths, unit.nbytes * nbytes[unit.flow], unit.flow, unit.latency, unit.weights)

    def _route_pairs(self, flows: list[Flow]) -> Routed:
        flat: list[int] = []
        lengths: list[int] = []
        nbytes: list[float] = []
        owner: list[int] = []
        latency: list[float] = []
        for i, (s, d, b) in enumerate(flows):
            paths, lat = self._pair_paths(s, d)
            share = float(b) / len(paths)
            for p, l in zip(paths, lat):
                flat.extend(p)
                lengths.append(len(p))
                nbytes.append(share)
                owner.append(i)
                latency.append(l)
        return Routed(
            np.asarray(flat, dtype=np.int64),
            np.asarray(lengths, dtype=np.int64),
            np.asarray(nbytes, dtype=float),
            np.asarray(owner, dtype=np.int64),
            np.asarray(latency, dtype=float),
        )

    def _pair_paths(self, s: str, d: str, keep: bool = True) -> tuple[tuple[tuple[int, ...], ...], tuple[float, ...]]:
        """(paths, path latencies) of a flow from s to d (cached per pair unless ECMP hashes; `keep`
        False: not cached by this call, for a caller that keeps what it needs of them itself)."""
        key = (s, d)
        cached = self._route_cache.get(key)
        if cached is None or self.ecmp == "hash":
            topo = self.topology
            paths = tuple(p for p in self.paths_for(s, d))
            cached = (paths, tuple(topo.path_latency_s(p) for p in paths))
            if self.ecmp != "hash" and keep:
                if len(self._route_cache) >= ROUTES_MAX_PAIRS:
                    self._route_cache.clear()  # bounded memory; a later flow routes again
                self._route_cache[key] = cached
        return cached

    def estimate_time_s(self, src: str, dst: str, nbytes: float) -> float:
        """Uncontended time of one transfer (alpha-beta on the path), for planners and heuristics."""
        terms = self._estimate_terms.get((src, dst)) or self._estimate_terms_of(src, dst)
        pairs, n_paths = terms
        share = nbytes / n_paths
        return max((latency + share / capacity for latency, capacity in pairs), default=0.0)

    def estimate_step_s(self, flows: Iterable[tuple[str, str, float]]) -> float:
        """The largest `estimate_time_s` of the flows (0 for none): the same times, in one loop."""
        get, slowest = self._estimate_terms.get, 0.0
        for src, dst, nbytes in flows:
            pairs, n_paths = get((src, dst)) or self._estimate_terms_of(src, dst)
            share = nbytes / n_paths
            for latency, capacity in pairs:
                t = latency + share / capacity
                if t > slowest:
                    slowest = t
        return slowest

    def _estimate_terms_of(self, src: str, dst: str) -> tuple:
        """(distinct (latency, bottleneck capacity) of the paths, their number) from src to dst, kept."""
        paths = self.topology.routes(src, dst)
        if not paths or paths == [()]:
            terms: tuple = ((), 1)
        else:
            terms = (
                tuple({(self.topology.path_latency_s(p), float(self.topology.capacity[list(p)].min())) for p in paths}),
                len(paths),
            )
        self._estimate_terms[(src, dst)] = terms
        return terms

    # ---- transfers -----------------------------------------------------------------------
    def transfer(
        self, src: str, dst: str, nbytes: float, name: str = "transfer", track: str | None = None
    ) -> simpy.Process:
        """Move `nbytes` from `src` to `dst`; returns a SimPy process that ends on delivery."""
        event = self.transfer_many([(src, dst, nbytes)], name=name, track=track)

        def wait() -> Generator[simpy.Event, object, None]:
            yield event

        return self.sim.process(wait())

    def transfer_many(
        self,
        flows: Iterable[Flow],
        name: str = "transfer",
        track: str | None = None,
        key: StepKey | None = None,
        on_flow_done: Callable[[np.ndarray], None] | None = None,
    ) -> simpy.Event:
        """Start all `(src, dst, nbytes)` flows now; returns an event that fires when all are done.

        `key`: the `StepKey` of a step repeated with exactly these flows (a collective's step): its
        routes are computed once and, on the flow backend, it may be replayed (sim/network/replay.py
        - exact). `on_flow_done(indices)`: called at each instant at which
        flows of this call complete, with their indices in `flows` (one call for many flows that
        need not wait for each other, instead of one call per flow)."""
        if key is None and on_flow_done is None and type(flows) is list and len(flows) == 1 and self.ecmp != "hash":
            src, dst, size = flows[0]  # one flow (a batch, a read): the backend's plain-Python path, if any
            event = self._transfer_one(src, dst, size, name, track)
            if event is not None:
                return event
        step = key if self.ecmp != "hash" else None  # hashed ECMP draws paths per call
        setup = self._keyed.get(step) if step is not None else None
        if setup is not None:
            srcs, dsts, nbytes, total, routed = setup
        else:
            flows = list(flows)
            srcs, dsts = [f[0] for f in flows], [f[1] for f in flows]
            nbytes = np.array([float(f[2]) for f in flows]) if flows else np.zeros(0)
            total = float(nbytes.sum())
            routed = self._route_sized(flows, srcs, dsts, nbytes) if flows else None
            if step is not None:
                self._keyed[step] = (srcs, dsts, nbytes, total, routed)
        event = self.sim.env.event()
        self.flows_started += len(srcs)
        self.bytes_sent += total
        group = TransferGroup(
            event,
            srcs,
            dsts,
            nbytes,
            name,
            track,
            self.sim.now,
            0,
            np.full(len(srcs), float(self.sim.now)),
            on_flow_done,
            step,
            self.sim.cause,
        )  # float: now is int 0 at start
        if routed is None:  # no flows
            event.succeed()
            return event
        self._start(group, routed, step)
        return event

    def run_steps(self, steps: Sequence[Sequence[Flow]], name: str = "collective") -> simpy.Event:
        """Run `steps` one after another (a collective's schedule: each step's flows start when the
        previous step's are all delivered); returns an event that fires when the last is done. A step
        with a `key` attribute (a `Step`, sim/network/collectives.py) runs under it; empty steps are
        skipped."""
        return self.sim.process(self._steps_from(steps, 0, name))

    def _steps_from(self, steps: Sequence[Sequence[Flow]], first: int, name: str) -> Generator:
        """Run steps[first:] one after another (a process body: `run_steps`, or the rest of a
        schedule whose replay another transfer interrupted)."""
        for k in range(first, len(steps)):
            step = steps[k]
            if step:
                yield self.transfer_many(step, name=f"{name}[{k}]", key=getattr(step, "key", None))

    def _transfer_one(self, src: str, dst: str, nbytes: float, name: str, track: str | None) -> simpy.Event | None:
        """A backend's fast path for a call of one flow (no key, no `on_flow_done`, routes not
        hashed): the event `transfer_many` returns, with exactly the same effects, or None (no
        fast path for it: the general one runs)."""
        return None

    def _complete_one(
        self,
        event: simpy.Event,
        src: str,
        dst: str,
        nbytes: float,
        name: str,
        track: str | None,
        start_s: float,
        finish_s: float,
        cause: int,
    ) -> None:
        """`_complete` of a one-flow call (`_transfer_one`), in plain Python: the same counters,
        span (or skeleton), observer calls and completion."""
        self.bytes_delivered += nbytes
        recorder = self.sim.recorder
        kind = track or self.first_link_kind(src, dst)
        if recorder.limit is not None and len(recorder.rows) >= recorder.limit:  # as `_record`: a skeleton
            first = recorder.next_id
            recorder.dropped += 1
            recorder.next_id += 1
            recorder.skeleton_one(src, kind, "comm", start_s, finish_s, first, cause)
            self.sim.env.cause = first
        else:
            recorder.spans_one(src, kind, f"{name} ->{dst}", start_s, finish_s, nbytes, "comm", cause)
        finish = None
        for observer in self.traffic_observers:
            until = getattr(observer, "on_flows_until", None)
            if until is not None:  # the last end is the flow's
                until([src], [dst], start_s, finish_s, None)
            elif hasattr(observer, "on_flows"):
                if finish is None:
                    finish = np.array([finish_s])
                observer.on_flows([src], [dst], start_s, finish, None)
        self.sim.env.succeed_last(event)

    def _start(self, group: TransferGroup, routed: Routed, key: StepKey | None) -> None:
        """Send the group's flows (routed); complete the group (`_complete`) when they are delivered."""
        raise NotImplementedError

    def _complete(self, group: TransferGroup) -> None:
        self.bytes_delivered += float(group.nbytes.sum())
        self._record(group)
        for observer in self.traffic_observers:
            if hasattr(observer, "on_flows"):  # optional part of the observer interface
                observer.on_flows(group.srcs, group.dsts, group.start_s, group.finish_s, group.key)
        if group.event is not None:
            group.event.succeed()

    def _record(self, group: TransferGroup) -> None:
        track = group.track
        recorder = self.sim.recorder
        if recorder.limit is not None and len(recorder.rows) >= recorder.limit:
            # trace full: the flows leave skeletons (sim/engine/span_skeleton.py), not seen by observers
            n, first = len(group.srcs), recorder.next_id
            recorder.dropped += n
            recorder.next_id += n
            where = self._skeleton_codes_of(group.key, group.srcs, group.dsts, track)
            ends = group.finish_s  # one per flow; kept as it is by the skeleton
            recorder.skeleton_codes(where, group.start_s, ends, first, group.cause)
            if n:
                self.sim.env.cause = first + int(ends.argmax())
            return
        if len(group.srcs) <= _SPANS_PER_FLOW_MAX:  # a span per flow, recorded in bulk
            tracks = track or self.first_link_kinds(group.srcs, group.dsts)
            recorder.spans(
                group.srcs,
                tracks,
                [f"{group.name} ->{d}" for d in group.dsts],
                group.start_s,
                group.finish_s,
                group.nbytes,
                category="comm",
                after=group.cause,
            )
            return
        per_src: dict[str, float] = {}
        for s, b in zip(group.srcs, group.nbytes):
            per_src[s] = per_src.get(s, 0.0) + float(b)
        end = float(group.finish_s.max())
        for s, b in per_src.items():
            self.sim.span(
                s,
                track or "nic",
                f"{group.name} ({len(group.srcs)} flows)",
                group.start_s,
                end,
                nbytes=b,
                category="comm",
                after=group.cause,
            )

    def _skeleton_codes_of(
        self, key: StepKey | None, srcs: list[str], dsts: list[str], track: str | None
    ) -> np.ndarray:
        """The interned (component, track, category) codes of a transfer's flow skeletons, n x 3:
        interned once per step (a replayed step has the same flows)."""
        where = self._skeleton_where.get(key) if key is not None else None
        if where is None:
            kinds = [track] * len(srcs) if track else self.first_link_kinds(srcs, dsts)
            where = self.sim.recorder.skeleton_where(srcs, kinds, "comm")
            if key is not None:
                self._skeleton_where[key] = where
        return where

    def first_link_kind(self, src: str, dst: str) -> str:
        """Trace track of a flow: the kind of its first link (scale_up, nic, host, memory)."""
        kind = self._track_cache.get((src, dst))
        if kind is None:
            routed = self._route_cache.get((src, dst)) if self.ecmp != "hash" else None
            paths = routed[0] if routed is not None else self.topology.routes(src, dst)  # (no ECMP hash: the same)
            kind = self.topology.link_kind[paths[0][0]] if paths and paths[0] else "local"
            if len(self._track_cache) >= ROUTES_MAX_PAIRS:
                self._track_cache.clear()  # bounded memory
            self._track_cache[(src, dst)] = kind
        return kind

    def first_link_kinds(self, srcs: list[str], dsts: list[str]) -> list[str]:
        """`first_link_kind` of each flow; the pairs not seen yet, where there are many, routed at
        once (`Topology.route_batch`: the same paths, in the same order, as `routes`)."""
        cache = self._track_cache
        pairs = list(zip(srcs, dsts))
        known = list(map(cache.get, pairs))
        if None not in known:  # every pair seen before (kinds are non-empty strings)
            return cast(list[str], known)
        missing = [i for i, kind in enumerate(known) if kind is None]
        if len(missing) >= _BATCH_KINDS_MIN:
            new_srcs, new_dsts = [srcs[i] for i in missing], [dsts[i] for i in missing]
            batch = self.topology.route_batch(new_srcs, new_dsts)
            if batch is not None:
                _, first = np.unique(batch.owner, return_index=True)  # each flow's first path
                at = (np.cumsum(batch.lengths) - batch.lengths)[first]
                link_kind, flat = self.topology.link_kind, batch.flat
                kinds = [
                    link_kind[flat[a]] if n else "local" for a, n in zip(at.tolist(), batch.lengths[first].tolist())
                ]
                if len(cache) + len(kinds) > ROUTES_MAX_PAIRS:
                    cache.clear()  # bounded memory
                cache.update(zip(zip(new_srcs, new_dsts), kinds))
                for i, kind in zip(missing, kinds):
                    known[i] = kind
        return [kind or self.first_link_kind(*pair) for kind, pair in zip(known, pairs)]

    def link_columns(self, elapsed_s: float | None = None) -> dict[str, np.ndarray]:
        """Per link: name, kind, capacity, bytes carried, busy time and utilisation (bytes /
        (capacity x elapsed), default elapsed: now), as columns."""
        topo = self.topology
        elapsed = elapsed_s if elapsed_s is not None else self.sim.now
        capacity = np.asarray(topo.capacity, dtype=float)
        nbytes = np.asarray(self.link_bytes, dtype=float)
        return {
            "link": np.array([topo.link_name(i) for i in range(topo.num_links)], dtype=object),
            "kind": np.array(topo.link_kind, dtype=object),
            "capacity_bytes_per_s": capacity,
            "bytes": nbytes,
            "busy_s": np.asarray(self.link_busy_s, dtype=float),
            "utilisation": nbytes / (capacity * elapsed) if elapsed > 0 else np.zeros(len(nbytes)),
        }

    def link_table(self, elapsed_s: float | None = None) -> pd.DataFrame:
        """`link_columns` as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.link_columns(elapsed_s))


def select_rows(routed: Routed, mask: np.ndarray) -> Routed:
    entries = np.repeat(mask, routed.lengths)
    return Routed(
        routed.flat[entries],
        routed.lengths[mask],
        routed.nbytes[mask],
        routed.flow[mask],
        routed.latency[mask],
        None if routed.weights is None else routed.weights[entries],
    )
