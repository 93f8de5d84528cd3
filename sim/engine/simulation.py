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
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

import numpy as np
import pandas as pd
import simpy

SPAN_COLUMNS = ["component", "track", "name", "start_s", "end_s", "bytes", "flop", "category"]


REPORT_EVERY = 1 << 10  # events between progress reports of `CountingEnvironment.run`


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
        step = super().step
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
        except simpy.core.EmptySchedule:
            if until is not None:
                raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}') from None
            return None
        except simpy.core.StopSimulation as stop:  # env.exit() or a stop callback: the event is queued again
            return stop.args[0]
        except BaseException:
            processed += 1  # a failed event crashed the run: it was processed
            raise
        finally:
            self.events_processed += processed
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
        base_step = super().step

        def counting_step() -> None:
            self.events_processed += 1
            try:
                base_step()
            except simpy.core.EmptySchedule:
                self.events_processed -= 1  # nothing was processed
                raise

        self.step = counting_step  # type: ignore[method-assign]  # SimPy's run calls self.step
        try:
            return super().run(until)
        finally:
            del self.step


def _defuse_failure(event: simpy.Event) -> None:
    """A failed `until` event is raised by `run` itself (its own exception, not SimPy's copy)."""
    if not event.ok:
        event.defused = True


@dataclass
class Recorder:
    """Spans of activity. `limit` caps how many are kept (None: all); totals stay exact."""

    limit: int | None = None
    rows: list[tuple] = field(default_factory=list)
    dropped: int = 0
    # callables(component, track, category, start_s, end_s, units) that see every span, kept or
    # dropped, so activity accounting (sim/engine/activity.py) stays exact past `limit`
    observers: list = field(default_factory=list)

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
    ) -> None:
        for observe in self.observers:
            observe(component, track, category, start_s, end_s, units)
        if self.limit is not None and len(self.rows) >= self.limit:
            self.dropped += 1
            return
        self.rows.append((component, track, name, start_s, end_s, nbytes, flop, category))

    def spans(
        self, components: list[str], tracks, names: list[str], start_s, end_s, nbytes=0.0, category: str = ""
    ) -> None:
        """Many one-unit spans at once: what `span` per component does, in order, without the per-span
        calls (`tracks`, `start_s`, `end_s`, `nbytes`: one value for all or one per span). Observers
        with `observe_many` (sim/engine/activity.py SpanActivity) take them in bulk."""
        components, names, n = list(components), list(names), len(components)
        tracks = [tracks] * n if isinstance(tracks, str) else list(tracks)
        starts, ends, sizes = (np.broadcast_to(np.asarray(v, dtype=float), (n,)) for v in (start_s, end_s, nbytes))
        for observe in self.observers:
            bulk = getattr(observe, "observe_many", None)  # optional part of the observer interface
            if bulk is not None:
                bulk(components, tracks, category, starts, ends)
                continue
            for c, t, s, e in zip(components, tracks, starts.tolist(), ends.tolist()):
                observe(c, t, category, s, e, 1.0)
        keep = n if self.limit is None else max(0, min(n, self.limit - len(self.rows)))
        self.dropped += n - keep
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
            )
        )

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows, columns=SPAN_COLUMNS)
        df["duration_s"] = df["end_s"] - df["start_s"]
        return df


class Simulation:
    """Clock, randomness, ids and recorder of one simulated run."""

    def __init__(self, seed: int = 0, span_limit: int | None = 200_000) -> None:
        self.seed = int(seed)
        self.env = CountingEnvironment()
        self.recorder = Recorder(limit=span_limit)
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
    ) -> None:
        """Record activity; `units` = parallel resources it occupies (e.g. CPU cores), for accounting."""
        self.recorder.span(
            component, track, name, start_s, self.env.now if end_s is None else end_s, nbytes, flop, category, units
        )

    def process(self, generator):
        return self.env.process(generator)

    def timeout(self, delay: float):
        return self.env.timeout(delay)

    def all_of(self, events):
        return self.env.all_of(list(events))
