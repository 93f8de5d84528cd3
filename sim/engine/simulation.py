"""The simulation core: one `Simulation` owns the clock, the randomness, the id counters and the
recorder, so two simulations in one process never influence each other.

- `Simulation.env` is a SimPy environment that counts the events it processes (`events_processed`).
- `Simulation.rng(name)` returns a numpy Generator seeded from (scenario seed, name): every random
  process draws from its own named substream, so adding a new random process does not shift the
  numbers another one sees.
- `Simulation.next_id(kind)` hands out ids per kind (flows, kernels, splits ...).
- `Recorder` stores spans (component, track, name, start, end, bytes, flop): what ran where and
  when (`span` records one, `spans` many at once). Metrics, plots and the Chrome trace are all
  derived from these spans.

Causes. Every span has an id and two references to the spans that released it, so the critical path
(sim/report/critical_path.py) is walked through real dependencies instead of guessed from times:
- `until`: what its end waited for. The environment carries a *current cause* (`env.cause`, a span
  id or -1): an event takes the cause current when it is scheduled (a timeout when created, any
  other event when triggered), and processing an event makes its cause current again; recording a
  span makes that span the current cause. So a kernel timed by a timeout ends by the cause current
  when it started (itself: its own duration), while a span that waited for others - a stream
  holding a collective, a step waiting for the last of its flows - ends by the last of them.
- `after`: what its start waited for, where the recorder cannot see it (given by the caller:
  the network records a flow at its end with the cause current when it was started); -1: the
  same as `until` (a kernel recorded right at its end by the process that timed it).
A span id is handed out for every span offered, kept or dropped past the recorder's limit.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from heapq import heappop, heappush
from itertools import chain, count

import numpy as np
import simpy
from simpy.core import NORMAL, URGENT, EmptySchedule, EventPriority, StopSimulation

from sim.engine.span_skeleton import SpanSkeleton

SPAN_COLUMNS = ["component", "track", "name", "start_s", "end_s", "bytes", "flop", "category", "id", "after", "until"]
NO_CAUSE = -1  # a span or event released by nothing recorded (the start of the run, an arrival)


REPORT_EVERY = 1 << 10  # events between progress reports of `CountingEnvironment.run`
_IDLE = (None, None)  # `CountingEnvironment._running` outside a run: neither shortcut applies


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes (`events_processed`, for events/s and
    `events` in summaries).

    `run` steps the environment in a loop of its own with a local counter, so counting costs no
    call per event: `run()` runs until no event is left, `run(until=event)` until that event has
    been processed (its value is returned, its exception raised, as SimPy's `run` does). Only
    `run(until=time)` goes through SimPy's own `run` (its stop event is scheduled before every
    other event at that time), counting each `step`. An event that stops `run(until=time)` is queued
    again by SimPy and counts again if a later `run` processes it."""

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self.events_processed = 0
        self.cause = NO_CAUSE  # the span that released what is being processed now (module docstring)
        self._running: list | tuple = _IDLE  # the callbacks of the event being processed

    def schedule(self, event: simpy.Event, priority: EventPriority = NORMAL, delay: float = 0) -> None:
        """SimPy's `schedule`; the event takes the current cause."""
        event._cause = self.cause  # type: ignore[attr-defined]
        heappush(self._queue, (self._now + delay, priority, next(self._eid), event))  # type: ignore[attr-defined]

    def schedule_at(self, event: simpy.Event, time_s: float) -> None:
        """Trigger `event` at the absolute time `time_s` (>= now): an instant computed elsewhere, to the
        bit (now + (time_s - now) can round off it)."""
        event._ok, event._value = True, None  # type: ignore[attr-defined]
        event._cause = self.cause  # type: ignore[attr-defined]
        heappush(self._queue, (max(time_s, self._now), NORMAL, next(self._eid), event))  # type: ignore[attr-defined]

    def step(self) -> None:
        """SimPy's `step`; the processed event's cause becomes the current cause."""
        try:
            self._now, _, _, event = heappop(self._queue)  # type: ignore[attr-defined]
        except IndexError:
            raise EmptySchedule from None
        self.cause = event._cause  # type: ignore[attr-defined]
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        self._running = callbacks  # type: ignore[assignment]
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:  # as SimPy's step: the rest of the callbacks run when the run resumes
            event.callbacks = callbacks[callbacks.index(callback) + 1 :]
            self.schedule(event, EventPriority(-1))
            raise
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def may_continue(self, owner: object = None) -> bool:
        """Whether the running process may go on at once past a request granted now, without the
        event that would resume it: that event would be processed next anyway, and the process's
        resume run first when it is. So it holds when no other event is due at this instant and
        the callback running now is the process's own resume, the last callback of the event being
        processed. (A request granted at once schedules its event now; it comes after every event
        already due now, and before any the rest of the running event's callbacks would schedule.)
        A process that goes on this way skips one event: the same order of everything else, one
        event fewer counted. `owner`: instead of the active process, a state machine that runs as
        bound methods in events' callbacks, as a process's resume would (a running step of its own
        is the last callback). Outside `run` (and in a plain callback) it never holds."""
        queue = self._queue  # type: ignore[attr-defined]
        if queue and queue[0][0] <= self._now:
            return False
        if owner is None:
            owner = self._active_proc
        return owner is not None and getattr(self._running[-1], "__self__", None) is owner

    def start_machine(self, step: Callable[[simpy.Event], None]) -> None:
        """Start a state machine (an object whose steps are bound methods appended to the events it
        waits for, where a process would yield them: sim/workloads/ingestion/lane.py) as a process
        starts: `step` runs when an urgent event scheduled now is processed."""
        event = simpy.Event(self)
        event._ok, event._value = True, None  # type: ignore[attr-defined]
        event.callbacks.append(step)  # type: ignore[union-attr]
        self.schedule(event, URGENT)

    def succeed_last(self, event: simpy.Event, value: object = None) -> None:
        """`event.succeed(value)` as the last thing a callback does; where the event would be the
        next one processed (the callback running now is the only one of the event being processed,
        and no other event is due at this instant), it is processed here and now: its callbacks run
        in this call, as they would when it is popped next, with the same cause current (and it
        counts as processed). Everything happens in the same order; only the trip through the
        queue is saved. Outside `run` it is `event.succeed(value)`."""
        queue = self._queue  # type: ignore[attr-defined]
        if len(self._running) != 1 or (queue and queue[0][0] <= self._now) or event.triggered:
            event.succeed(value)  # (raises as SimPy's for an event triggered already)
            return
        event._ok, event._value = True, value  # type: ignore[attr-defined]
        event._cause = self.cause  # type: ignore[attr-defined]
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        self._running = callbacks  # type: ignore[assignment]
        self.events_processed += 1
        for callback in callbacks:  # type: ignore[union-attr]
            callback(event)

    def run(self, until: float | simpy.Event | None = None, report: Callable[[int], None] | None = None):
        """SimPy's `run`, counting events. `report(n)` (with an event `until` or none), if given, is
        called after every `REPORT_EVERY` events with n = events processed since its last call, and
        once at the end (a progress bar's hook)."""
        if until is not None and not isinstance(until, simpy.Event):
            return self._run_until_time(until)
        if until is not None:
            if until.callbacks is None:  # processed already
                return until.value
            until.callbacks.append(_defuse_failure)
        step = self.step
        processed = 0
        try:
            if report is not None:
                self._run_reporting(step, until, report)
            elif until is None:
                while True:
                    step()
                    processed += 1
            else:
                while until.callbacks is not None:
                    step()
                    processed += 1
        except EmptySchedule:
            if until is not None:
                raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}') from None
            return None
        except StopSimulation as stop:  # env.exit() or a stop callback: the event is queued again
            return stop.args[0]
        except BaseException:
            processed += 1  # a failed event crashed the run: it was processed
            raise
        finally:
            self.events_processed += processed
            self._running = _IDLE
        if until is None:
            return None
        value = until.value
        if not until.ok:
            assert isinstance(value, BaseException)
            raise value
        return value

    def _run_reporting(
        self, step: Callable[[], None], until: simpy.Event | None, report: Callable[[int], None]
    ) -> None:
        """The stepping loop of `run` with a `report` every REPORT_EVERY events; it adds the events
        it processed to the count itself (also when EmptySchedule or a failed event ends it)."""
        since = 0
        try:
            while until is None or until.callbacks is not None:
                step()
                since += 1
                if since == REPORT_EVERY:
                    self.events_processed += since
                    report(since)
                    since = 0
        finally:
            self.events_processed += since
            report(since)

    def _run_until_time(self, until: float):
        base_step = CountingEnvironment.step.__get__(self)

        def counting_step() -> None:
            self.events_processed += 1
            try:
                base_step()
            except EmptySchedule:
                self.events_processed -= 1  # nothing was processed
                raise

        self.step = counting_step  # type: ignore[method-assign]  # SimPy's run calls self.step
        try:
            return super().run(until)
        finally:
            del self.step
            self._running = _IDLE


