"""Exact activity accounting during a run, independent of the span recorder's cap.

Two observers, attached before the run (sim/energy.py does it), see everything as it happens:

- `SpanActivity` sees every span the recorder is given (kept or dropped past its `limit`) and keeps,
  per key (component, track, category), the busy intervals merged into disjoint ones (buffered
  and merged in vectorised batches): back-to-back kernels and overlapping flows collapse into one
  interval, so memory grows with the number of separate bursts of activity, not with the number
  of spans. It also keeps `units`-weighted busy time (e.g. CPU cores x seconds) per key, for
  keys whose spans overlap by design. `union()` merges intervals into disjoint ones per group.
- `LinkTraffic` sees every byte the network moves (`on_links` from the flow backend at each rate
  update, `on_subflows` from the analytical backend per transfer), weights it per link by sparse
  coefficients (e.g. joules per byte for the NIC and the switches a link touches) and accumulates
  the weighted amounts into time bins per row (e.g. per power class and per host).

`AdaptiveBins` holds amounts (e.g. joules) over time in a fixed number of equal bins whose width
doubles - adjacent pairs merge - whenever something lands past the end, so any run length fits
and the totals stay exact. An amount spread over [t0, t1] is split uniformly over the bins it
covers (partial bins directly, whole bins through a running difference array: O(1) per interval).
"""
from __future__ import annotations

from array import array

import numpy as np

MIN_BIN_S = 2.0 ** -30          # ~1 ns: the initial bin width


