"""The flow network backend (scenario `network_model: flow`, the default): max-min fair flows.

Every transfer is a flow routed over the topology's directed links. Flow rates are max-min fair
over all active flows on all links (exact progressive filling, sim/network/max_min.py), recomputed
whenever flows start or finish; flows that start or finish at the same instant are handled by one
recomputation, which refills only the flows whose rate can change (sim/network/flow_table.py). A
flow first waits the latency of its path (per-hop and NIC latencies), then sends. ECMP `even`
splits a flow evenly over the equal-cost paths (one row whose entries are the fraction of the flow
on each link, `_merge_paths`; fat-tree spines are aggregated for this, which is exact); `hash`
picks one path per flow from a seeded substream, as switches do.

The core loop, at each instant something changes: advance (account bytes moved since the last
change), finish the flows that are done, admit the flows whose latency has passed, recompute the
rates, schedule the next change. A step given a `StepKey` whose links no other flow uses (max-min
rates are fair per connected set of flows and links: it runs as on an idle network, whatever runs
elsewhere) is recorded and, when it runs again with its links to itself, replayed
(sim/network/replay.py: exact); a transfer that joins a replayed step's links puts it back first.
A collective's schedule (`run_steps`) whose steps have all been recorded runs as one replay of
its steps back to back while its links are its own; a transfer that joins them completes the steps
done by then, puts the current one back and lets the rest run step by step.

Replays are accounted later, in bulk: each step's key gathers its runs (`_defer`) until something
reads its links' totals (a recording on them, the end of the run) or it has gathered
`_DEFERRED_RUNS_MAX`. A schedule replayed as one past the trace limit, once every step's key is
deferred, keeps each completion as one entry (`_KeptRuns`) rather than a run per key, and hands the
runs to a key, in the order deferring each would have made them, only when something reads it.
"""

from __future__ import annotations

import heapq
import operator
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from math import ulp

import numpy as np
import simpy

from hardware_models.topology import Topology
from sim.engine.codes import distinct
from sim.engine.replay import StepKey
from sim.engine.simulation import Simulation
from sim.network.base import PAIR_ROUTES_MAX_FLOWS, Flow, Network, Routed, TransferGroup, select_rows
from sim.network.flow_table import FlowTable
from sim.network.max_min import DONE_BYTES as _DONE_BYTES
from sim.network.replay import Trajectory

_ROWS_MAX_KEYS = 1 << 18  # endpoint sets (or single pairs) whose rows are kept
_DEFERRED_RUNS_MAX = 1024  # a step's replays accounted at once (bounded memory)
_COMPILED_ALONE_LINKS = 32  # `_alone` asks about this many links or more compiled (sim/network/links_kernel.py)


