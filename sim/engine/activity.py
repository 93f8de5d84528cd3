"""Exact activity accounting during a run, independent of the span recorder's cap: busy intervals of spans.

Observers, attached before the run (sim/energy/meter.py does it), see everything as it happens. This
module holds the span side:

- `SpanActivity` sees every span the recorder is given (kept or dropped past its `limit`) and keeps,
  per key (component, track, category), the busy intervals merged into disjoint ones (buffered
  and merged in vectorised batches): back-to-back kernels and overlapping flows collapse into one
  interval, so memory grows with the number of separate bursts of activity, not with the number
  of spans. It also keeps `units`-weighted busy time (e.g. CPU cores x seconds) per key, for
  keys whose spans overlap by design.
- `union()` merges intervals into disjoint ones per group.

The other observers: `LinkTraffic` (sim/engine/link_traffic.py) bins every byte the network moves
into time bins (`AdaptiveBins`); `OpenIntervals` (sim/engine/open_intervals.py) keeps each GPU's
open interval of transfers and hands closed ones to a `SpanActivity`.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Hashable

import numpy as np

from sim.engine.codes import distinct

# intervals from which `union` merges compiled (sim/engine/union_kernel.py): below, numpy costs less
# than loading numba (~0.35 s), which a small run then never does
COMPILED_UNION_MIN = 200_000
# a span's values as the bytes of 4 (or 3) doubles, appended with `array.frombytes`: the same doubles
# as `array.extend` of the values (each converted by float()) at about half the cost per span
_PACK_SPAN = struct.Struct("4d").pack
_PACK_ONE = struct.Struct("3d").pack


class SpanActivity:
    """Recorder observer: busy intervals per (component, track, category), merged in batches."""

    def __init__(self, batch: int = 65536) -> None:
        self.keys: list[tuple[str, str, str]] = []
        self._key_id: dict[tuple[str, str, str], int] = {}
        # recorder spans waiting to be merged: one flat array of (key id, start, end, units) per
        # span, 32 bytes each (a long run buffers millions between merges: no Python objects)
        self._buf = array("d")
        self._key = np.zeros(0, dtype=np.int64)  # merged intervals (disjoint per key), sorted
        self._start = np.zeros(0)
        self._end = np.zeros(0)
        self._unit_s: np.ndarray = np.zeros(0)
        self._chunks: list[tuple] = []  # from add_many / add_spans: (keys, start, end, units or None)
        self._chunk_len = 0
        self._ones = array("d")  # observe_one's spans since the last chunk: (key id, start, end) each
        self._component_keys: dict[tuple[Hashable, str, str], np.ndarray] = {}  # (list key, track, category) -> key ids
        self._batch = batch
        self._next = batch
        self.spans = 0

    def key_id(self, key: tuple[str, str, str]) -> int:
        k = self._key_id.get(key)
        if k is None:
            k = self._key_id[key] = len(self.keys)
            self.keys.append(key)
        return k

    def add_many(self, key_ids: np.ndarray, start_s, end_s) -> None:
        """Busy intervals of keys (from `key_id`) given as arrays, one unit each."""
        key_ids = np.asarray(key_ids, dtype=np.int64)
        self._add_chunk(
            key_ids,
            np.broadcast_to(np.asarray(start_s, dtype=float), key_ids.shape).copy(),
            np.broadcast_to(np.asarray(end_s, dtype=float), key_ids.shape).copy(),
            None,
        )

    def add_components(
        self, components: list[str], track: str, category: str, start_s: float, end_s: float, key: Hashable
    ) -> None:
        """One busy interval of one unit on each of `components` (what one call per component
        does). `key` names the list (e.g. the object that owns it; the same key always comes with
        the same list): its key ids are kept for the next call."""
        ids = self._component_keys.get((key, track, category))
        if ids is None:
            ids = np.array([self.key_id((c, track, category)) for c in components], dtype=np.int64)
            self._component_keys[(key, track, category)] = ids
        self.spans += len(components)
        self.add_many(ids, start_s, end_s)

    def add_spans(self, key_ids: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, units: np.ndarray) -> None:
        """Recorder spans in bulk (as arrays): what calling this observer once per span does."""
        self._add_chunk(
            np.asarray(key_ids, dtype=np.int64),
            np.asarray(start_s, dtype=float),
            np.asarray(end_s, dtype=float),
            np.asarray(units, dtype=float),
        )
        self.spans += len(key_ids)

    def observe_many(
        self, components: list[str], tracks: list[str], category: str, start_s: np.ndarray, end_s: np.ndarray
    ) -> None:
        """Recorder spans of one unit each, in bulk (Recorder.spans): what calling this observer per
        span does."""
        known = self._key_id
        keys = [known.get(key) for key in zip(components, tracks, [category] * len(components))]
        if None in keys:
            keys = [self.key_id((c, t, category)) for c, t in zip(components, tracks)]
        self.add_spans(np.array(keys, dtype=np.int64), start_s, end_s, np.ones(len(keys)))

    def observe_one(self, component: str, track: str, category: str, start_s: float, end_s: float) -> None:
        """`observe_many` of one span (a point-to-point flow), without its arrays: the same chunk
        data in the same order (spans of consecutive calls are gathered into one chunk)."""
        key = (component, track, category)
        k = self._key_id.get(key)
        if k is None:
            k = self.key_id(key)
        self._ones.frombytes(_PACK_ONE(k, start_s, end_s))
        self.spans += 1
        self._chunk_len += 1
        if self._chunk_len >= self._next:
            self._merge()

    def _flush_ones(self) -> None:
        """Turn the spans gathered by `observe_one` into a chunk (before any later chunk)."""
        if len(self._ones):
            ones = np.frombuffer(self._ones, dtype=float).reshape(-1, 3)
            self._chunks.append((ones[:, 0].astype(np.int64), ones[:, 1].copy(), ones[:, 2].copy(), np.ones(len(ones))))
            self._ones = array("d")

    def _add_chunk(self, key_ids, start_s, end_s, units) -> None:
        self._flush_ones()
        self._chunks.append((key_ids, start_s, end_s, units))
        self._chunk_len += len(key_ids)
        if self._chunk_len >= self._next:
            self._merge()

    def __call__(
        self, component: str, track: str, category: str, start_s: float, end_s: float, units: float = 1.0
    ) -> None:
        key = (component, track, category)
        k = self._key_id.get(key)  # hot path: one dict lookup and one append per span
        if k is None:
            k = self.key_id(key)
        self._buf.frombytes(_PACK_SPAN(k, start_s, end_s, units))
        if len(self._buf) >= 4 * self._next:
            self._merge()

    def _merge(self) -> None:
        """Fold the buffered spans into the merged intervals (amortised: the batch grows with them)."""
        self._flush_ones()
        if not len(self._buf) and not self._chunks:
            return
        buf = np.frombuffer(self._buf, dtype=float).reshape(-1, 4)  # key ids < 2^53: exact as floats
        k, s, e, u = buf[:, 0].astype(np.int64), buf[:, 1].copy(), buf[:, 2].copy(), buf[:, 3].copy()
        self.spans += len(k)  # recorder spans (add_spans counts its own)
        if self._chunks:
            k = np.concatenate([k, *(c[0] for c in self._chunks)])
            s = np.concatenate([s, *(c[1] for c in self._chunks)])
            e = np.concatenate([e, *(c[2] for c in self._chunks)])
            u = np.concatenate([u, *(np.ones(len(c[0])) if c[3] is None else c[3] for c in self._chunks)])
            self._chunks, self._chunk_len = [], 0
        busy = e > s
        unit_s: np.ndarray = np.bincount(k[busy], (u * (e - s))[busy], minlength=len(self.keys))
        unit_s[: len(self._unit_s)] += self._unit_s
        self._unit_s = unit_s
        self._key, self._start, self._end = union(
            np.r_[self._key, k[busy]], np.r_[self._start, s[busy]], np.r_[self._end, e[busy]]
        )
        self._buf = array("d")
        self._next = max(self._batch, len(self._key))

    @property
    def unit_s(self) -> np.ndarray:
        """Per key: sum of units x duration over its spans (overlaps counted, e.g. core-seconds)."""
        self._merge()
        return self._unit_s

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(key id, start_s, end_s) of the merged intervals: disjoint per key, sorted by key then start."""
        self._merge()
        return self._key, self._start, self._end


