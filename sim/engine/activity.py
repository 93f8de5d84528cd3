"""Exact activity accounting during a run, independent of the span recorder's cap.

Two observers, attached before the run (sim/energy/meter.py does it), see everything as it happens:

- `SpanActivity` sees every span the recorder is given (kept or dropped past its `limit`) and keeps,
  per key (component, track, category), the busy intervals merged into disjoint ones (buffered
  and merged in vectorised batches): back-to-back kernels and overlapping flows collapse into one
  interval, so memory grows with the number of separate bursts of activity, not with the number
  of spans. It also keeps `units`-weighted busy time (e.g. CPU cores x seconds) per key, for
  keys whose spans overlap by design. `union()` merges intervals into disjoint ones per group.
- `LinkTraffic` sees every byte the network moves (`on_links` from the flow backend at each rate
  update, `on_subflows` from the analytical backend per transfer), weights it per link by sparse
  coefficients (e.g. joules per byte for the NIC and the switches a link touches) and accumulates
  the weighted amounts into time bins per row (e.g. per power class and per host). It buffers what
  it is given and bins it in vectorised batches (`flush()`, also done before results are read):
  the same amounts per interval and row as binning each call at once, summed in another order
  (identical within float rounding; tests/workloads/test_workload_fast_paths.py compares both).

`OpenIntervals` keeps, per GPU, the interval during which it takes part in transfers (sim/energy/meter.py
feeds it each transfer's endpoints; it hands closed intervals to a `SpanActivity`).

`AdaptiveBins` holds amounts (e.g. joules) over time in a fixed number of equal bins whose width
doubles - adjacent pairs merge - whenever something lands past the end, so any run length fits
and the totals stay exact. An amount spread over [t0, t1] is split uniformly over the bins it
covers (partial bins directly, whole bins through a running difference array: O(1) per interval).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable

import numpy as np

MIN_BIN_S = 2.0**-30  # ~1 ns: the initial bin width


class AdaptiveBins:
    """`rows` x `bins` amounts over [0, bins x width_s); the width doubles as time grows."""

    def __init__(self, rows: int, bins: int, width_s: float = MIN_BIN_S) -> None:
        if bins < 2 or bins % 2:
            raise ValueError("bins must be an even number >= 2")
        self.rows, self.bins, self.width_s = rows, bins, width_s
        self._direct = np.zeros((rows, bins))
        self._rate = np.zeros((rows, bins + 1))  # difference array of per-bin amounts of whole bins

    def fit(self, t_end: float) -> None:
        """Coarsen until [0, t_end] lies inside the bins (t_end < bins x width): m doublings of the
        width merge every 2^m adjacent bins (all of them into the first when 2^m >= bins), at once."""
        factor = 1
        while t_end >= self.bins * self.width_s * factor:
            factor *= 2
        if factor == 1:
            return
        group = min(factor, self.bins)
        merged = self.values().reshape(self.rows, self.bins // group, group).sum(axis=2)
        self._direct = np.zeros((self.rows, self.bins))
        self._direct[:, : self.bins // group] = merged
        self._rate[:] = 0.0
        self.width_s *= factor

    def values(self) -> np.ndarray:
        """rows x bins amounts."""
        return self._direct + np.cumsum(self._rate, axis=1)[:, : self.bins]

    def spread(self, rows, t0, t1, amounts) -> None:
        """Add `amounts[i]` to row `rows[i]`, spread uniformly over [t0[i], t1[i]] (a point if equal)."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        amounts = np.asarray(amounts, dtype=float).ravel()
        t0 = np.broadcast_to(np.asarray(t0, dtype=float), amounts.shape)
        t1 = np.broadcast_to(np.asarray(t1, dtype=float), amounts.shape)
        keep = amounts != 0
        if not keep.any():
            return
        if not keep.all():
            rows, amounts, t0, t1 = rows[keep], amounts[keep], t0[keep], t1[keep]
        self.fit(float(t1.max()))
        w = self.width_s
        lo = np.minimum((t0 / w).astype(np.int64), self.bins - 1)
        hi = np.minimum((t1 / w).astype(np.int64), self.bins - 1)
        length = t1 - t0
        point = (hi == lo) | (length <= 0)
        flat = self._direct.reshape(-1)
        at = np.flatnonzero(point)  # indices, not masks: one scan for every array taken
        if len(at):
            np.add.at(flat, rows[at] * self.bins + lo[at], amounts[at])
        at = np.flatnonzero(~point)
        if not len(at):
            return
        r, a, b, lo, hi, density = rows[at], t0[at], t1[at], lo[at], hi[at], amounts[at] / length[at]
        first = np.clip(density * ((lo + 1) * w - a), 0.0, None)
        last = np.clip(density * (b - hi * w), 0.0, None)
        np.add.at(flat, r * self.bins + lo, first)
        np.add.at(flat, r * self.bins + hi, last)
        at = np.flatnonzero(hi - lo > 1)
        if len(at):
            rate = self._rate.reshape(-1)
            base, whole = r[at] * (self.bins + 1), density[at] * w
            np.add.at(rate, base + lo[at] + 1, whole)
            np.add.at(rate, base + hi[at], -whole)

    def spread_interval(self, t0: float, t1: float, amounts_per_row: np.ndarray) -> None:
        """Add a vector of per-row amounts, all spread over the same [t0, t1]."""
        rows = np.flatnonzero(amounts_per_row)
        if len(rows):
            self.spread(rows, t0, t1, amounts_per_row[rows])


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

    def _add_chunk(self, key_ids, start_s, end_s, units) -> None:
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
        self._buf.extend((k, start_s, end_s, units))
        if len(self._buf) >= 4 * self._next:
            self._merge()

    def _merge(self) -> None:
        """Fold the buffered spans into the merged intervals (amortised: the batch grows with them)."""
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