def _defuse_failure(event: simpy.Event) -> None:
    """A failed `until` event is raised by `run` itself (its own exception, not SimPy's copy)."""
    if not event.ok:
        event.defused = True


def _per_span(value, n: int) -> np.ndarray:
    """`value` as n floats, one per span: one value for all, or one each (`np.broadcast_to` costs
    several microseconds per call on this hot path)."""
    if np.ndim(value) == 0:
        return np.full(n, float(value))
    array = np.asarray(value, dtype=float)
    return array if array.shape == (n,) else np.broadcast_to(array, (n,))


@dataclass
class Recorder:
    """Spans of activity with their causes (module docstring). `limit` caps how many are kept (None:
    all); totals stay exact. `env`: the environment whose current cause spans take and set."""

    limit: int | None = None
    rows: list[tuple] = field(default_factory=list)
    dropped: int = 0
    # callables(component, track, category, start_s, end_s, units) that see every span, kept or
    # dropped, so activity accounting (sim/engine/activity.py) stays exact past `limit`
    observers: list = field(default_factory=list)
    env: CountingEnvironment | None = None
    next_id: int = 0  # the id of the next span offered
    skeleton: SpanSkeleton = field(default_factory=SpanSkeleton)  # what dropped spans leave

    def span(
        self,
        component: str,
        track: str,
        name: str,
        start_s: float,
        end_s: float,
        nbytes: float = 0.0,
        flop: float = 0.0,
        category: str = "",
        units: float = 1.0,
        after: int | None = None,
        until: int | None = None,
    ) -> int:
        """Record one span; returns its id, which becomes the current cause. `until` defaults to
        `after` where that is given (a span timed by itself from a known start; NO_CAUSE: released by
        nothing recorded), else to the current cause; `after` defaults to `until` (module docstring)."""
        for observe in self.observers:
            observe(component, track, category, start_s, end_s, units)
        sid = self.next_id
        self.next_id = sid + 1
        env = self.env
        if until is None:
            until = after if after is not None else (env.cause if env is not None else NO_CAUSE)
        if env is not None:
            env.cause = sid
        after = until if after is None else after
        if self.limit is not None and len(self.rows) >= self.limit:
            self.dropped += 1
            self.skeleton.add(component, track, category, start_s, end_s, sid, after, until)
            return sid
        self.rows.append((component, track, name, start_s, end_s, nbytes, flop, category, sid, after, until))
        return sid

    def spans(
        self,
        components: list[str],
        tracks,
        names: list[str],
        start_s,
        end_s,
        nbytes=0.0,
        category: str = "",
        after: int = NO_CAUSE,
    ) -> int:
        """Many one-unit spans at once: what `span` per component does, in order, without the per-span
        calls (`tracks`, `start_s`, `end_s`, `nbytes`: one value for all or one per span), all started
        by `after` and ended by their own durations (flows of one transfer). The one that ends last
        becomes the current cause; returns its id. Observers with `observe_many`
        (sim/engine/activity.py SpanActivity) take them in bulk."""
        components, names, n = list(components), list(names), len(components)
        tracks = [tracks] * n if isinstance(tracks, str) else list(tracks)
        starts, ends, sizes = (_per_span(v, n) for v in (start_s, end_s, nbytes))
        for observe in self.observers:
            bulk = getattr(observe, "observe_many", None)  # optional part of the observer interface
            if bulk is not None:
                bulk(components, tracks, category, starts, ends)
                continue
            for c, t, s, e in zip(components, tracks, starts.tolist(), ends.tolist()):
                observe(c, t, category, s, e, 1.0)
        first = self.next_id
        self.next_id = first + n
        last = first + int(np.argmax(ends)) if n else NO_CAUSE
        if self.env is not None and n:
            self.env.cause = last
        keep = n if self.limit is None else max(0, min(n, self.limit - len(self.rows)))
        self.dropped += n - keep
        self.skeletons(components[keep:], tracks[keep:], category, starts[keep:], ends[keep:], first + keep, after)
        self.rows.extend(
            zip(
                components[:keep],
                tracks[:keep],
                names[:keep],
                starts[:keep].tolist(),
                ends[:keep].tolist(),
                sizes[:keep].tolist(),
                [0.0] * keep,
                [category] * keep,
                range(first, first + keep),
                [after] * keep,
                [after] * keep,
            )
        )
        return last

    def spans_one(
        self,
        component: str,
        track: str,
        name: str,
        start_s: float,
        end_s: float,
        nbytes: float = 0.0,
        category: str = "",
        after: int = NO_CAUSE,
    ) -> int:
        """`spans` of one span (a point-to-point flow) in plain Python: the same observer calls,
        ids, causes, row or skeleton."""
        start_s, end_s = float(start_s), float(end_s)
        for observe in self.observers:
            one = getattr(observe, "observe_one", None)
            if one is not None:
                one(component, track, category, start_s, end_s)
            elif getattr(observe, "observe_many", None) is not None:
                observe.observe_many([component], [track], category, np.array([start_s]), np.array([end_s]))
            else:
                observe(component, track, category, start_s, end_s, 1.0)
        sid = self.next_id
        self.next_id = sid + 1
        if self.env is not None:
            self.env.cause = sid
        if self.limit is not None and len(self.rows) >= self.limit:
            self.dropped += 1
            self.skeleton_one(component, track, category, start_s, end_s, sid, after)
            return sid
        self.rows.append((component, track, name, start_s, end_s, float(nbytes), 0.0, category, sid, after, after))
        return sid

    def skeleton_one(
        self, component: str, track: str, category: str, start_s: float, end_s: float, sid: int, after: int
    ) -> None:
        """`skeletons` of one span: the same interned codes (category first) and columns."""
        skeleton = self.skeleton
        skeleton.code(category)
        skeleton.add(component, track, category, float(start_s), float(end_s), sid, after, after)

    def skeletons(self, components, tracks, category: str, starts, ends, first_id: int, after: int) -> None:
        """The skeletons of spans dropped past the limit (ids from `first_id`, all started by `after`)."""
        self.skeleton_codes(self.skeleton_where(components, tracks, category), starts, ends, first_id, after)

    def skeleton_where(self, components, tracks, category: str) -> np.ndarray:
        """The interned (component, track, category) codes of spans, n x 3 (reusable for the same spans)."""
        code = self.skeleton.code
        cat = code(category)
        where = np.empty((len(components), 3), dtype=np.int32)
        where[:, :2] = np.array(list(map(code, chain.from_iterable(zip(components, tracks)))), dtype=np.int32).reshape(
            -1, 2
        )  # interned as met: each span's component, then its track
        where[:, 2] = cat
        return where

    def skeleton_codes(self, where: np.ndarray, starts, ends, first_id: int, after: int) -> None:
        """`skeletons` with the codes already interned (`skeleton_where`)."""
        if len(where):
            self.skeleton.add_many(
                where, np.asarray(starts, dtype=float), np.asarray(ends, dtype=float), first_id, after
            )

    def skeleton_steps(
        self, steps: Iterable[tuple[np.ndarray, float, np.ndarray, int, int]], flows: int | None = None
    ) -> None:
        """`skeleton_codes(where, start, start + offsets, first_id, after)` of several transfers in
        order, each `(where, start, offsets, first_id, after)` (a replayed schedule's steps), at once;
        `flows`: their flows in all, if known (`SpanSkeleton.add_steps`)."""
        self.skeleton.add_steps(steps, flows)

    def columns(self) -> dict[str, np.ndarray]:
        """The kept spans as columns (SPAN_COLUMNS and `duration_s`): text as object arrays, times and
        sizes as floats, ids and causes as integers."""
        text = {"component", "track", "name", "category"}
        ints = {"id", "after", "until"}
        columns = {
            name: np.array(values, dtype=object if name in text else np.int64 if name in ints else float)
            for name, values in zip(SPAN_COLUMNS, zip(*self.rows) if self.rows else [()] * len(SPAN_COLUMNS))
        }
        columns["duration_s"] = columns["end_s"] - columns["start_s"]
        return columns

    def frame(self):
        """The kept spans as a pandas DataFrame (`columns`)."""
        import pandas as pd  # only where a table is wanted: a run's report needs none

        return pd.DataFrame(self.columns())