class AdaptiveBins:
    """`rows` x `bins` amounts over [0, bins x width_s); the width doubles as time grows."""

    def __init__(self, rows: int, bins: int, width_s: float = MIN_BIN_S) -> None:
        if bins < 2 or bins % 2:
            raise ValueError("bins must be an even number >= 2")
        self.rows, self.bins, self.width_s = rows, bins, width_s
        self._direct = np.zeros((rows, bins))
        self._rate = np.zeros((rows, bins + 1))      # difference array of per-bin amounts of whole bins

    def fit(self, t_end: float) -> None:
        """Coarsen until [0, t_end] lies inside the bins (t_end < bins x width)."""
        while t_end >= self.bins * self.width_s:
            values = self.values()
            half = values.reshape(self.rows, self.bins // 2, 2).sum(axis=2)
            self._direct = np.zeros((self.rows, self.bins))
            self._direct[:, : self.bins // 2] = half
            self._rate[:] = 0.0
            self.width_s *= 2.0

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
        rows, amounts, t0, t1 = rows[keep], amounts[keep], t0[keep], t1[keep]
        self.fit(float(t1.max()))
        w = self.width_s
        lo = np.minimum((t0 / w).astype(np.int64), self.bins - 1)
        hi = np.minimum((t1 / w).astype(np.int64), self.bins - 1)
        length = t1 - t0
        point = (hi == lo) | (length <= 0)
        flat = self._direct.reshape(-1)
        if point.any():
            np.add.at(flat, rows[point] * self.bins + lo[point], amounts[point])
        span = ~point
        if not span.any():
            return
        r, a, b, lo, hi, density = rows[span], t0[span], t1[span], lo[span], hi[span], amounts[span] / length[span]
        first = np.clip(density * ((lo + 1) * w - a), 0.0, None)
        last = np.clip(density * (b - hi * w), 0.0, None)
        np.add.at(flat, r * self.bins + lo, first)
        np.add.at(flat, r * self.bins + hi, last)
        middle = hi - lo > 1
        if middle.any():
            rate = self._rate.reshape(-1)
            stride = self.bins + 1
            np.add.at(rate, r[middle] * stride + lo[middle] + 1, density[middle] * w)
            np.add.at(rate, r[middle] * stride + hi[middle], -density[middle] * w)

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
        self._buf_key, self._buf_start, self._buf_end, self._buf_units = array("i"), array("d"), array("d"), array("d")
        self._key = np.zeros(0, dtype=np.int64)          # merged intervals (disjoint per key), sorted
        self._start = np.zeros(0)
        self._end = np.zeros(0)
        self._unit_s = np.zeros(0)
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []     # from add_many
        self._chunk_len = 0
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
        self._chunks.append((key_ids, np.broadcast_to(np.asarray(start_s, dtype=float), key_ids.shape).copy(),
                             np.broadcast_to(np.asarray(end_s, dtype=float), key_ids.shape).copy()))
        self._chunk_len += len(key_ids)
        if self._chunk_len >= self._next:
            self._merge()

    def __call__(self, component: str, track: str, category: str, start_s: float, end_s: float,
                 units: float = 1.0) -> None:
        key = (component, track, category)
        k = self._key_id.get(key)                       # hot path: one dict lookup per span
        if k is None:
            k = self.key_id(key)
        self._buf_key.append(k)
        self._buf_start.append(start_s)
        self._buf_end.append(end_s)
        self._buf_units.append(units)
        if len(self._buf_key) >= self._next:
            self._merge()

    def _merge(self) -> None:
        """Fold the buffered spans into the merged intervals (amortised: the batch grows with them)."""
        if not len(self._buf_key) and not self._chunks:
            return
        k = np.frombuffer(self._buf_key, dtype=np.int32).astype(np.int64)
        s, e, u = (np.frombuffer(b).copy() for b in (self._buf_start, self._buf_end, self._buf_units))
        self.spans += len(k)                             # recorder spans (not add_many intervals)
        if self._chunks:
            k = np.concatenate([k, *(c[0] for c in self._chunks)])
            s = np.concatenate([s, *(c[1] for c in self._chunks)])
            e = np.concatenate([e, *(c[2] for c in self._chunks)])
            u = np.r_[u, np.ones(self._chunk_len)]
            self._chunks, self._chunk_len = [], 0
        busy = e > s
        unit_s = np.bincount(k[busy], (u * (e - s))[busy], minlength=len(self.keys))
        unit_s[: len(self._unit_s)] += self._unit_s
        self._unit_s = unit_s
        self._key, self._start, self._end = union(np.r_[self._key, k[busy]], np.r_[self._start, s[busy]],
                                                  np.r_[self._end, e[busy]])
        self._buf_key, self._buf_start, self._buf_end, self._buf_units = array("i"), array("d"), array("d"), array("d")
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
    """

    def __init__(self, row_sets: list[tuple[np.ndarray, np.ndarray, AdaptiveBins]], flow_ends=None) -> None:
        self.row_sets = row_sets
        self.flow_ends = flow_ends          # optional callable(srcs, dsts, start_s, finish_s)
        self.bytes = 0.0

    def on_flows(self, srcs, dsts, start_s: float, finish_s: np.ndarray) -> None:
        if self.flow_ends is not None:
            self.flow_ends(srcs, dsts, start_s, finish_s)

    def on_links(self, t0: float, t1: float, link_bytes: np.ndarray) -> None:
        used = np.flatnonzero(link_bytes)
        if not len(used):
            return
        self.bytes += float(link_bytes[used].sum())
        moved = link_bytes[used]
        for rows, coef, bins in self.row_sets:
            amounts = np.bincount(rows[used].ravel(), (coef[used] * moved[:, None]).ravel(), minlength=bins.rows)
            bins.spread_interval(t0, t1, amounts)

    def on_subflows(self, t0: np.ndarray, t1: np.ndarray, flat: np.ndarray, lengths: np.ndarray,
                    nbytes: np.ndarray) -> None:
        """Sub-flow i moves nbytes[i] over its links (flat, by lengths) uniformly during [t0[i], t1[i]]."""
        if not len(flat):
            return
        self.bytes += float(np.dot(nbytes, lengths))
        sub = np.repeat(np.arange(len(lengths)), lengths)
        # sub-flows of one transfer mostly share their timing: sum per (interval, row), then spread
        u0, i0 = np.unique(t0, return_inverse=True)
        u1, i1 = np.unique(t1, return_inverse=True)
        pair = i0.ravel() * len(u1) + i1.ravel()
        pairs, interval = np.unique(pair, return_inverse=True)
        starts, ends = u0[pairs // len(u1)], u1[pairs % len(u1)]
        interval = interval.ravel()[sub]
        per_link_bytes = nbytes[sub]
        for rows, coef, bins in self.row_sets:
            r, c = rows[flat], coef[flat] * per_link_bytes[:, None]
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