class OpenIntervals:
    """Per row (a GPU): the open interval during which it takes part in transfers.

    A transfer makes its rows busy from `start_s` until `end_s`. One that starts no later than the
    row's open interval ends (within 1e-12 relative) joins it: the interval spans both (transfers
    are seen when they end, so one that started earlier can arrive after a later one); otherwise the
    open interval is closed - handed to `emit(rows, starts, ends)` - and a new one opened, so
    back-to-back steps of a collective keep one interval per GPU. Emitted intervals of a row may
    overlap (their union is what counts). Transfers with few rows (`add`) are buffered
    and folded in vectorised batches; ones with many (`add_many`) are folded at once, after the
    buffer. Either way the intervals are those of folding every transfer in turn, in call order
    (tests/workloads/test_workload_fast_paths.py holds it to that).
    """

    def __init__(self, rows: int, emit, batch: int = 1 << 16) -> None:
        self._start = np.zeros(rows)
        self._end = np.full(rows, -np.inf)
        self.emit = emit
        self._batch = batch
        self._rows, self._counts = array("q"), array("q")
        self._starts, self._ends = array("d"), array("d")
        # (rows array, end, latest start): those rows' open intervals all end at `end`, not yet
        # written to _end, and start no later than `latest start` (a ring collective's steps, back
        # to back on the same GPUs, extend it in O(1) each)
        self._uniform: tuple[np.ndarray, float, float] | None = None

    @property
    def start(self) -> np.ndarray:
        self._settle()
        return self._start

    @property
    def end(self) -> np.ndarray:
        self._settle()
        return self._end

    def _settle(self) -> None:
        if self._uniform is not None:
            rows, end, _ = self._uniform
            self._uniform = None
            self._end[rows] = end

    def add(self, rows: list[int], start_s: float, end_s: float) -> None:
        """Distinct `rows` busy over [start_s, end_s] (buffered)."""
        self._settle()
        self._rows.extend(rows)
        self._counts.append(len(rows))
        self._starts.append(start_s)
        self._ends.append(end_s)
        if len(self._rows) >= self._batch:
            self.flush()

    def add_many(self, rows: np.ndarray, start_s: float, end_s: float) -> None:
        """Distinct `rows` (an array) busy over [start_s, end_s], folded now."""
        self.flush()
        if self._uniform is not None and self._uniform[0] is rows:
            _, end, latest_start = self._uniform  # every row's open end
            if start_s > end * (1 + 1e-12) + 1e-15:
                if end != -np.inf:
                    self.emit(rows, self._start[rows], np.full(len(rows), end))
                self._start[rows] = start_s
                latest_start = start_s
            elif start_s < latest_start:  # joins, starting earlier
                self._start[rows] = np.minimum(self._start[rows], start_s)
                latest_start = float(self._start[rows].max())
            self._uniform = (rows, max(end, end_s), latest_start)
            return
        self._settle()
        open_end = self._end[rows]
        fresh = start_s > open_end * (1 + 1e-12) + 1e-15  # does not continue the open interval
        closing = rows[fresh & np.isfinite(open_end)]
        if len(closing):
            self.emit(closing, self._start[closing], self._end[closing])
        self._start[rows] = np.where(fresh, start_s, np.minimum(self._start[rows], start_s))
        new_end = np.maximum(open_end, end_s)
        self._end[rows] = new_end
        if len(rows) > 64 and (new_end == end_s).all():
            self._uniform = (rows, end_s, float(self._start[rows].max()))

    def flush(self) -> None:
        """Fold the buffered transfers, per row in call order: a row's open interval ends at the
        running maximum of its transfers' ends; a transfer starting past it closes it."""
        if not len(self._counts):
            return
        self._settle()
        counts = np.frombuffer(self._counts, dtype=np.int64)
        row = np.frombuffer(self._rows, dtype=np.int64)
        order = np.argsort(row, kind="stable")  # per row, in call order
        r = row[order]
        s = np.repeat(np.frombuffer(self._starts), counts)[order]
        e = np.repeat(np.frombuffer(self._ends), counts)[order]
        self._rows, self._counts, self._starts, self._ends = array("q"), array("q"), array("d"), array("d")
        first = np.r_[True, r[1:] != r[:-1]]
        last = np.r_[first[1:], True]
        group = np.cumsum(first) - 1
        uniq = r[first]
        init_start, init_end = self._start[uniq][group], self._end[uniq][group]
        running = running_within(np.maximum, e, group)  # max of ends up to here
        before = np.r_[-np.inf, running[:-1]]
        before[first] = -np.inf
        before = np.maximum(before, init_end)  # open end before this transfer
        fresh = s > before * (1 + 1e-12) + 1e-15
        # open start after this transfer: the earliest start since the interval opened (a fresh
        # transfer opens one; a row's first transfer that joins continues the initial one)
        joins_initial = first & ~fresh
        earliest = np.where(joins_initial, np.minimum(s, init_start), s)
        after = running_within(np.minimum, earliest, np.cumsum(fresh | first))
        start_before = np.r_[0.0, after[:-1]]
        start_before[first] = init_start[first]
        closing = fresh & np.isfinite(before)
        if closing.any():
            self.emit(r[closing], start_before[closing], before[closing])
        self._start[uniq] = after[last]
        self._end[uniq] = np.maximum(init_end[last], running[last])

    def close(self) -> None:
        """Close every open interval (end of the run)."""
        self.flush()
        self._settle()
        rows = np.flatnonzero(np.isfinite(self._end))
        if len(rows):
            self.emit(rows, self._start[rows], self._end[rows])
        self._end[:] = -np.inf