class Simulation:
    """Clock, randomness, ids and recorder of one simulated run."""

    def __init__(self, seed: int = 0, span_limit: int | None = 200_000) -> None:
        self.seed = int(seed)
        self.env = CountingEnvironment()
        self.recorder = Recorder(limit=span_limit, env=self.env)
        self._counters: dict[str, count] = defaultdict(count)
        self._rngs: dict[str, np.random.Generator] = {}

    @property
    def now(self) -> float:
        return self.env.now

    def rng(self, name: str) -> np.random.Generator:
        """The random substream `name`, seeded from the scenario seed and the name."""
        if name not in self._rngs:
            digest = hashlib.sha256(f"{self.seed}/{name}".encode()).digest()
            self._rngs[name] = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        return self._rngs[name]

    def next_id(self, kind: str) -> int:
        return next(self._counters[kind])

    def span(
        self,
        component: str,
        track: str,
        name: str,
        start_s: float,
        end_s: float | None = None,
        nbytes: float = 0.0,
        flop: float = 0.0,
        category: str = "",
        units: float = 1.0,
        after: int | None = None,
    ) -> int:
        """Record activity (ending now unless `end_s`); `units` = parallel resources it occupies (e.g.
        CPU cores), for accounting; `after`: what released its start, where that is not the current
        cause (module docstring). Returns the span's id."""
        return self.recorder.span(
            component,
            track,
            name,
            start_s,
            self.env.now if end_s is None else end_s,
            nbytes,
            flop,
            category,
            units,
            after,
        )

    @property
    def cause(self) -> int:
        """The current cause: what released the process running now (a span id, or NO_CAUSE)."""
        return self.env.cause

    def process(self, generator):
        return self.env.process(generator)

    def timeout(self, delay: float):
        return self.env.timeout(delay)

    def all_of(self, events):
        return self.env.all_of(list(events))
