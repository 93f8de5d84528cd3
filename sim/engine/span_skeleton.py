"""What the recorder keeps of the spans it drops past its limit: enough to walk the critical path.

A span recorder with a `trace_limit` keeps the first spans whole (names, bytes, FLOPs: the trace,
the plots) and drops the rest; the critical path is walked back from the end of the run, through
exactly the spans dropped. So each dropped span leaves its skeleton: where it ran (component, track,
category, interned as small integers), when (start, end) and its causes (id, after, until) - about
50 bytes in flat arrays instead of a Python tuple of eight objects, moved into a chunk every
capacity / 16 spans. `capacity` bounds it: past it the oldest skeletons are evicted (a quarter of
the capacity at a time, mostly whole chunks: no copies), so the skeletons always hold
the end of the run, where the walk starts; the path before the oldest one kept is unknown, and the
report says so (`exact` false, the time before it `unrecorded`). Positions (`added`, `rows`) count
every skeleton ever added, evicted ones included.

The flows of one transfer arrive in bulk (`add_many`): they are kept as given (the transfer's
interned codes, shared by every later run of the same step, its start and its ends) and laid out as
columns only when read (`rows`, `frame`); so are the steps of a replayed schedule, together
(`add_steps`: each flow's end as an offset from its step's start, added when laid out). A long run
drops hundreds of millions of spans of which the last few million are kept, so most bulk chunks are
evicted without ever being laid out.
"""

from __future__ import annotations

import struct
from array import array
from collections import deque
from collections.abc import Iterable

import numpy as np

SKELETON_CAPACITY = 4_000_000  # ~200 MB at most: past it, the oldest skeletons go (the path is then partial)
CHUNKS = 16  # single spans are moved into chunks of capacity / CHUNKS: an eviction drops whole ones
# a single span's 8 values as the bytes of 8 doubles: appended with `array.frombytes`, the same
# doubles as `array.extend` of the 8 values (each converted by float()) at 2-3x less cost
_PACK_SINGLE = struct.Struct("8d").pack