class FlowNetwork(Network):
    """Max-min fair flows, recomputed on every start/finish (batched per instant). The active flows
    live in a `FlowTable` (sim/network/flow_table.py), which refills only the flows whose rate can change."""

    def __init__(self, sim: Simulation, topology: Topology, ecmp: str = "even") -> None:
        super().__init__(sim, topology, ecmp)
        self._capacity = topology.capacity
        self._num_links = topology.num_links
        self._table = FlowTable(topology.capacity, shared=np.asarray(topology.link_kind) == "fabric")
        self._groups: dict[int, TransferGroup] = {}
        self._arrivals: list[tuple[float, int, int, Routed]] = []  # (time, seq, group id, rows)
        self._last_s = 0.0
        # traffic observers hear of a link's bytes when its rate changes (and when the network settles):
        # the rate each link has had since `_reported_since`, not yet reported
        self._reported_rate = np.zeros(self._num_links)
        self._reported_since = np.zeros(self._num_links)
        self._generation = 0
        self._seq = 0
        self._kick_scheduled = False
        self.recomputations = 0
        self.peak_active_subflows = 0
        self.replayed_steps = 0
        self.replayed_schedules = 0  # schedules replayed as one (`run_steps`), materialised or not
        self.replay = True  # replay repeated steps (exact; off for checks)
        self.schedule_replay = True  # replay a recorded schedule as one (`run_steps`; exact; off for checks)
        self.keep_schedule_runs = True  # a replayed schedule keeps its steps' runs as one (`_arm`; exact; off: checks)
        self._rows: dict[tuple, Routed] = {}  # (srcs, dsts) -> one row per flow, one byte each
        self._real_rows: dict[StepKey, Routed] = {}  # step key -> its rows that carry bytes
        self._trajectories: dict[StepKey, Trajectory] = {}  # step key -> recorded trajectory
        self._recordings: dict[int, Trajectory] = {}  # group id -> the trajectory it is recording
        self._replays: dict[int, tuple[TransferGroup, Trajectory, object]] = {}  # gid -> (group, trajectory, token)
        # key -> [trajectory, runs, deferral number, kept, index]: its replays not yet accounted, [t0, t1,
        # count] per back-to-back run, then those a schedule plan kept for it as its `index`-th step
        # (`kept`: a `_KeptRuns`, or None; see `_complete_skeleton_steps`)
        self._deferred: dict[StepKey, list] = {}
        self._deferrals = _DeferralIndex(self._num_links)  # which deferred keys used which links
        # links a replayed or recorded step has to itself: its group id (-1: none); links pending
        # arrivals will enter (count of their entries)
        self._claimant = np.full(self._num_links, -1, dtype=np.int64)
        self._unwritten: dict[int, np.ndarray] = {}  # replays whose claims are not in `_claimant` yet
        self._step_links: dict[StepKey, np.ndarray] = {}  # step key -> the distinct links of its rows
        self._plans: dict[int, tuple[object, _SchedulePlan]] = {}  # id(steps) -> (steps, plan) (`run_steps`)
        self._schedules: dict[int, _ScheduleRun] = {}  # id -> a schedule replayed as one (`run_steps`)
        self._arriving = np.zeros(self._num_links, dtype=np.int64)
        self._step_observer_calls: tuple[tuple, tuple[list, list, list]] | None = None  # `_step_observers`
        self._any_in_use: Callable[..., bool] | None = None  # sim/network/links_kernel.py, once `_alone` uses it

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
    def _route_sized(self, flows: list[Flow], srcs: list[str], dsts: list[str], nbytes: np.ndarray) -> Routed:
        """One row per flow: its ECMP paths merged (`_merge_paths`), entries the fraction of the
        flow on each link. Rows of the same endpoints are reused (hashed ECMP draws per call)."""
        if self.ecmp == "hash" or len(flows) > PAIR_ROUTES_MAX_FLOWS:
            unit = self._unit_rows(srcs, dsts)
        else:
            key = (srcs[0], dsts[0]) if len(flows) == 1 else (tuple(srcs), tuple(dsts))
            cached = self._rows.get(key)
            if cached is None:
                cached = self._row(srcs[0], dsts[0]) if len(flows) == 1 else self._unit_rows(srcs, dsts)
                if len(self._rows) >= _ROWS_MAX_KEYS:
                    self._rows.clear()  # bounded memory; a later call routes again
                self._rows[key] = cached
            unit = cached
        return Routed(unit.flat, unit.lengths, nbytes[unit.flow], unit.flow, unit.latency, unit.weights)

    def _unit_rows(self, srcs: list, dsts: list) -> Routed:
        """One row per flow of one byte (`_merge_paths` of its ECMP paths)."""
        batch = self.topology.route_batch(srcs, dsts) if len(srcs) > 1 and self.ecmp != "hash" else None
        if batch is None:
            return _merge_paths(self._route([(s, d, 1.0) for s, d in zip(srcs, dsts)]))
        return _merge_paths(
            Routed(batch.flat, batch.lengths, np.asarray(batch.share, dtype=float), batch.owner, batch.latency)
        )

    def _row(self, src: str, dst: str) -> Routed:
        """The row of one flow of one byte from src to dst (`_merge_paths` of its ECMP paths)."""
        paths = self.topology.routes(src, dst)
        entries: dict[int, float] = {}
        for path in paths:
            for link in path:
                entries[link] = entries.get(link, 0.0) + 1.0 / len(paths)
        latency = max(self.topology.path_latency_s(p) for p in paths)
        return Routed(
            np.fromiter(entries, dtype=np.int64, count=len(entries)),
            np.array([len(entries)]),
            np.ones(1),
            np.zeros(1, dtype=np.int64),
            np.array([latency]),
            np.fromiter(entries.values(), dtype=float, count=len(entries)),
        )

    def _start(self, group: TransferGroup, routed: Routed, key: StepKey | None) -> None:
        gid = self.sim.next_id("flow-group")
        self._groups[gid] = group
        rows = self._real_rows.get(key) if key is not None else None
        if rows is None:
            # rows that cross no link (src == dst) or carry no bytes finish after their latency
            if len(routed.lengths) == 1:
                real = routed.lengths[0] > 0 and routed.nbytes[0] > 0
                rows = routed if real else select_rows(routed, np.zeros(1, dtype=bool))
            else:
                real = (routed.lengths > 0) & (routed.nbytes > 0)
                rows = routed if real.all() else select_rows(routed, real)
            if key is not None:
                self._real_rows[key] = rows
        group.open_subflows = len(rows.lengths)
        links = rows.flat
        if (self._replays or self._recordings or self._schedules) and len(links) and self._claims()[links].max() >= 0:
            self._disturb(links)  # replayed steps there re-enter, recordings there no longer run alone
        if group.open_subflows == 0:
            delay = float(routed.latency.max()) if len(routed.latency) else 0.0
            group.finish_s = np.full(len(group.srcs), self.sim.now + delay)
            self.sim.timeout(delay).callbacks.append(lambda _e: self._finish_group(gid, notify=True))
            return
        if group.on_flow_done is not None and group.open_subflows < len(group.srcs):
            idle = np.setdiff1d(np.arange(len(group.srcs)), rows.flow)  # done at their start
            self.sim.timeout(0).callbacks.append(lambda _e: group.on_flow_done(idle))
        own = self._own_links(key, links) if key is not None and self.replay and group.on_flow_done is None else None
        if key is not None and own is not None and self._alone(own):
            trajectory = self._trajectories.get(key)
            if trajectory is not None:
                self._start_replay(gid, group, trajectory, own)
                return
            if self._deferred:
                self._settle_on(own)  # link totals as of now: deferred replays ran on these links
            self._recordings[gid] = Trajectory(
                key,
                gid,
                self.sim.now,
                rows.nbytes,
                rows.latency,
                rows,
                own,
                self._link_bytes[own],
                self._link_busy_s[own],
            )
            self._claimant[own] = gid
        self._enqueue(gid, rows, self.sim.now)
        if not self._kick_scheduled:  # one update per instant, however many transfers start
            self._kick_scheduled = True
            self.sim.timeout(0).callbacks.append(self._on_kick)

    def _enqueue(self, gid: int, rows: Routed, start_s: float) -> None:
        """Rows enter the network after their path latency (one arrival per distinct latency)."""
        latency = rows.latency
        parts = (
            [(latency[0], rows)]
            if len(latency) == 1 or (latency == latency[0]).all()
            else [(lat, select_rows(rows, latency == lat)) for lat in distinct(latency)]
        )
        for lat, part in parts:
            self._seq += 1
            heapq.heappush(self._arrivals, (start_s + float(lat), self._seq, gid, part))
            np.add.at(self._arriving, part.flat, 1)

    def _on_kick(self, _event) -> None:
        self._kick_scheduled = False
        self._update()

    def _on_timer(self, generation: int) -> None:
        if generation == self._generation:
            self._update()

    # ---- the core loop: advance, finish, admit, recompute, schedule -----------------------
    def _update(self) -> None:
        self._advance()
        done = self._table.done(self.sim.now)
        if self._recordings:
            self._snapshot(done)
        self._finish_done(done)
        self._admit_due()
        self._recompute()
        self._schedule()

    def _snapshot(self, done: np.ndarray) -> None:
        """Breakpoints of the recorded steps: the state of each one whose flows finish or arrive now
        (running alone, its rates change only then)."""
        table, now = self._table, self.sim.now
        due = now * (1 + 1e-15) + 1e-18  # as `_admit_due`
        changing = set(table.group[done].tolist()) | {gid for t, _, gid, _ in self._arrivals if t <= due}
        slots = None
        for rec in self._recordings.values():
            if rec.valid and rec.gid in changing:
                if slots is None:
                    slots = table.slots()
                    groups = table.group[slots]
                mine = slots[groups == rec.gid]
                own = rec.links
                rec.snapshot(
                    now, table.flow[mine], table.left_at(mine, now), self._link_bytes[own], self._link_busy_s[own]
                )

    def flush(self) -> None:
        """Account the bytes moved since the last rate change up to now (e.g. when a run ends mid-flow)."""
        self._advance()
        self._settle()

    def _settle(self) -> None:
        """Deferred accounting: replayed steps, and the traffic observers' bytes up to the last update."""
        self._report_rates(self._last_s, everything=True)
        self._settle_replays()

    def _report_rates(self, now: float, everything: bool = False) -> None:
        """Tell the traffic observers what links whose rate changed (`everything`: every link) have
        moved since their rate was last reported: one interval per link at its constant rate (the
        same bytes as one interval per update, summed in another order), so an update costs the
        links whose rate changed, a few hundred of the thousands that carry flows. The intervals
        go by start (stable: in link order among equal starts): they start at one of a few earlier
        updates, so an observer that bins intervals of equal timing together (`LinkTraffic`) finds
        them in a few runs; each link appears once per call, and among intervals of one timing the
        order is the links', so what each link, row or bin sums comes in the same order."""
        if not self.traffic_observers:
            return
        rate, reported = self._table.link_rate, self._reported_rate
        if self._table.compiled:  # the same intervals, one pass (sim/network/region_kernel.py)
            from sim.network.region_kernel import report_rates

            moving, t0, nbytes = report_rates(rate, reported, self._reported_since, float(now), everything)
            if len(moving):
                t1, ones = np.full(len(moving), now), np.ones(len(moving), dtype=np.int64)
                for observer in self.traffic_observers:
                    observer.on_subflows(t0, t1, moving, ones, nbytes)
            return
        links = np.flatnonzero(reported != 0) if everything else np.flatnonzero(reported != rate)
        if not len(links):
            return
        moving = links[reported[links] != 0]
        if len(moving):
            t0 = self._reported_since[moving]
            span = now - t0
            if everything:
                moving, t0, span = moving[span > 0], t0[span > 0], span[span > 0]
            if len(moving):
                by_time = np.argsort(t0, kind="stable")
                moving, t0, span = moving[by_time], t0[by_time], span[by_time]
                t1 = np.full(len(moving), now)
                nbytes = reported[moving] * span
                ones = np.ones(len(moving), dtype=np.int64)
                for observer in self.traffic_observers:
                    observer.on_subflows(t0, t1, moving, ones, nbytes)
        self._reported_since[links] = now
        if not everything:
            reported[links] = rate[links]

    def _advance(self) -> None:
        now = self.sim.now
        dt = now - self._last_s
        self._last_s = now
        if dt <= 0 or not self._table.n_alive:
            return
        # only the links that move (a few thousand of a 16K-GPU Clos's 100K at a time: the same sums,
        # the others would add 0); traffic observers hear of it when rates change (`_report_rates`)
        table = self._table
        rate = table.link_rate
        if table.compiled:  # one pass over the listed links (sim/network/links_kernel.py: the same sums)
            from sim.network.links_kernel import advance

            table.n_listed = advance(
                rate, table.link_entries, self._link_bytes, self._link_busy_s, float(dt),
                table.listed_links, table.n_listed, table.listed,
            )  # fmt: skip
            return
        np.add(self._link_bytes, rate * dt, out=self._link_bytes, where=rate != 0)
        np.add(self._link_busy_s, dt, out=self._link_busy_s, where=table.used_links())

    def _finish_done(self, slots: np.ndarray) -> None:
        """Remove the flows that are done (`FlowTable.done`) and complete their groups."""
        table, now = self._table, self.sim.now
        if not len(slots):
            return
        group_of = table.group[slots]
        order = np.argsort(group_of, kind="stable")
        done_groups, done_flows = group_of[order], table.flow[slots][order]
        table.remove(slots)
        starts = np.flatnonzero(done_groups[1:] != done_groups[:-1]) + 1
        bounds = [0, *starts.tolist(), len(done_groups)]  # each group's run of done flows
        complete, groups = [], self._groups
        for gid, a, b in zip(done_groups[bounds[:-1]].tolist(), bounds, bounds[1:]):
            group = groups[gid]
            flows = done_flows[a:b]
            group.finish_s[flows] = now
            group.open_subflows -= b - a
            if group.on_flow_done is not None:
                group.on_flow_done(flows)
            if group.open_subflows == 0:
                complete.append(gid)
        for gid in complete:
            self._finish_group(gid)

    def _finish_group(self, gid: int, notify: bool = False) -> None:
        group = self._groups.pop(gid)
        if notify and group.on_flow_done is not None:
            group.on_flow_done(np.arange(len(group.srcs)))
        rec = self._recordings.pop(gid, None)
        if rec is not None:
            if rec.valid:
                self._claimant[rec.links] = -1
                if len(rec.offsets) >= 2:
                    rec.finish(self.sim.now, group.finish_s)
                    self._trajectories[rec.key] = rec
        self._complete(group)

    def _admit_due(self) -> None:
        now = self.sim.now
        parts = []
        while self._arrivals and self._arrivals[0][0] <= now * (1 + 1e-15) + 1e-18:
            _, _, gid, part = heapq.heappop(self._arrivals)
            np.subtract.at(self._arriving, part.flat, 1)
            parts.append((gid, part))
        if not parts:
            return
        if len(parts) == 1:
            gid, p = parts[0]
            self._table.add(p.flat, _weights(p), p.lengths, p.nbytes, np.full(len(p.lengths), gid), p.flow, now)
            return
        cat = np.concatenate
        self._table.add(
            cat([p.flat for _, p in parts]),
            cat([_weights(p) for _, p in parts]),
            cat([p.lengths for _, p in parts]),
            cat([p.nbytes for _, p in parts]),
            np.repeat([gid for gid, _ in parts], [len(p.lengths) for _, p in parts]),
            cat([p.flow for _, p in parts]),
            now,
        )

    def _recompute(self) -> None:
        self.recomputations += 1
        self.peak_active_subflows = max(self.peak_active_subflows, self._table.n_alive)
        if self._table.recompute(self.sim.now):  # else no link's rate changed: nothing to report
            self._report_rates(self.sim.now)

    def _schedule(self) -> None:
        self._generation += 1
        now = self.sim.now
        delay = min(self._table.next_finish(), self._arrivals[0][0] if self._arrivals else np.inf) - now
        if delay == np.inf:
            return
        generation = self._generation
        self.sim.timeout(max(delay, 0.0)).callbacks.append(lambda _e: self._on_timer(generation))

    # ---- replay of recorded steps (sim/network/replay.py) ----------------------------------
    def _own_links(self, key: StepKey, links: np.ndarray) -> np.ndarray:
        """The distinct links of a keyed step's rows (once per key)."""
        own = self._step_links.get(key)
        if own is None:
            own = self._step_links[key] = distinct(links)
        return own

    def _claims(self) -> np.ndarray:
        """Per link the replayed or recorded step that has it (-1: none). A replay's claims are
        written when first asked for: back-to-back replays of a ring's steps, which nothing else
        asks about, never write their (thousands of) links."""
        for gid, links in self._unwritten.items():
            self._claimant[links] = gid
        self._unwritten.clear()
        return self._claimant

    def _unclaim(self, gid: int, links: np.ndarray) -> None:
        if self._unwritten.pop(gid, None) is None:
            self._claimant[links] = -1

    def _alone(self, links: np.ndarray) -> bool:
        """Whether flows on `links` would have them to themselves: no live flow, pending arrival,
        replayed or recorded step uses any of them (max-min rates are fair per connected set of
        flows and links, so such a step runs as on an idle network until something joins it)."""
        if not (self._table.n_alive or self._arrivals or self._replays or self._recordings or self._schedules):
            return True  # an idle network
        if not len(links):
            return True
        if len(links) >= _COMPILED_ALONE_LINKS and self._table.compiled:  # numba loaded by the table already
            if self._any_in_use is None:
                from sim.network.links_kernel import any_in_use

                self._any_in_use = any_in_use
            return not self._any_in_use(links, self._table.link_entries, self._arriving, self._claims())
        return not (  # count_nonzero and max: a few us less than any() on a hot path
            np.count_nonzero(self._table.link_entries[links])
            or np.count_nonzero(self._arriving[links])
            or self._claims()[links].max() >= 0
        )

    def _disturb(self, links: np.ndarray) -> None:
        """A transfer is about to use `links`: the replayed steps there re-enter the network
        (`_materialise`) and the steps recorded there no longer run alone."""
        for gid in distinct(self._claimant[links]).tolist():
            if gid < 0:
                continue
            rec = self._recordings.get(gid)
            if rec is not None:
                rec.valid = False
                self._claimant[rec.links] = -1
            elif gid in self._schedules:
                self._materialise_schedule(gid)
            else:
                self._materialise(gid)

    def _start_replay(self, gid: int, group: TransferGroup, trajectory: Trajectory, links: np.ndarray) -> None:
        self.replayed_steps += 1
        token = object()
        self._replays[gid] = (group, trajectory, token)
        self._unwritten[gid] = links
        group.finish_s = self.sim.now + trajectory.finish_offsets
        self.sim.timeout(trajectory.duration_s).callbacks.append(lambda _e: self._end_replay(gid, token))

    def _end_replay(self, gid: int, token: object) -> None:
        entry = self._replays.get(gid)
        if entry is None or entry[2] is not token:
            return  # materialised meanwhile
        group, trajectory, _ = self._replays.pop(gid)
        self._unclaim(gid, trajectory.links)
        self._defer(trajectory, group.start_s, self.sim.now)
        self._finish_group(gid)

    def _defer(self, trajectory: Trajectory, start_s: float, end_s: float) -> None:
        """A replay of `trajectory` ran over [start_s, end_s]: account it later, with its key's other runs."""
        key = trajectory.key
        d = self._deferred.get(key)
        if d is not None and d[3] is not None:
            self._own_runs(d)
        if d is not None and d[0] is not trajectory:
            self._settle_key(key)
            d = None
        if d is None:
            d = self._deferred[key] = [trajectory, [], self._deferrals.add(key, trajectory.links), None, 0]
        runs = d[1]
        if runs and runs[-1][1] == start_s:  # back-to-back replays: one interval
            runs[-1][1] = end_s
            runs[-1][2] += 1
        else:
            runs.append([start_s, end_s, 1])
            if len(runs) >= _DEFERRED_RUNS_MAX:
                self._settle_key(key)

    # ---- replay of whole schedules (a collective's steps back to back) -----------------------
    def run_steps(self, steps: Sequence[Sequence[Flow]], name: str = "collective") -> simpy.Event:
        """`Network.run_steps`; a schedule whose every step has been recorded (its trajectory) and
        whose links no other flow uses is replayed as one: its steps would each be replayed in turn,
        back to back (a step starts when the previous one's last flow lands), so it ends after their
        summed durations and each step is accounted as its own replay. A transfer that joins its links
        meanwhile finishes the steps done by then, puts the current one back (`_materialise`) and
        runs the rest step by step (`_materialise_schedule`): exact, as step replay is."""
        plan = self._schedule_plan(steps) if self.replay and self.schedule_replay and self.ecmp != "hash" else None
        if plan is None or not self._alone(plan.links):
            return super().run_steps(steps, name)
        sid = self.sim.next_id("flow-group")
        starts = list(accumulate(plan.durations, initial=float(self.sim.now)))  # as each step's replay timer adds up
        run = _ScheduleRun(steps, plan, starts, name, self.sim.cause, object(), self.sim.env.event())
        self._schedules[sid] = run
        self._unwritten[sid] = plan.links
        self.replayed_schedules += 1
        end = self.sim.env.event()
        self.sim.env.schedule_at(end, starts[-1])
        end.callbacks.append(lambda _e: self._end_schedule(sid, run.token))
        return run.done

    def _schedule_plan(self, steps: Sequence[Sequence[Flow]]) -> _SchedulePlan | None:
        """The steps' keys and trajectories and their links, once every step has a trajectory."""
        cached = self._plans.get(id(steps))
        if cached is not None and cached[0] is steps:
            return cached[1]
        positions, keys = [], []
        for k, step in enumerate(steps):
            if not step:
                continue
            key = getattr(step, "key", None)
            if key is None or key not in self._keyed or self._trajectories.get(key) is None:
                return None
            positions.append(k)
            keys.append(key)
        if not keys:
            return None
        trajectories = [self._trajectories[key] for key in keys]
        links = distinct(np.concatenate([t.links for t in trajectories]))
        plan = _SchedulePlan(positions, keys, trajectories, links, [t.duration_s for t in trajectories])
        plan.distinct_keys = len(set(map(id, keys))) == len(keys)
        if len(self._plans) >= _ROWS_MAX_KEYS:
            self._plans.clear()  # bounded memory
        self._plans[id(steps)] = (steps, plan)
        return plan

    def _schedule_group(self, run: _ScheduleRun, i: int, event: simpy.Event | None = None) -> TransferGroup:
        """The transfer of the schedule's i-th step (started at its start: counted now); `event`:
        what fires when it completes (None: nothing waits for it)."""
        key = run.plan.keys[i]
        srcs, dsts, nbytes, total, _ = self._keyed[key]
        start = run.starts[i]
        self.flows_started += len(srcs)
        self.bytes_sent += total
        finish = start + run.plan.trajectories[i].finish_offsets
        name = f"{run.name}[{run.plan.positions[i]}]"
        return TransferGroup(event, srcs, dsts, nbytes, name, None, start, 0, finish, None, key, run.cause)

    def _complete_schedule_steps(self, run: _ScheduleRun, upto: int) -> None:
        """Complete the schedule's steps before `upto`, each as its replay would have."""
        recorder = self.sim.recorder
        if recorder.limit is not None and len(recorder.rows) >= recorder.limit:
            self._complete_skeleton_steps(run, upto)  # the trace is full: the same, without groups
            return
        for i in range(run.completed, upto):
            group = self._schedule_group(run, i)
            self.replayed_steps += 1
            self._defer(run.plan.trajectories[i], group.start_s, run.starts[i + 1])
            self._complete(group)
            run.cause = self.sim.env.cause  # what released the next step: this one's last flow
        run.completed = max(run.completed, upto)

    def _complete_skeleton_steps(self, run: _ScheduleRun, upto: int) -> None:
        """`_complete_schedule_steps` when the trace is full: each step's counters, deferred replay,
        flow skeletons (`Network._record`), causes and observer calls as its `_complete` makes them,
        without building its `TransferGroup` or its flows' ends: the skeletons are added together and
        made only when read (`_StepSkeletons`: most are evicted unread), the last flow's index comes
        from the trajectory (`Trajectory.last_flow`), and observers that take a transfer's last end
        (`on_flows_until`) are given that instead of every flow's (all steps in one call to those with
        `on_steps_until`)."""
        recorder, env, plan = self.sim.recorder, self.sim.env, run.plan
        if plan.codes is None:  # interned once per schedule
            plan.codes = [self._skeleton_codes_of(k, self._keyed[k][0], self._keyed[k][1], None) for k in plan.keys]
        batched, until, flows = self._step_observers()
        deferred, starts, steps_of = self._deferred, run.starts, plan.steps_of(self._keyed)
        sent, delivered = self.bytes_sent, self.bytes_delivered
        runs_max = _DEFERRED_RUNS_MAX - 1
        each = bool(until or flows)  # observers told step by step
        lo = run.completed
        # an armed plan keeps the steps' runs as one (starts, lo, upto) when `_defer` of each step would
        # append a run to its key's and settle nothing: no key near `_DEFERRED_RUNS_MAX` runs, and no
        # key's last run ending where its step starts (which `_defer` would extend): the steps start
        # no earlier than any run of the plan's keys ends (`kept_end`), later where a key's does
        keeping = plan.kept
        kept = False
        if keeping is not None and plan.kept_runs + len(keeping.calls) < runs_max and lo < upto:
            last, tail = plan.kept_end, max(lo, plan.kept_tail)
            kept = starts[lo] >= last and (tail >= upto or starts[tail] > last) and starts[upto] > starts[lo]
        if kept:
            assert keeping is not None
            keeping.calls.append((starts, lo, upto))
            last = plan.kept_end = starts[upto]
            tail = upto - 1  # the first step whose run ends there (the steps after it last no time)
            while tail > lo and starts[tail] == last:
                tail -= 1
            plan.kept_tail = tail
        else:
            plan.kept = None  # disarmed: its keys' runs kept so far stay theirs
        if kept and not each:  # counters in locals, written back after (the same sums)
            for total in plan.totals[lo:upto]:
                sent += total
                delivered += total  # float(nbytes.sum()), as `_complete` adds it
        for i in range(lo, upto) if not kept or each else ():
            key, trajectory, srcs, dsts, total, _, _, last_offset, _, _, offsets = steps_of[i]
            start = starts[i]
            sent += total
            if not kept:
                after = starts[i + 1]
                d = deferred.get(key)  # `_defer`, inline for its common case: a run after others
                if d is not None and d[0] is trajectory and d[3] is None:
                    runs = d[1]
                    if runs[-1][1] != start and len(runs) < runs_max:
                        runs.append([start, after, 1])
                    else:
                        self._defer(trajectory, start, after)
                else:
                    self._defer(trajectory, start, after)
            delivered += total
            end = start + last_offset  # `Trajectory.last_flow`, inline for its common case
            if each:
                for on_flows_until in until:
                    on_flows_until(srcs, dsts, start, end, key)
                if flows:
                    finish = start + offsets
                    for on_flows in flows:
                        on_flows(srcs, dsts, start, finish, key)
        if batched:  # (srcs, dsts, start, last flow's end, key) per step
            ends = [
                (srcs, dsts, start, start + last_offset, key)
                for (srcs, dsts, last_offset, key), start in zip(plan.ends_of[lo:upto], starts[lo:upto])
            ]
            for on_steps_until in batched:
                on_steps_until(ends)
        if upto > lo:
            skeletons = _StepSkeletons(
                steps_of, plan.flows_before, starts, lo, upto, recorder.next_id, run.cause, env.cause
            )
            skeleton_flows = plan.flows_before[upto] - plan.flows_before[lo]
            recorder.dropped += skeleton_flows
            recorder.next_id += skeleton_flows
            env.cause = run.cause = skeletons.last_cause()
            self.flows_started += skeleton_flows
            self.bytes_sent, self.bytes_delivered = sent, delivered
            self.replayed_steps += upto - lo
            recorder.skeleton_steps(skeletons, skeleton_flows)
        run.completed = max(run.completed, upto)
        if not kept and upto > lo:
            self._arm(plan)

    def _arm(self, plan: _SchedulePlan) -> None:
        """Let the plan keep its steps' runs (`_complete_skeleton_steps`) if every step's key is deferred
        with the plan's trajectory and no key has two steps."""
        if not plan.distinct_keys or not self.keep_schedule_runs:
            return
        entries, deferred = [], self._deferred
        for key, trajectory in zip(plan.keys, plan.trajectories):
            d = deferred.get(key)
            if d is None or d[0] is not trajectory:
                return
            if d[3] is not None:
                self._own_runs(d)
            entries.append(d)
        keeping = plan.kept = _KeptRuns(plan)
        for i, d in enumerate(entries):
            d[3], d[4] = keeping, i
        ends = [d[1][-1][1] for d in entries]
        plan.kept_runs, plan.kept_end = max(len(d[1]) for d in entries), max(ends)
        plan.kept_tail = ends.index(plan.kept_end)

    @staticmethod
    def _own_runs(d: list) -> None:
        """A deferred key's runs kept by a plan join its own (after them, in the order `_defer` of each
        step would have appended them); the plan keeps no more (its key's runs go on here)."""
        keeping, i = d[3], d[4]
        d[3] = None
        if keeping.plan.kept is keeping:
            keeping.plan.kept = None
        t0, t1 = keeping.runs_of(i)
        d[1].extend([[a, b, 1] for a, b in zip(t0.tolist(), t1.tolist())])

    def _step_observers(self) -> tuple[list, list, list]:
        """The traffic observers' calls for completed steps (`_complete_skeleton_steps`): those taking
        all steps at once (`on_steps_until`), a step's last end (`on_flows_until`) or every flow's end
        (`on_flows`); looked up again only when the observers change."""
        observers = tuple(self.traffic_observers)
        cached = self._step_observer_calls
        if cached is not None and len(cached[0]) == len(observers) and all(map(operator.is_, cached[0], observers)):
            return cached[1]
        calls = (
            [o.on_steps_until for o in observers if hasattr(o, "on_steps_until")],
            [o.on_flows_until for o in observers if hasattr(o, "on_flows_until") and not hasattr(o, "on_steps_until")],
            [o.on_flows for o in observers if hasattr(o, "on_flows") and not hasattr(o, "on_flows_until")],
        )
        self._step_observer_calls = (observers, calls)
        return calls

    def _end_schedule(self, sid: int, token: object) -> None:
        run = self._schedules.get(sid)
        if run is None or run.token is not token:
            return  # materialised meanwhile
        del self._schedules[sid]
        self._unclaim(sid, run.plan.links)
        self._complete_schedule_steps(run, len(run.plan.keys))
        run.done.succeed()

    def _materialise_schedule(self, sid: int) -> None:
        """Another transfer is about to use the schedule's links: the steps done by now complete, the
        current one's flows are put back (`_materialise`) and the rest run step by step."""
        run = self._schedules.pop(sid)
        self._unclaim(sid, run.plan.links)
        now = self.sim.now
        n = len(run.plan.keys)
        current = next((i for i in range(n) if run.starts[i + 1] > now), n)
        self._complete_schedule_steps(run, current)
        if current == n:
            run.done.succeed()
            return
        group = self._schedule_group(run, current, self.sim.env.event())  # the rest follow it
        self.replayed_steps += 1  # replayed up to now, as a step would have been
        gid = self.sim.next_id("flow-group")
        self._replays[gid] = (group, run.plan.trajectories[current], run.token)
        self._materialise(gid)

        def proc():
            yield group.event
            yield from self._steps_from(run.steps, run.plan.positions[current] + 1, run.name)
            run.done.succeed()

        self.sim.process(proc())

    def _settle_replays(self) -> None:
        for key in list(self._deferred):
            self._settle_key(key)

    def _settle_on(self, links: np.ndarray) -> None:
        """Settle the deferred replays that ran on any of `links` (a recording starts there: its
        base totals must include them), in the order they were deferred; the others keep gathering
        runs."""
        for key in self._deferrals.on(links):
            self._settle_key(key)

    def _settle_key(self, key: StepKey) -> None:
        """Account the deferred replays of a step: its recorded totals times the replays, on its own
        links (sparse); traffic observers hear of each interval of back-to-back replays."""
        d = self._deferred.pop(key, None)
        if d is None:
            return
        trajectory, runs, number, keeping, i = d
        self._deferrals.remove(number)
        t0, t1, times = (np.array([run[k] for run in runs], dtype=float) for k in range(3))
        if keeping is not None:  # then the runs a plan kept for it (`_own_runs`, without making them)
            if keeping.plan.kept is keeping:
                keeping.plan.kept = None
            kept_t0, kept_t1 = keeping.runs_of(i)
            t0, t1 = np.concatenate([t0, kept_t0]), np.concatenate([t1, kept_t1])
            times = np.concatenate([times, np.ones(len(kept_t0))])
        (links, per_run), (busy_links, busy) = trajectory.totals()
        total = times.sum()
        self._link_bytes[links] += per_run * total
        self._link_busy_s[busy_links] += busy * total
        for observer in self.traffic_observers:
            on_step = getattr(observer, "on_step", None)  # optional: the trajectory's totals reused
            if on_step is not None:
                on_step(t0, t1, trajectory, times, links, per_run)
                continue
            moved = per_run != 0
            for a, b, n in zip(t0.tolist(), t1.tolist(), times.tolist()):
                observer.on_links(a, b, links[moved], per_run[moved] * n)

    def _account(self, t0: float, t1: float, link_bytes: np.ndarray, busy: np.ndarray) -> None:
        self._link_bytes += link_bytes
        self._link_busy_s += busy
        if self.traffic_observers:
            moved = np.flatnonzero(link_bytes != 0)
            for observer in self.traffic_observers:
                observer.on_links(t0, t1, moved, link_bytes[moved])

    def _materialise(self, gid: int) -> None:
        """Another transfer is about to share a replayed step's links: put the step's flows back with
        the bytes they would have left now, so the simulation continues exactly as without the replay."""
        group, trajectory, _ = self._replays.pop(gid)
        self._unclaim(gid, trajectory.links)
        self._advance()  # the other flows' bytes up to now, before these re-enter
        now = self.sim.now
        offset = now - group.start_s
        remaining, link_bytes, busy = trajectory.state_at(offset, self._num_links)
        self._account(group.start_s, now, link_bytes, busy)
        routed = trajectory.routed
        entered = routed.latency <= offset
        active = entered & (remaining > _DONE_BYTES)
        waiting = ~entered
        group.open_subflows = int(active.sum() + waiting.sum())
        group.finish_s[routed.flow[active | waiting]] = np.nan  # set when they finish
        self._groups[gid] = group
        if group.open_subflows == 0:
            self._finish_group(gid)
            return
        rows = select_rows(routed, active)
        if len(rows.lengths):
            self._table.add(
                rows.flat,
                _weights(rows),
                rows.lengths,
                remaining[active],
                np.full(len(rows.lengths), gid),
                rows.flow,
                now,
            )
        if waiting.any():
            self._enqueue(gid, select_rows(routed, waiting), group.start_s)
        self._recompute()
        self._schedule()


