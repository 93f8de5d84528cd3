"""GPUs' open comm intervals, folded in vectorised batches with exact running extrema.

- `OpenIntervals` keeps, per row (a GPU, or a set of GPUs that a transfer occupies together), the
  interval during which it takes part in transfers (sim/energy/meter.py feeds it each transfer's
  row; it hands closed intervals to a `SpanActivity`, sim/engine/activity.py).
- `running_within` is the running maximum or minimum of values within each run of an ascending
  group, exact (values become ranks, offset per group, accumulated in integers): what folding the
  buffered transfers per GPU in call order needs.
"""

from __future__ import annotations

from array import array

import numpy as np

# a transfer starting no later than end x (1 + JOIN_REL) + JOIN_ABS joins an interval that ends at `end`
JOIN_REL, JOIN_ABS = 1e-12, 1e-15


class OpenIntervals:
    """Per row (a GPU or a GPU set): the open interval during which it takes part in transfers.

    A transfer makes its rows busy from `start_s` until `end_s`. One that starts no later than the
    row's open interval ends (within 1e-12 relative) joins it: the interval spans both (transfers
    are seen when they end, so one that started earlier can arrive after a later one); otherwise the
    open interval is closed - handed to `emit(rows, starts, ends)` - and a new one opened, so
    back-to-back steps of a collective keep one interval. Emitted intervals of a row may overlap
    (their union is what counts). Transfers are buffered and folded in vectorised batches: the
    intervals are those of folding every transfer in turn, in call order
    (tests/workloads/test_workload_fast_paths.py holds it to that). Rows can be added (`grow`).
    """

    def __init__(self, rows: int, emit, batch: int = 1 << 16) -> None:
        self._start = np.zeros(rows)
        self._end = np.full(rows, -np.inf)
        self.emit = emit
        self._batch = batch
        self._rows, self._counts = array("q"), array("q")
        self._starts, self._ends = array("d"), array("d")

    @property
    def start(self) -> np.ndarray:
        return self._start

    @property
    def end(self) -> np.ndarray:
        return self._end

    def grow(self) -> int:
        """Add a row (with no open interval); returns its index."""
        self._start = np.append(self._start, 0.0)
        self._end = np.append(self._end, -np.inf)
        return len(self._start) - 1

    def add(self, rows: list[int], start_s: float, end_s: float) -> None:
        """Distinct `rows` busy over [start_s, end_s] (buffered)."""
        self._rows.extend(rows)
        self._counts.append(len(rows))
        self._starts.append(start_s)
        self._ends.append(end_s)
        if len(self._rows) >= self._batch:
            self.flush()

    def flush(self) -> None:
        """Fold the buffered transfers, per row in call order: a row's open interval ends at the
        running maximum of its transfers' ends; a transfer starting past it closes it."""
        if not len(self._counts):
            return
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
        fresh = s > before * (1 + JOIN_REL) + JOIN_ABS
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