class SpanSkeleton:
    """Columns of dropped spans (see the module docstring), in order: chunks (one per bulk call) and
    the single spans gathered since the last chunk in flat arrays."""

    def __init__(self, capacity: int = SKELETON_CAPACITY) -> None:
        self.capacity = capacity
        self._names: dict[str, int] = {}
        self._triples: dict[tuple[str, str, str], tuple[int, int, int]] = {}  # (component, track, category) -> codes
        # single spans: 8 values each (3 interned codes: component, track, category; start, end;
        # id, after, until), one flat array (codes and ids < 2^53: exact as floats)
        self._singles = array("d")
        # laid out (where n x 3, times n x 2, causes n x 3), or bulk as given (`_Bulk`), in order
        self._chunks: deque[tuple[np.ndarray, np.ndarray, np.ndarray] | _Bulk | _Steps | _Singles] = deque()
        self._chunked = 0
        self.lost = 0  # the oldest skeletons, evicted past `capacity`
        self._flush_at = max(capacity // CHUNKS, 1)  # single spans per chunk
        self._room = 0  # single spans `add` may take before it must check for room again (<= 0: check)

    def __len__(self) -> int:
        """Skeletons held now."""
        return len(self._singles) // 8 + self._chunked

    @property
    def singles(self) -> int:
        """Single spans gathered since the last chunk."""
        return len(self._singles) // 8

    @property
    def added(self) -> int:
        """Skeletons added so far, evicted ones included (the position of the next one)."""
        return self.lost + len(self)

    def _make_room(self, n: int) -> None:
        """Evict the oldest skeletons until `n` more fit (down to 3/4 of the capacity at least)."""
        if len(self) + n <= self.capacity:
            return
        self._room = 0
        self._flush()
        keep = max(0, min(self.capacity * 3 // 4, self.capacity - n))
        drop = len(self) - keep
        while drop > 0 and self._chunks:
            chunk = self._chunks[0]
            taken = len(chunk) if isinstance(chunk, _LAZY) else len(chunk[1])
            if taken <= drop:
                self._chunks.popleft()
            else:  # copies: the evicted part's memory goes with it
                where, times, causes = _laid_out(chunk)
                self._chunks[0] = (where[drop:].copy(), times[drop:].copy(), causes[drop:].copy())
                taken = drop
            self._chunked -= taken
            self.lost += taken
            drop -= taken

    @property
    def interned(self) -> list[str]:
        """The names interned so far, in code order."""
        return list(self._names)

    def code(self, text: str) -> int:
        """The small integer standing for a component, track or category name."""
        code = self._names.get(text)
        if code is None:
            code = self._names[text] = len(self._names)
        return code

    def codes(self, component: str, track: str, category: str) -> tuple[int, int, int]:
        """The interned codes of a span's (component, track, category), interned in this order the
        first time."""
        key = (component, track, category)
        codes = self._triples.get(key)
        if codes is None:
            code = self.code
            codes = self._triples[key] = (code(component), code(track), code(category))
        return codes

    def add(
        self, component: str, track: str, category: str, start_s: float, end_s: float, sid: int, after: int, until: int
    ) -> None:
        if self._room <= 0:  # a check per span only where one may act (`_check_room`)
            self._check_room()
        self._room -= 1
        c, t, k = self._triples.get((component, track, category)) or self.codes(component, track, category)
        self._singles.frombytes(_PACK_SINGLE(c, t, k, start_s, end_s, sid, after, until))

    def _check_room(self) -> None:
        """Before a single span is added: evict where the skeletons are full, else move the single
        spans into a chunk where there are a chunk's worth (evicted whole, without copies); then
        count how many more single spans need neither."""
        if len(self) >= self.capacity:
            self._make_room(1)
        elif len(self._singles) // 8 >= self._flush_at:
            self._flush()
        self._room = min(self.capacity - len(self), self._flush_at - len(self._singles) // 8)

    def add_columns(self, where: np.ndarray, times: np.ndarray, causes: np.ndarray) -> None:
        """Spans already laid out (codes n x 3 from `codes`, times n x 2: start, end, causes n x 3: id,
        after, until), in order: what `add` of each in turn keeps, the same evictions included."""
        if len(self._singles):
            self._flush()  # keep the order in which spans were added
        self._room = 0
        n, at = len(times), 0
        while at < n:
            if len(self) >= self.capacity:
                self._make_room(1)  # as `add` does when it finds the skeletons full
            take = min(n - at, self.capacity - len(self))
            self._chunks.append((where[at : at + take], times[at : at + take], causes[at : at + take]))
            self._chunked += take
            at += take

    def add_many(self, where: np.ndarray, starts, ends, first_id: int, after: int) -> None:
        """Spans with codes `where` (n x 3, from `code`), consecutive ids from `first_id`, all started
        by `after` and ended by their own durations (the flows of one transfer)."""
        total = len(where)
        skip = max(0, total - self.capacity)  # more than fit at all: only the last ones
        self.lost += skip
        n = total - skip
        if n == 0:
            return
        if len(self) + n > self.capacity:
            self._make_room(n)
        if len(self._singles):
            self._flush()  # keep the order in which spans were added
        self._room = 0
        if np.ndim(starts):
            starts = np.array(starts[skip:], dtype=float)
        # a transfer's ends: its own array, never written once it completed (kept, not copied)
        kept_ends = np.asarray(ends, dtype=float)[skip:] if np.ndim(ends) else float(ends)
        self._chunks.append(_Bulk(np.asarray(where[skip:], dtype=np.int32), starts, kept_ends, first_id + skip, after))
        self._chunked += n

    def add_steps(
        self, steps: Iterable[tuple[np.ndarray, float, np.ndarray, int, int]], flows: int | None = None
    ) -> None:
        """The flows of several transfers in order, each `(where, start, offsets, first_id, after)`:
        `add_many(where, start, start + offsets, first_id, after)` (the steps of a replayed schedule:
        int32 codes from `code`, one start, each flow's end as an offset from it). They are kept
        together as one lazy chunk (`_Steps`), with the evictions the calls one by one would make.
        `flows`: the steps' flows in all, where the caller knows it and every step has some; when
        they all fit, `steps` is kept as it is (the one chunk the step-by-step path would make), and
        iterated only if laid out (it may make its tuples then).
        """
        if len(self._singles):
            self._flush()
        self._room = 0
        capacity = self.capacity
        if flows is not None and self._chunked + flows <= capacity:
            self._add_steps_chunk(_Steps(steps, flows))
            return
        pending: list[tuple[np.ndarray, float, np.ndarray, int, int]] = []
        pending_n = 0
        for step in steps:
            n = len(step[0])
            if n == 0:
                continue
            if n > capacity:  # more than fit at all: the general path
                self._add_steps_chunk(_Steps(pending, pending_n))
                pending, pending_n = [], 0
                where, start, offsets, first_id, after = step
                self.add_many(where, start, start + offsets, first_id, after)
                continue
            if self._chunked + pending_n + n > capacity:  # len(self) if added one by one
                self._add_steps_chunk(_Steps(pending, pending_n))
                pending, pending_n = [], 0
                self._make_room(n)
            pending.append(step)
            pending_n += n
        self._add_steps_chunk(_Steps(pending, pending_n))

    def _add_steps_chunk(self, chunk: _Steps) -> None:
        if chunk.n:
            self._chunks.append(chunk)
            self._chunked += chunk.n

    def _flush(self) -> None:
        """Move the single spans gathered so far into a chunk, as they are (`_Singles`: laid out as
        columns only when read; a run that adds bulk chunks between a few single spans flushes often)."""
        n = len(self._singles) // 8
        if not n:
            return
        self._chunks.append(_Singles(self._singles))
        self._chunked += n
        self._singles = array("d")
        self._room = 0

    def rows(self, start: int, stop: int) -> list[tuple]:
        """Skeletons at positions start..stop (`added` counts; evicted ones are left out) as
        (component, track, category, start_s, end_s, id, after, until) tuples. Only the chunks
        that hold them are laid out (a replay's recording asks for its own, the latest, ones)."""
        self._flush()
        start, stop = max(start - self.lost, 0), max(stop - self.lost, 0)
        names = list(self._names)
        out: list[tuple] = []
        at = 0
        for chunk in self._chunks:
            n = len(chunk) if isinstance(chunk, _LAZY) else len(chunk[1])
            lo, hi = max(start - at, 0), min(stop - at, n)
            at += n
            if lo >= hi:
                continue
            where, times, causes = _laid_out(chunk)
            out += [
                (names[w[0]], names[w[1]], names[w[2]], float(t[0]), float(t[1]), int(c[0]), int(c[1]), int(c[2]))
                for w, t, c in zip(where[lo:hi].tolist(), times[lo:hi].tolist(), causes[lo:hi].tolist())
            ]
        return out

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._flush()
        if not self._chunks:
            return np.zeros((0, 3), dtype=np.int32), np.zeros((0, 2)), np.zeros((0, 3), dtype=np.int64)
        merged = tuple(np.concatenate(part) for part in zip(*(_laid_out(c) for c in self._chunks)))
        self._chunks = deque([merged])  # type: ignore[list-item]
        return merged  # type: ignore[return-value]

    def columns(self) -> dict[str, np.ndarray]:
        """The skeletons as columns of the span table (Recorder.columns; no name, bytes or FLOPs);
        text as object arrays of the interned strings (millions of rows: one string object each)."""
        where, times, causes = self._arrays()
        names = np.array(list(self._names) or [""], dtype=object)
        n = len(times)
        return {
            "component": names[where[:, 0]],
            "track": names[where[:, 1]],
            "name": np.full(n, "", dtype=object),
            "start_s": times[:, 0],
            "end_s": times[:, 1],
            "bytes": np.zeros(n),
            "flop": np.zeros(n),
            "category": names[where[:, 2]],
            "id": causes[:, 0],
            "after": causes[:, 1],
            "until": causes[:, 2],
            "duration_s": times[:, 1] - times[:, 0],
        }

    def frame(self):
        """`columns` as a pandas DataFrame."""
        import pandas as pd  # only where a table is wanted

        return pd.DataFrame(self.columns())


class _Bulk:
    """The skeletons of one transfer's flows as given to `SpanSkeleton.add_many`: codes (shared, never
    written), start (one or per flow), ends, consecutive ids from `first_id`, all started by `after`."""

    __slots__ = ("where", "starts", "ends", "first_id", "after")

    def __init__(self, where: np.ndarray, starts, ends, first_id: int, after: int) -> None:
        self.where, self.starts, self.ends, self.first_id, self.after = where, starts, ends, first_id, after

    def __len__(self) -> int:
        return len(self.where)


class _Steps:
    """The skeletons of several transfers added together (`SpanSkeleton.add_steps`): per transfer
    (codes, start, offsets of its flows' ends, first id, after); `n` flows in all."""

    __slots__ = ("steps", "n")

    def __init__(self, steps: Iterable[tuple[np.ndarray, float, np.ndarray, int, int]], n: int) -> None:
        self.steps, self.n = steps, n

    def __len__(self) -> int:
        return self.n


class _Singles:
    """Single spans moved out of `SpanSkeleton`'s flat array as they were gathered (8 values each)."""

    __slots__ = ("flat",)

    def __init__(self, flat: array) -> None:
        self.flat = flat

    def __len__(self) -> int:
        return len(self.flat) // 8


_LAZY = (_Bulk, _Steps, _Singles)  # chunks laid out only when read


def _laid_out(chunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A chunk's columns (where n x 3, times n x 2, causes n x 3)."""
    if isinstance(chunk, _Singles):
        flat = np.frombuffer(chunk.flat, dtype=np.float64).reshape(len(chunk), 8)
        return flat[:, 0:3].astype(np.int32), flat[:, 3:5].copy(), flat[:, 5:8].astype(np.int64)
    if isinstance(chunk, _Bulk):
        return _columns(chunk.where, chunk.starts, chunk.ends, chunk.first_id, chunk.after)
    if isinstance(chunk, _Steps):
        return _steps_columns(chunk.steps)
    return chunk


def _steps_columns(given: Iterable[tuple[np.ndarray, float, np.ndarray, int, int]]) -> tuple:
    """The columns of several transfers' flows (`add_steps`' arguments) at once: what `_columns` of
    each, concatenated, gives (ends are start + offset, the same additions), without numpy calls
    per transfer."""
    steps = list(given)
    if not steps:
        return np.zeros((0, 3), dtype=np.int32), np.zeros((0, 2)), np.zeros((0, 3), dtype=np.int64)
    wheres, starts, offsets, firsts, afters = zip(*steps)
    counts = np.fromiter(map(len, wheres), dtype=np.int64, count=len(wheres))
    total = int(counts.sum())
    times = np.empty((total, 2))
    times[:, 0] = np.repeat(np.array(starts, dtype=float), counts)
    times[:, 1] = times[:, 0] + np.concatenate(offsets)
    causes = np.empty((total, 3), dtype=np.int64)
    before = np.cumsum(counts) - counts  # flows of the transfers before each
    causes[:, 0] = np.repeat(np.array(firsts, dtype=np.int64) - before, counts) + np.arange(total, dtype=np.int64)
    causes[:, 1] = causes[:, 2] = np.repeat(np.array(afters, dtype=np.int64), counts)
    return np.concatenate(wheres), times, causes


def _columns(where: np.ndarray, starts, ends, first_id: int, after: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The columns of one transfer's flows (`add_many`'s arguments)."""
    n = len(where)
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    afters = np.full(n, after, dtype=np.int64)
    times = np.empty((n, 2))
    times[:, 0] = starts
    times[:, 1] = ends
    return where, times, np.column_stack([ids, afters, afters])