def _weights(rows: Routed) -> np.ndarray:
    """Entry weights of flow rows: always set (rows are merged paths, `_merge_paths`)."""
    if rows.weights is None:
        raise ValueError("flow rows carry entry weights")
    return rows.weights


def _merge_paths(routed: Routed) -> Routed:
    """One flow per transfer: its ECMP sub-flows (contiguous, same owner) become one row whose link
    entries are the fraction of the flow on each path (an evenly sprayed flow is one flow at its
    NIC, not k flows). Latency: the slowest path's."""
    owner = routed.flow
    run_start = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
    nbytes = np.add.reduceat(routed.nbytes, run_start)
    run_of = np.repeat(np.arange(len(run_start)), np.diff(np.append(run_start, len(owner))))
    share = routed.nbytes / nbytes[run_of]
    merged = Routed(
        routed.flat,
        np.add.reduceat(routed.lengths, run_start),
        nbytes,
        owner[run_start],
        np.maximum.reduceat(routed.latency, run_start),
        np.repeat(share, routed.lengths),
    )
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


class _DeferralIndex:
    """The links of the deferred replays' steps, to find those on given links at once (a recording's
    settle asks for the few deferrals among hundreds on its links; a scan of every deferral's links
    would cost hundreds of thousands of entries a time).

    Deferrals are grouped by their links (the steps of one ring cross the same links, and are
    deferred and settled together): per link the groups with live deferrals using it, per group its
    live deferrals. A group enters the links' sets when its first deferral comes and leaves them
    when its last one is settled, so most deferrals cost a set insertion, not one per link. The
    group of a links array (a trajectory's, the same object each time) is looked up by content once
    and kept (`_content_of`, bounded)."""

    SETS_KEPT = 8192  # links arrays whose content is kept looked up (bounded memory)

    def __init__(self, num_links: int) -> None:
        self.made = 0
        self.live: dict[int, StepKey] = {}  # deferral number -> its key, while deferred
        self._group_of: dict[int, _LinkGroup] = {}  # deferral number -> its group, while deferred
        self._groups: dict[bytes, _LinkGroup] = {}  # links content -> its group, while it has deferrals
        self._using = np.zeros(num_links, dtype=np.int64)  # groups with live deferrals using each link
        self._on_link: dict[int, set[_LinkGroup]] = {}  # link -> the groups with live deferrals using it
        self._content_of: dict[int, tuple[np.ndarray, bytes]] = {}  # id(links) -> (links, their content)

    def _content(self, links: np.ndarray) -> bytes:
        kept = self._content_of.get(id(links))
        if kept is not None and kept[0] is links:
            return kept[1]
        content = np.asarray(links, dtype=np.int64).tobytes()
        if len(self._content_of) >= self.SETS_KEPT:
            self._content_of.clear()
        self._content_of[id(links)] = (links, content)  # holding `links` keeps its id unique
        return content

    def add(self, key: StepKey, links: np.ndarray) -> int:
        """A new deferral of `key`'s replays on `links` (distinct): its number (later ones have larger ones)."""
        self.made += 1
        number = self.made
        self.live[number] = key
        content = self._content(links)
        group = self._groups.get(content)
        if group is None:  # the first live deferral on these links: the group enters their sets
            group = self._groups[content] = _LinkGroup(links, content)
            self._using[links] += 1
            on_link = self._on_link
            for link in links.tolist():
                users = on_link.get(link)
                if users is None:
                    users = on_link[link] = set()
                users.add(group)
        group.members.add(number)
        self._group_of[number] = group
        return number

    def remove(self, number: int) -> None:
        del self.live[number]
        group = self._group_of.pop(number)
        group.members.discard(number)
        if not group.members:  # its last live deferral: the group leaves the links' sets
            del self._groups[group.content]
            self._using[group.links] -= 1
            on_link = self._on_link
            deque(map(set.discard, (on_link[link] for link in group.links.tolist()), repeat(group)), maxlen=0)

    def on(self, links: np.ndarray) -> list[StepKey]:
        """The deferred keys with any of `links`, in deferral order."""
        used = links[self._using[links] > 0]
        if not len(used):
            return []
        on_link = self._on_link
        groups = set().union(*(on_link[link] for link in used.tolist()))
        found = set().union(*(group.members for group in groups))
        live = self.live
        return [live[number] for number in sorted(found)]


