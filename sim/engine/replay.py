"""Record once, replay exactly: the one mechanism behind every fast path that repeats identical work.

A run repeats identical work again and again: a collective's ring step (the same flows) 2(n-1)
times, a transformer layer on a group of GPUs that runs alone, a training op of a given shape.
Each such fast path records what one repetition did to the rest of the simulator, keyed by an
explicit step key, and replays it shifted in time, instead of simulating it again. Its uses:
- sim/network/replay.py: a collective step on an idle flow network (`Trajectory`, keyed by the
  step's `StepKey`; materialised back into flows if anything else starts meanwhile) and what a
  stretch of time did to the network (`TrafficTape`);
- sim/workloads/cp_inference/replay.py: a transformer layer (`RecorderTape` + `TrafficTape` +
  device usage), replayed for the layers that follow;
- sim/workloads/training/run.py: a layer's or an op's timeline (`SpanTape`), re-recorded where
  a later one of the same kind runs.
Each use keeps a test that replay gives what simulating every repetition gives.

Concepts:
- `StepKey`: the explicit name of one repeated unit of work, minted by whoever builds the work (a
  collective schedule mints one per distinct step). The same key promises the same work; caches
  keyed by it hold the key, so no key is ever confused with another. Keys compare by identity:
  work built separately is separate work, even where it happens to coincide.
- `SpanTape`: spans of one repetition on one component as offsets from its start; `replay`
  records them again from another start.
- `RecorderTape`: everything the span recorder saw during one repetition - its new rows, how many
  it dropped past its limit, every call to its observers; `replay` emits it again for each of
  several later starts.
- `repetition_starts(end_s, duration_s, n)`: where the n repetitions after a recorded one start
  (each where the previous ends, as a simulation of every repetition has them), and
  `delay_to(now, target_s)`: the timeout that lands exactly on a replayed end.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.engine.simulation import Recorder, Simulation

# (track, name, start offset, end offset, bytes, flop, category)
TapeSpan = tuple[str, str, float, float, float, float, str]


class StepKey:
    """Names one repeated unit of work (`label`: for reading only). Hashes and compares by identity."""

    __slots__ = ("label",)

    def __init__(self, label: str = "") -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"StepKey({self.label!r})"


@dataclass
class SpanTape:
    """Spans of one repetition on one component, as offsets from its start."""

    spans: list[TapeSpan] = field(default_factory=list)
    # the spans in replay order, each with the index of the one it waits for (-1: the entry cause),
    # worked out once for the spans recorded so far (`_order`)
    _plan: list[tuple[TapeSpan, int]] = field(default_factory=list, init=False, repr=False, compare=False)
    _planned: int = field(default=-1, init=False, repr=False, compare=False)

    def record(
        self,
        track: str,
        name: str,
        start_off: float,
        end_off: float,
        nbytes: float = 0.0,
        flop: float = 0.0,
        category: str = "",
    ) -> None:
        self.spans.append((track, name, start_off, end_off, nbytes, flop, category))

    def extend(self, other: SpanTape, offset: float) -> None:
        """Append `other`'s spans, `offset` seconds later."""
        self.spans += [(t, n, a + offset, b + offset, nb, f, c) for t, n, a, b, nb, f, c in other.spans]

    def replay(self, sim: Simulation, component: str, start_s: float, prefix: str = "") -> None:
        """Record the spans again on `component`, starting at `start_s` (names prefixed), as a chain
        of causes: each span waited for the last one of the tape that ended at or before its start
        (the first ones for the current cause), and runs for its own duration. They are recorded in
        end order, so the one that ends last is the current cause afterwards."""
        if not self.spans:
            return
        ids: list[int] = []
        entry = sim.cause
        for (track, name, a, b, nbytes, flop, category), k in self._order():
            ids.append(
                sim.span(
                    component,
                    track,
                    prefix + name,
                    start_s + a,
                    start_s + b,
                    nbytes=nbytes,
                    flop=flop,
                    category=category,
                    after=ids[k] if k >= 0 else entry,
                )
            )

    def _order(self) -> list[tuple[TapeSpan, int]]:
        """The spans in end order, each with the position of the last one before it that ends by its
        start (-1: none): what each replay records, worked out once (spans are only ever added)."""
        if self._planned != len(self.spans):
            spans = sorted(self.spans, key=lambda sp: (sp[3], sp[2]))
            ends = [sp[3] for sp in spans]
            self._plan = [(sp, bisect_right(ends, sp[2], hi=i) - 1) for i, sp in enumerate(spans)]
            self._planned = len(self.spans)
        return self._plan