def union(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, block: int = 1 << 22
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge intervals into disjoint ones per group: returns (group, start, end), sorted.

    Groups are independent, so more than `block` intervals are merged a range of groups at a time
    (about `block` intervals each) and the ranges concatenated in order: the working memory (~100 B
    per interval merged at once) stays bounded however many intervals a long run gathers."""
    if len(group) <= block:
        return _union(group, start, end)
    lo_group = int(group.min())
    edges = block_edges(np.bincount(group - lo_group), block) + lo_group
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (group >= lo) & (group < hi)
        parts.append(_union(group[inside], start[inside], end[inside]))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]


def block_edges(load: np.ndarray, block: float) -> np.ndarray:
    """Edges 0 = e0 < e1 < ... = len(load) cutting consecutive items of `load` into ranges of about
    `block` total load each (no item split; [0, len(load)] when the total fits in one)."""
    total = float(load.sum())
    if total <= block:
        return np.array([0, len(load)])
    cuts = np.searchsorted(np.cumsum(load), np.arange(1, int(np.ceil(total / block))) * block, side="right")
    return distinct(np.r_[0, cuts, len(load)])


def _union(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`union` of intervals merged at once (many: the merge compiled, sim/engine/union_kernel.py)."""
    if not len(group):
        return group, start, end
    order = np.lexsort((start, group))
    if len(group) >= COMPILED_UNION_MIN:
        from sim.engine.union_kernel import merge_sorted  # numba: imported when first needed

        return merge_sorted(order, group, np.asarray(start, dtype=float), np.asarray(end, dtype=float))
    g, s, e = group[order], start[order], end[order]
    new_group = np.r_[True, g[1:] != g[:-1]]
    # running max of ends within each group: offset groups so that they never interleave
    span = float(max(e.max() - s.min(), 1.0)) * 2.0
    ranks = np.cumsum(new_group) - 1
    offset = ranks * span - s.min()
    reach = np.maximum.accumulate(e + offset)
    opens = new_group | np.r_[True, s[1:] + offset[1:] > reach[:-1]]
    idx = np.flatnonzero(opens)
    return g[idx], s[idx], np.maximum.reduceat(e, idx)