class _LinkGroup:
    """Live deferrals on the same links (`_DeferralIndex`)."""

    __slots__ = ("links", "content", "members")

    def __init__(self, links: np.ndarray, content: bytes) -> None:
        self.links, self.content = links, content
        self.members: set[int] = set()


@dataclass
class _SchedulePlan:
    """A schedule's non-empty steps (their positions in it), keys and trajectories, and their links."""

    positions: list[int]
    keys: list[StepKey]
    trajectories: list[Trajectory]
    links: np.ndarray
    durations: list[float]  # the trajectories' durations (a finished trajectory's never changes)
    codes: list[np.ndarray] | None = None  # its steps' interned skeleton codes, once needed
    distinct_keys: bool = False  # no key has two steps (it may keep its steps' runs: `FlowNetwork._arm`)
    # while armed (`kept` not None), every step's key is deferred with the plan's trajectory and its
    # runs go on in `kept`; when armed, no key had more than `kept_runs` runs of its own; no run of
    # its keys ends after `kept_end`, none of a step before `kept_tail` at it
    # (`_complete_skeleton_steps`)
    kept: _KeptRuns | None = None
    kept_runs: int = 0
    kept_end: float = 0.0
    kept_tail: int = 0
    _steps: list[tuple] | None = None  # per step what completing it reads (`steps_of`)
    # per step the flows of the steps before it, then all of them, its total bytes, and (srcs, dsts,
    # its last flow's offset, key) (`steps_of`)
    flows_before: list[int] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    ends_of: list[tuple] = field(default_factory=list)

    def steps_of(self, keyed: dict) -> list[tuple]:
        """Per step (key, trajectory, srcs, dsts, total bytes, flows, skeleton codes, its last flow's
        offset, index and gap to the next: `Trajectory.last_flow`, and its flows' finish offsets):
        what completing it reads, gathered once (a key's transfer and a finished trajectory never
        change)."""
        if self._steps is None:
            assert self.codes is not None
            self._steps = [
                (
                    key,
                    t,
                    keyed[key][0],
                    keyed[key][1],
                    keyed[key][3],
                    len(keyed[key][0]),
                    code,
                    *t.last_flow_terms(),
                    t.finish_offsets,
                )
                for key, t, code in zip(self.keys, self.trajectories, self.codes)
            ]
            self.flows_before = list(accumulate((step[5] for step in self._steps), initial=0))
            self.totals = [step[4] for step in self._steps]
            self.ends_of = [(step[2], step[3], step[7], step[0]) for step in self._steps]
        return self._steps