class RecorderTape:
    """Records what `recorder` sees from construction to `stop()`: rows, drops, observer calls."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._rows0, self._dropped0 = len(recorder.rows), recorder.dropped
        self._skeleton0 = recorder.skeleton.added
        self.bones: list[tuple] = []  # the skeletons of the rows dropped while recording
        self._bones_whole = True
        self.calls: list[tuple] = []  # observer calls: (component, track, category, start, end, units)
        self.rows: list[tuple] = []
        self.dropped = 0
        recorder.observers.insert(0, self._on_span)

    def _on_span(self, component: str, track: str, category: str, start_s: float, end_s: float, units: float) -> None:
        self.calls.append((component, track, category, start_s, end_s, units))

    def stop(self) -> None:
        recorder = self.recorder
        recorder.observers.remove(self._on_span)
        self.rows = recorder.rows[self._rows0 :]
        self.dropped = recorder.dropped - self._dropped0
        # the dropped rows' skeletons (sim/engine/span_skeleton.py), taken now: later ones may evict them
        self.bones = recorder.skeleton.rows(self._skeleton0, recorder.skeleton.added)
        self._bones_whole = self._skeleton0 >= recorder.skeleton.lost  # none evicted while recording

    def replayable(self, repetitions: int) -> int:
        """How many of the next `repetitions` replaying this tape reproduces exactly: past the
        recorder's limit what is kept changes (and, with it, what the network shows observers)."""
        recorder = self.recorder
        limit = recorder.limit
        if limit is None or len(self.rows) + self.dropped == 0:
            return repetitions
        if not self._bones_whole:  # its copies would miss causes: simulate instead
            return 0
        if self.dropped:  # exact only if the recorder was full all repetition long
            return repetitions if not self.rows else 0
        return max(0, min(repetitions, (limit - len(recorder.rows)) // len(self.rows)))

    def replay(
        self, origin_s: float, starts: np.ndarray, rename: Callable[[int], tuple[str, str]] | None = None
    ) -> None:
        """Emit the tape again for each of `starts`: a recorded time t becomes start + (t - origin_s).
        `rename(i)` -> (old prefix, new prefix) of row names in the i-th replay (1-based)."""
        self._replay_rows(origin_s, starts, rename)
        self._replay_calls(origin_s, starts)

    def _replay_rows(
        self, origin_s: float, starts: np.ndarray, rename: Callable[[int], tuple[str, str]] | None
    ) -> None:
        """Rows (and the skeletons of dropped rows) again for each start, with new ids: a cause inside
        the tape becomes the copy's own, a cause before it (what released the recorded repetition)
        the previous copy's last span. Rows past the recorder's limit leave their skeletons."""
        if not self.rows and self.bones:  # the recorder was full: skeletons only, every copy at once
            self._replay_bones(origin_s, np.asarray(starts, dtype=float))
            return
        recorder, skeleton = self.recorder, self.recorder.skeleton
        rows = [(c, t, n, s - origin_s, e - origin_s, b, f, cat) for c, t, n, s, e, b, f, cat, *_ in self.rows]
        # the dropped rows' skeletons: (component, track, category, start, end, id, after, until)
        bones = self.bones
        ids = [r[8] for r in self.rows] + [b[5] for b in bones]
        inside = {sid: k for k, sid in enumerate(ids)}
        ends = [r[4] for r in rows] + [b[4] - origin_s for b in bones]
        last = max(range(len(ids)), key=lambda k: (ends[k], k)) if ids else -1
        prev_ids = ids  # ids of the previous copy's rows (first: the recorded repetition)
        for i, base in enumerate(starts.tolist(), start=1):
            first = recorder.next_id
            recorder.next_id += len(rows) + self.dropped
            new_ids = list(range(first, first + len(ids)))
            entry = prev_ids[last] if last >= 0 else -1

            def mapped(ref: int) -> int:
                k = inside.get(ref)
                return new_ids[k] if k is not None else entry

            causes = [(mapped(r[9]), mapped(r[10])) for r in self.rows]
            for (c, t, cat, s, e, _sid, after, until), new_id in zip(bones, new_ids[len(rows) :]):
                skeleton.add(c, t, cat, base + s - origin_s, base + e - origin_s, new_id, mapped(after), mapped(until))
            kept = len(rows)
            if recorder.limit is not None:
                room = max(0, recorder.limit - len(recorder.rows))
                recorder.dropped += max(0, len(rows) - room) + self.dropped
                kept = min(kept, room)
            old, new = rename(i) if rename is not None else ("", "")
            for (c, t, _, s, e, _, _, cat), sid, (after, until) in zip(rows[kept:], new_ids[kept:], causes[kept:]):
                skeleton.add(c, t, cat, base + s, base + e, sid, after, until)
            recorder.rows.extend(
                (
                    c,
                    t,
                    new + n[len(old) :] if old and n.startswith(old) else n,
                    base + s,
                    base + e,
                    b,
                    f,
                    cat,
                    sid,
                    after,
                    until,
                )
                for (c, t, n, s, e, b, f, cat), sid, (after, until) in zip(rows[:kept], new_ids, causes)
            )
            prev_ids = new_ids
        if ids and recorder.env is not None:
            recorder.env.cause = prev_ids[last]  # what follows the copies waited for the last of them

    def _replay_bones(self, origin_s: float, starts: np.ndarray) -> None:
        """`_replay_rows` of a tape with no rows (recorded past the recorder's limit: its spans left
        skeletons only), as columns: copy i's skeletons are the recorded ones with ids from that
        copy's first, at start + (t - origin_s) (the same additions, in the same order), a cause
        inside the tape mapped to the copy's own, one before it to the previous copy's last span."""
        recorder, skeleton, bones = self.recorder, self.recorder.skeleton, self.bones
        n, m = len(bones), len(starts)
        step = self.dropped  # ids each copy takes (no rows: all of them dropped)
        where = np.array([skeleton.codes(c, t, cat) for c, t, cat, *_ in bones], dtype=np.int32)
        offsets = np.array([(b[3], b[4]) for b in bones], dtype=float)
        inside = {b[5]: k for k, b in enumerate(bones)}
        after = np.array([inside.get(b[6], -1) for b in bones], dtype=np.int64)
        until = np.array([inside.get(b[7], -1) for b in bones], dtype=np.int64)
        ends = [b[4] - origin_s for b in bones]
        last = max(range(n), key=lambda k: (ends[k], k))
        if not m:
            if recorder.env is not None:
                recorder.env.cause = bones[last][5]
            return
        first = recorder.next_id + step * np.arange(m, dtype=np.int64)  # each copy's first id
        entry = np.empty(m, dtype=np.int64)  # what released each copy: the previous one's last span
        entry[0] = bones[last][5]
        entry[1:] = first[:-1] + last
        times = np.empty((m, n, 2))
        times[:, :, 0] = (starts[:, None] + offsets[None, :, 0]) - origin_s
        times[:, :, 1] = (starts[:, None] + offsets[None, :, 1]) - origin_s
        causes = np.empty((m, n, 3), dtype=np.int64)
        causes[:, :, 0] = first[:, None] + np.arange(n, dtype=np.int64)[None, :]
        causes[:, :, 1] = np.where(after >= 0, first[:, None] + after, entry[:, None])
        causes[:, :, 2] = np.where(until >= 0, first[:, None] + until, entry[:, None])
        skeleton.add_columns(np.tile(where, (m, 1)), times.reshape(m * n, 2), causes.reshape(m * n, 3))
        recorder.next_id += step * m
        if recorder.limit is not None:
            recorder.dropped += self.dropped * m
        if recorder.env is not None:
            recorder.env.cause = int(first[-1]) + last  # what follows the copies waited for the last of them

    def _replay_calls(self, origin_s: float, starts: np.ndarray) -> None:
        calls = self.calls
        if not calls:
            return
        start = np.array([s[3] for s in calls], dtype=float) - origin_s
        end = np.array([s[4] for s in calls], dtype=float) - origin_s
        units = np.array([s[5] for s in calls], dtype=float)
        all_starts = (start[None, :] + starts[:, None]).ravel()
        all_ends = (end[None, :] + starts[:, None]).ravel()
        for observe in self.recorder.observers:
            bulk = getattr(observe, "add_spans", None)  # bulk path (sim/engine/activity.py SpanActivity)
            if bulk is not None:
                keys = np.array([observe.key_id(s[:3]) for s in calls], dtype=np.int64)
                bulk(np.tile(keys, len(starts)), all_starts, all_ends, np.tile(units, len(starts)))
                continue
            for base in starts.tolist():
                for (component, track, category, _, _, u), s, e in zip(calls, start.tolist(), end.tolist()):
                    observe(component, track, category, base + s, base + e, u)


def repetition_starts(end_s: float, duration_s: float, repetitions: int) -> list[float]:
    """Start times of the `repetitions` repetitions after one that ended at `end_s` (each starts
    where the previous one ends, adding `duration_s` as a simulation of each would)."""
    out = [end_s]
    for _ in range(repetitions - 1):
        out.append(out[-1] + duration_s)
    return out


def delay_to(now: float, target_s: float) -> float:
    """A delay d with now + d == target_s exactly (as the event loop adds it), for target_s >= now."""
    delay = max(target_s - now, 0.0)
    while now + delay < target_s:
        delay = float(np.nextafter(delay, np.inf))
    while delay > 0 and now + delay > target_s:
        delay = float(np.nextafter(delay, 0.0))
    return float(delay)