def running_within(op, values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running maximum (op = np.maximum) or minimum (np.minimum) of `values` within each run of an
    ascending `group`, exactly: values become their ranks, offset per group so that one group's
    ranks never reach into the next one's, then accumulate in integers and map back."""
    if not len(values):
        return np.zeros(0)
    uniq, rank = np.unique(values, return_inverse=True)
    g = np.asarray(group, dtype=np.int64) - int(group[0])
    offset = (g if op is np.maximum else g[-1] - g) * len(uniq)
    return uniq[op.accumulate(offset + rank.ravel()) - offset]


def union(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge intervals into disjoint ones per group: returns (group, start, end), sorted."""
    if not len(group):
        return group, start, end
    order = np.lexsort((start, group))
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


class LinkTraffic:
    """Network observer: link bytes x per-link coefficients, into time bins per row.

    `rows[l, j]` / `coef[l, j]` (links x slots) say that a byte on link l adds `coef[l, j]` to row
    `rows[l, j]` (slots with coefficient 0 are unused). One `AdaptiveBins` per row set.

    Calls are buffered as they come and binned together once `batch_entries` (link, bytes) entries
    wait, or on `flush()`: per distinct (interval, row) the weighted bytes are summed, then spread in
    one call. `batch_entries=0` bins every call at once (the straightforward path, kept for tests).
    """

    def __init__(
        self, row_sets: list[tuple[np.ndarray, np.ndarray, AdaptiveBins]], flow_ends=None, batch_entries: int = 1 << 16
    ) -> None:
        self.row_sets = row_sets
        self.flow_ends = flow_ends  # optional callable(srcs, dsts, start_s, finish_s, step key or None)
        self.batch_entries = batch_entries
        self._bytes = 0.0
        self._chunks: list[tuple] = []
        self._entries = 0

    @property
    def bytes(self) -> float:
        """Bytes x links seen so far."""
        self.flush()
        return self._bytes

    def on_flows(
        self, srcs: list[str], dsts: list[str], start_s: float, finish_s: np.ndarray, key: Hashable = None
    ) -> None:
        if self.flow_ends is not None:
            self.flow_ends(srcs, dsts, start_s, finish_s, key)

    def on_links(self, t0: float, t1: float, link_bytes: np.ndarray) -> None:
        used = np.flatnonzero(link_bytes)
        if len(used):
            self._add((t0, t1, used, link_bytes[used], None), len(used))

    def on_subflows(
        self, t0: np.ndarray, t1: np.ndarray, flat: np.ndarray, lengths: np.ndarray, nbytes: np.ndarray
    ) -> None:
        """Sub-flow i moves nbytes[i] over its links (flat, by lengths) uniformly during [t0[i], t1[i]]."""
        if len(flat):  # copies: the network may reuse its arrays
            self._add(
                (
                    np.array(t0, dtype=float),
                    np.array(t1, dtype=float),
                    np.array(flat),
                    np.array(nbytes, dtype=float),
                    np.array(lengths, dtype=np.int64),
                ),
                len(flat),
            )

    def _add(self, chunk: tuple, entries: int) -> None:
        self._chunks.append(chunk)
        self._entries += entries
        if self._entries >= self.batch_entries:
            self.flush()

    def flush(self) -> None:
        """Bin everything buffered."""
        if not self._chunks:
            return
        chunks, self._chunks, self._entries = self._chunks, [], 0
        links = [c for c in chunks if c[4] is None]  # on_links: one interval, bytes per link
        subflows = [c for c in chunks if c[4] is not None]  # on_subflows: an interval per sub-flow
        if links:
            sizes = np.array([len(c[2]) for c in links])
            self._bin(
                np.array([c[0] for c in links], dtype=float),
                np.array([c[1] for c in links], dtype=float),
                np.repeat(np.arange(len(links)), sizes),
                np.concatenate([c[2] for c in links]),
                np.concatenate([c[3] for c in links]),
            )
        if subflows:
            lengths = np.concatenate([np.asarray(c[4], dtype=np.int64) for c in subflows])
            t0 = np.concatenate([np.broadcast_to(np.asarray(c[0], dtype=float), np.shape(c[4])) for c in subflows])
            t1 = np.concatenate([np.broadcast_to(np.asarray(c[1], dtype=float), np.shape(c[4])) for c in subflows])
            sub = np.repeat(np.arange(len(lengths)), lengths)
            nbytes = np.concatenate([np.asarray(c[3], dtype=float) for c in subflows])
            self._bin(t0, t1, sub, np.concatenate([c[2] for c in subflows]), nbytes[sub])

    def _bin(
        self, t0: np.ndarray, t1: np.ndarray, interval: np.ndarray, flat: np.ndarray, entry_bytes: np.ndarray
    ) -> None:
        """Entry i moves entry_bytes[i] over link flat[i] uniformly during interval interval[i]
        ([t0, t1] of it): weighted sums per distinct (timing, row), spread into the bins."""
        self._bytes += float(entry_bytes.sum())
        # intervals of equal timing (sub-flows of one transfer, mostly) are binned together
        u0, i0 = np.unique(t0, return_inverse=True)
        u1, i1 = np.unique(t1, return_inverse=True)
        pairs, pair_of = np.unique(i0.ravel() * len(u1) + i1.ravel(), return_inverse=True)
        starts, ends = u0[pairs // len(u1)], u1[pairs % len(u1)]
        interval = pair_of.ravel()[interval]
        for rows, coef, bins in self.row_sets:
            r, c = (
                np.take(rows, flat, axis=0),
                np.take(coef, flat, axis=0) * entry_bytes[:, None],
            )  # take: ~5x rows[flat]
            code = np.repeat(interval, rows.shape[1]) * bins.rows + r.ravel()
            if len(pairs) * bins.rows <= 4 * len(code) + 4096:
                sums = np.bincount(code, c.ravel(), minlength=len(pairs) * bins.rows)
                codes = np.flatnonzero(sums)
                sums = sums[codes]
            else:
                codes, inverse = np.unique(code, return_inverse=True)
                sums = np.bincount(inverse.ravel(), c.ravel(), minlength=len(codes))
            k = codes // bins.rows
            bins.spread(codes % bins.rows, starts[k], ends[k], sums)