class _KeptRuns:
    """Replays a schedule plan keeps for its steps' deferred keys (`FlowNetwork._arm`): one (starts,
    lo, upto) per completion of its steps lo..upto-1, step i over [starts[i], starts[i + 1]], each a
    run of that step's key after the runs it has of its own."""

    __slots__ = ("plan", "calls", "_grid")

    def __init__(self, plan: _SchedulePlan) -> None:
        self.plan = plan
        self.calls: list[tuple[list[float], int, int]] = []
        self._grid: tuple[np.ndarray, np.ndarray | None] | None = None  # starts; (lo, upto) unless all whole

    def runs_of(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the runs kept for step i, in order; read once the plan keeps no more (the
        calls' starts as one grid, made at the first read)."""
        if self._grid is None:
            calls, n = self.calls, len(self.plan.keys)
            grid = np.array([starts for starts, _, _ in calls], dtype=float).reshape(len(calls), n + 1)
            spans = np.array([(lo, hi) for _, lo, hi in calls], dtype=np.int64).reshape(-1, 2)
            whole = bool(np.all(spans[:, 0] == 0) and np.all(spans[:, 1] == n))
            self._grid = (grid, None if whole else spans)
        grid, ranges = self._grid
        if ranges is None:  # every completion was of every step
            return grid[:, i], grid[:, i + 1]
        ran = (ranges[:, 0] <= i) & (i < ranges[:, 1])
        return grid[ran, i], grid[ran, i + 1]


class _StepSkeletons:
    """The flow skeletons of a replayed schedule's steps lo..hi-1 as `SpanSkeleton.add_steps` takes
    them, one (codes, start, finish offsets, first flow id, cause) per step with flows, made when
    iterated (a long run's are mostly evicted unread): each step's flows take the next ids, the
    first step is caused by what released the schedule (`cause`), a later one by the last flow of
    the step before (`Trajectory.last_flow`; before any flow: `current`, the cause then current)."""

    __slots__ = ("steps_of", "flows_before", "starts", "lo", "hi", "first_id", "cause", "current")

    def __init__(
        self,
        steps_of: list[tuple],
        flows_before: list[int],
        starts: list[float],
        lo: int,
        hi: int,
        first_id: int,
        cause,
        current,
    ):
        self.steps_of, self.flows_before, self.starts, self.lo, self.hi = steps_of, flows_before, starts, lo, hi
        self.first_id, self.cause, self.current = first_id, cause, current

    def __iter__(self):
        steps_of, starts = self.steps_of, self.starts
        next_id, cause, current = self.first_id, self.cause, self.current
        for i in range(self.lo, self.hi):
            step = steps_of[i]
            n = step[5]
            if n:
                yield step[6], starts[i], step[10], next_id, cause
                current = next_id + _last_flow(step, starts[i])
                next_id += n
            cause = current

    def __len__(self) -> int:
        return sum(1 for i in range(self.lo, self.hi) if self.steps_of[i][5])

    def last_cause(self):
        """What the last step's end releases: its last flow (the cause before the steps if none has flows)."""
        steps_of = self.steps_of
        for i in range(self.hi - 1, self.lo - 1, -1):
            if steps_of[i][5]:
                first = self.first_id + self.flows_before[i] - self.flows_before[self.lo]
                return first + _last_flow(steps_of[i], self.starts[i])
        return self.current


def _last_flow(step: tuple, start: float) -> int:
    """The index of a step's (`_SchedulePlan.steps_of`) last flow to finish when it starts at `start`:
    `Trajectory.last_flow`, inline for its common case (a gap of more than 4 ulps to the next end)."""
    _, trajectory, _, _, _, _, _, last_offset, last_index, last_gap, _ = step
    return last_index if last_gap > 4 * ulp(start + last_offset) else trajectory.last_flow(start)[1]


@dataclass
class _ScheduleRun:
    """A schedule being replayed as one: step i runs over [starts[i], starts[i + 1]]."""

    steps: Sequence[Sequence[Flow]]
    plan: _SchedulePlan
    starts: list[float]
    name: str
    cause: int
    token: object
    done: simpy.Event
    completed: int = 0
