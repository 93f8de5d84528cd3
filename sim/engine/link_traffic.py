"""Link traffic binned over time, exactly: the network side of activity accounting (spans: sim/engine/activity.py).

- `LinkTraffic` sees every byte the network moves (`on_links` from the flow backend at each rate
  update, `on_subflows` from the analytical backend per transfer), weights it per link by sparse
  coefficients (e.g. joules per byte for the NIC and the switches a link touches) and accumulates
  the weighted amounts into time bins per row (e.g. per power class and per host). It buffers what
  it is given and bins it in vectorised batches (`flush()`, also done before results are read):
  the same amounts per interval and row as binning each call at once, summed in another order
  (identical within float rounding; tests/workloads/test_workload_fast_paths.py compares both).
  A step replayed again and again (`on_step`, sim/network/flow.py) has its weighted amounts per row
  summed once (its *profile*) and reused at every replay.
- `AdaptiveBins` holds amounts (e.g. joules) over time in a fixed number of equal bins whose width
  doubles - adjacent pairs merge - whenever something lands past the end, so any run length fits
  and the totals stay exact. An amount spread over [t0, t1] is split uniformly over the bins it
  covers (partial bins directly, whole bins through a running difference array: O(1) per interval).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from sim.engine.codes import ranges

MIN_BIN_S = 2.0**-30  # ~1 ns: the initial bin width
_PROFILES_MAX = 16384  # step profiles kept (~1 KB each; bounded memory: a step seen again is profiled again)
# amounts from which one `AdaptiveBins.spread` runs compiled (sim/engine/spread_kernel.py): below,
# numpy costs less than loading numba (~0.35 s), which a small run then never does
COMPILED_SPREAD_MIN = 20_000
_RUNS_MIN = 64  # intervals from which `_timings` looks for runs of one timing
_FEW_ENDS = 64  # flows of a transfer whose last end `on_flows` finds by `max` of a list (faster up to ~70)
_DENSE_SUMS_MAX = 1 << 22  # (timing, row) codes summed in a dense array by `spread_kernel.row_sums` (32 MB)


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
        if len(amounts) >= COMPILED_SPREAD_MIN:
            from sim.engine.spread_kernel import spread  # numba: imported when first needed

            contiguous = np.ascontiguousarray
            spread(
                self._direct.reshape(-1),
                self._rate.reshape(-1),
                self.bins,
                float(w),
                contiguous(rows),
                contiguous(t0),
                contiguous(t1),
                contiguous(amounts),
            )
            return
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

    def spread_fanout(
        self,
        t0: np.ndarray,
        t1: np.ndarray,
        amount: np.ndarray,
        key: np.ndarray,
        ptr: np.ndarray,
        row: np.ndarray,
        scale: np.ndarray,
        mask: np.ndarray | None = None,
    ) -> None:
        """`spread` of a fan-out's entries, compiled, without building them: per segment s and per
        pair p of its key (ptr[key[s]] .. ptr[key[s] + 1], where mask[p] if a mask is given),
        amount[s] x scale[p] into row row[p] over [t0[s], t1[s]], segment-major
        (sim/engine/spread_kernel.py `spread_fanout`: the bins to the bit)."""
        from sim.engine.spread_kernel import fanout_extent, spread_fanout  # numba: imported when first needed

        masked = mask is not None
        flags = np.ascontiguousarray(mask, dtype=bool) if masked else np.ones(0, dtype=bool)
        arrays = (np.ascontiguousarray(key, dtype=np.int64), np.ascontiguousarray(ptr, dtype=np.int64))
        kept, end = fanout_extent(t1, amount, *arrays, scale, flags, masked)
        if not kept:
            return
        self.fit(float(end))
        direct, rate = self._direct.reshape(-1), self._rate.reshape(-1)
        spread_fanout(direct, rate, self.bins, float(self.width_s), t0, t1, amount, *arrays, row, scale, flags, masked)

    def spread_interval(self, t0: float, t1: float, amounts_per_row: np.ndarray) -> None:
        """Add a vector of per-row amounts, all spread over the same [t0, t1]."""
        rows = np.flatnonzero(amounts_per_row != 0)
        if len(rows):
            self.spread(rows, t0, t1, amounts_per_row[rows])


class SubflowBuffer:
    """Sub-flow reports (`on_subflows(t0, t1, flat, lengths, nbytes)`) kept in call order until
    taken, with their times per sub-flow. Arrays are copied (the network may reuse its arrays);
    Python lists, which the analytical backend's one-flow path hands over fresh for every
    transfer, are appended to running lists and turned into arrays once per `take` (a 400-worker
    ingestion run reports ~5M transfers an hour: a few numpy arrays per report cost more than the
    binning). `take` returns the same arrays whichever way the reports came."""

    def __init__(self) -> None:
        self.calls = 0
        self.entries = 0
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._lists: tuple[list, list, list, list, list] | None = None

    def add(self, t0, t1, flat, lengths, nbytes) -> None:
        """t0, t1, nbytes: one value per sub-flow (or one for all, as arrays); flat: the sub-flows'
        links, `lengths[i]` of them for sub-flow i."""
        self.calls += 1
        self.entries += len(flat)
        if type(flat) is list:  # fresh lists (one value per sub-flow): appended as they are
            if self._lists is None:
                self._lists = ([], [], [], [], [])
            for column, values in zip(self._lists, (t0, t1, flat, lengths, nbytes)):
                column.extend(values)
            return
        self._seal()
        lengths = np.array(lengths, dtype=np.int64)
        self._chunks.append(
            (
                _per_subflow(t0, lengths.shape),
                _per_subflow(t1, lengths.shape),
                np.array(flat, dtype=np.int64),
                lengths,
                np.array(nbytes, dtype=float).reshape(-1),
            )
        )

    def add_one(self, t0: float, t1: float, links: tuple[int, ...], nbytes: float) -> None:
        """`add([t0], [t1], list(links), [len(links)], [nbytes])`: one sub-flow, without the lists."""
        self.calls += 1
        self.entries += len(links)
        if self._lists is None:
            self._lists = ([], [], [], [], [])
        t0s, t1s, flat, lengths, sizes = self._lists
        t0s.append(t0)
        t1s.append(t1)
        flat.extend(links)
        lengths.append(len(links))
        sizes.append(nbytes)

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(t0, t1, nbytes per sub-flow, flat links, lengths) of every report so far, in order (None:
        none); the buffer is empty afterwards."""
        self._seal()
        if not self._chunks:
            return None
        chunks, self._chunks, self.calls, self.entries = self._chunks, [], 0, 0
        t0, t1, flat, lengths, nbytes = (
            columns[0] if len(chunks) == 1 else np.concatenate(columns) for columns in zip(*chunks)
        )
        return t0, t1, nbytes, flat, lengths

    def _seal(self) -> None:
        if self._lists is not None:
            t0, t1, flat, lengths, nbytes = self._lists
            self._lists = None
            self._chunks.append(
                (
                    np.array(t0, dtype=float),
                    np.array(t1, dtype=float),
                    np.array(flat, dtype=np.int64),
                    np.array(lengths, dtype=np.int64),
                    np.array(nbytes, dtype=float),
                )
            )


def _per_subflow(times, shape: tuple[int, ...]) -> np.ndarray:
    """Times as an array of one value per sub-flow (a copy)."""
    times = np.array(times, dtype=float)
    return times if times.shape == shape else np.broadcast_to(times, shape).copy()


class LinkTraffic:
    """Network observer: link bytes x per-link coefficients, into time bins per row.

    `rows[l, j]` / `coef[l, j]` (links x slots) say that a byte on link l adds `coef[l, j]` to row
    `rows[l, j]` (slots with coefficient 0 are unused). One `AdaptiveBins` per row set.

    Calls are buffered as they come and binned together once `batch_entries` (link, bytes) entries
    wait, or on `flush()`: per distinct (interval, row) the weighted bytes are summed, then spread in
    one call. `batch_entries=0` bins every call at once (the straightforward path, kept for tests).
    """

    def __init__(
        self,
        row_sets: list[tuple[np.ndarray, np.ndarray, AdaptiveBins]],
        transfer_ends=None,
        batch_entries: int = 1 << 16,
    ) -> None:
        self.row_sets = row_sets
        # optional callable([(srcs, dsts, start_s, end_s: the last flow's end, step key or None), ...]):
        # completed transfers, in the order they completed
        self.transfer_ends = transfer_ends
        self.batch_entries = batch_entries
        self._bytes = 0.0
        self._chunks: list[tuple] = []  # on_links reports
        self._subflows = SubflowBuffer()  # on_subflows reports
        self._stepped: list[tuple[np.ndarray, np.ndarray, np.ndarray, _Profile]] = []  # on_step: t0, t1, times, profile
        self._profiles: dict[Hashable, _Profile] = {}
        self._entries = 0

    @property
    def bytes(self) -> float:
        """Bytes x links seen so far."""
        self.flush()
        return self._bytes

    def on_flows(
        self, srcs: list[str], dsts: list[str], start_s: float, finish_s: np.ndarray, key: Hashable = None
    ) -> None:
        if self.transfer_ends is not None:
            n = len(finish_s)
            # the largest end (exact either way; a few: as a list, without numpy's ~2 us per call)
            end_s = (max(finish_s.tolist()) if n <= _FEW_ENDS else finish_s.max().item()) if n else start_s
            self.transfer_ends([(srcs, dsts, start_s, end_s, key)])

    def on_flows_until(self, srcs: list[str], dsts: list[str], start_s: float, end_s: float, key: Hashable) -> None:
        """`on_flows` of a transfer whose last flow ended at `end_s` (what `transfer_ends` needs of its
        flows' ends, given by a network that knows it without them: a replayed step)."""
        if self.transfer_ends is not None:  # `on_steps_until` of this one
            self.transfer_ends([(srcs, dsts, start_s, end_s, key)])

    def on_steps_until(self, steps: list[tuple[list[str], list[str], float, float, Hashable]]) -> None:
        """`on_flows_until(*step)` of each step in turn, in one call (a replayed schedule's steps)."""
        if self.transfer_ends is not None:
            self.transfer_ends(steps)

    def on_links(self, t0: float, t1: float, links: np.ndarray, link_bytes: np.ndarray) -> None:
        """`link_bytes[i]` moved on link `links[i]` (ascending ids) uniformly during [t0, t1]."""
        links, link_bytes = _moved(links, link_bytes)
        if len(links):
            self._add((t0, t1, links, link_bytes, None), len(links))

    def on_links_repeated(self, t0: np.ndarray, t1: np.ndarray, links: np.ndarray, link_bytes: np.ndarray) -> None:
        """`on_links(t0[i], t1[i], links, link_bytes)` for every i, as one buffered chunk (a replayed
        step or layer, sim/network/replay.py): the same entries, binned in another order."""
        links, link_bytes = _moved(links, link_bytes)
        if len(links) and len(t0):
            self._add(
                (np.asarray(t0, dtype=float), np.asarray(t1, dtype=float), links, link_bytes, None),
                len(links) * len(t0),
            )

    def on_step(
        self,
        t0: np.ndarray,
        t1: np.ndarray,
        step: Hashable,
        times: np.ndarray,
        links: np.ndarray,
        link_bytes: np.ndarray,
    ) -> None:
        """`on_links(t0[i], t1[i], links, times[i] x link_bytes)` for each i: runs of a recorded step
        (`times[i]` of them back to back during [t0[i], t1[i]]). `step` stands for the step's `links`
        and `link_bytes` (per run), which never change: its amounts per row are summed the first
        time and reused."""
        profile = self._profiles.get(step)
        if profile is None:
            if len(self._profiles) >= _PROFILES_MAX:
                self._profiles.clear()
            profile = self._profiles[step] = self._profile(links, link_bytes)
        self._stepped.append((np.asarray(t0, dtype=float), np.asarray(t1, dtype=float), np.asarray(times), profile))
        self._counted(profile.entries * len(t0))

    def _profile(self, links: np.ndarray, link_bytes: np.ndarray) -> _Profile:
        rows_amounts = []
        for rows, coef, _ in self.row_sets:
            r = np.take(rows, links, axis=0).ravel()
            c = (np.take(coef, links, axis=0) * np.asarray(link_bytes, dtype=float)[:, None]).ravel()
            used, inverse = np.unique(r, return_inverse=True)
            sums = np.bincount(inverse.ravel(), c, minlength=len(used))
            rows_amounts.append((used[sums != 0], sums[sums != 0]))
        return _Profile(rows_amounts, float(np.sum(link_bytes)))

    def on_subflows(
        self, t0: np.ndarray, t1: np.ndarray, flat: np.ndarray, lengths: np.ndarray, nbytes: np.ndarray
    ) -> None:
        """Sub-flow i moves nbytes[i] over its links (flat, by lengths) uniformly during [t0[i], t1[i]]
        (arrays, or fresh Python lists of one value per sub-flow: `SubflowBuffer`)."""
        if len(flat):
            self._subflows.add(t0, t1, flat, lengths, nbytes)
            self._counted(len(flat))

    def on_subflow(self, t0: float, t1: float, links: tuple[int, ...], nbytes: float) -> None:
        """`on_subflows` of one sub-flow (the analytical backend's one-path transfers)."""
        if links:
            self._subflows.add_one(t0, t1, links, nbytes)
            self._counted(len(links))

    def _add(self, chunk: tuple, entries: int) -> None:
        self._chunks.append(chunk)
        self._counted(entries)

    def _counted(self, entries: int) -> None:
        self._entries += entries
        if self._entries >= self.batch_entries:
            self.flush()

    def flush(self) -> None:
        """Bin everything buffered."""
        subflows = self._subflows.take()  # on_subflows: an interval per sub-flow
        links, self._chunks, self._entries = self._chunks, [], 0  # on_links: one interval, bytes per link
        if links and all(np.ndim(c[0]) == 0 for c in links):  # one interval per call
            sizes = np.array([len(c[2]) for c in links])
            self._bin(
                np.array([c[0] for c in links], dtype=float),
                np.array([c[1] for c in links], dtype=float),
                np.repeat(np.arange(len(links)), sizes),
                np.concatenate([c[2] for c in links]),
                np.concatenate([c[3] for c in links]),
            )
        elif links:  # repeated calls among them: interval-major entries of each chunk
            times = [np.atleast_1d(c[0]) for c in links]
            counts = np.array([len(t) for t in times])
            sizes = np.array([len(c[2]) for c in links])
            interval = np.repeat(np.arange(int(counts.sum())), np.repeat(sizes, counts))
            self._bin(
                np.concatenate(times),
                np.concatenate([np.atleast_1d(c[1]) for c in links]),
                interval,
                np.concatenate([np.tile(c[2], n) for c, n in zip(links, counts)]),
                np.concatenate([np.tile(c[3], n) for c, n in zip(links, counts)]),
            )
        if subflows is not None:
            t0, t1, nbytes, flat, lengths = subflows
            sub = np.repeat(np.arange(len(lengths)), lengths)
            self._bin(t0, t1, sub, flat, nbytes[sub])
        stepped, self._stepped = self._stepped, []
        if stepped:
            self._bytes += sum(float(times.sum()) * p.nbytes for _, _, times, p in stepped)
            runs = np.array([len(t0) for t0, _, _, _ in stepped])
            starts, ends, timing, n = _timings(
                np.concatenate([t0 for t0, _, _, _ in stepped]),
                np.concatenate([t1 for _, t1, _, _ in stepped]),
                np.arange(int(runs.sum())),
            )
            run_times = np.concatenate([t for _, _, t, _ in stepped]).astype(float)
            for i, (_, _, bins) in enumerate(self.row_sets):
                parts = [p.rows_amounts[i] for _, _, _, p in stepped]
                lengths = np.array([len(r) for r, _ in parts], dtype=np.int64)
                sizes = np.repeat(lengths, runs)  # entries per run
                each_run = _repeated_ranges(lengths, runs)  # each profile once per run of it
                rows = np.concatenate([r for r, _ in parts])[each_run]
                amounts = np.concatenate([a for _, a in parts])[each_run]
                _spread_rows(
                    bins, starts, ends, n, np.repeat(timing, sizes), rows, amounts * np.repeat(run_times, sizes)
                )

    def _bin(
        self, t0: np.ndarray, t1: np.ndarray, interval: np.ndarray, flat: np.ndarray, entry_bytes: np.ndarray
    ) -> None:
        """Entry i moves entry_bytes[i] over link flat[i] uniformly during interval interval[i]
        ([t0, t1] of it): weighted sums per distinct (timing, row), spread into the bins."""
        self._bytes += float(entry_bytes.sum())
        starts, ends, interval, n = _timings(t0, t1, interval)
        if len(flat) >= COMPILED_SPREAD_MIN:  # the same sums, compiled (sim/engine/spread_kernel.py)
            from sim.engine.spread_kernel import row_sums

            flat, interval = flat.astype(np.int64, copy=False), interval.astype(np.int64, copy=False)
            for rows, coef, bins in self.row_sets:
                dense = min(4 * len(flat) * rows.shape[1] + 4096, _DENSE_SUMS_MAX)  # as `_spread_rows`
                codes, sums = row_sums(interval, flat, entry_bytes, rows, coef, n, bins.rows, dense)
                k = codes // bins.rows
                bins.spread(codes % bins.rows, starts[k], ends[k], sums)
            return
        for rows, coef, bins in self.row_sets:
            r, c = (
                np.take(rows, flat, axis=0),
                np.take(coef, flat, axis=0) * entry_bytes[:, None],
            )  # take: ~5x rows[flat]
            _spread_rows(bins, starts, ends, n, np.repeat(interval, rows.shape[1]), r.ravel(), c.ravel())


class _Profile:
    """A recorded step's weighted amounts per row set: (rows, amounts) of one run, and its bytes."""

    __slots__ = ("rows_amounts", "nbytes", "entries")

    def __init__(self, rows_amounts: list[tuple[np.ndarray, np.ndarray]], nbytes: float) -> None:
        self.rows_amounts, self.nbytes = rows_amounts, nbytes
        self.entries = sum(len(r) for r, _ in rows_amounts)


def _repeated_ranges(lengths: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Indices into parts of `lengths` laid end to end, each part's range repeated `times[j]` times
    (`np.concatenate([np.tile(part_j, times[j]) ...])` as indices, without a call per part)."""
    return ranges(np.repeat(np.cumsum(lengths) - lengths, times), np.repeat(lengths, times))


def _timings(t0: np.ndarray, t1: np.ndarray, interval: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Intervals of equal timing (sub-flows of one transfer, mostly) binned together: (starts, ends)
    of the distinct timings, each entry's timing (`interval` mapped), their number.

    Intervals come in runs of one timing (a transfer's sub-flows, a rate update's flows): where runs
    are long, only each run's first interval is sorted (`np.unique` sorts; a 1,024-GPU all-to-all
    flushes ~65K intervals of ~200 runs at a time) and the runs' codes spread to their intervals.
    The distinct timings are the same either way: each is some run's first."""
    n = len(t0)
    if n > _RUNS_MIN:
        head = _run_heads(t0, t1)
        heads = np.flatnonzero(head)
        if 2 * len(heads) < n:
            starts, ends, run_timing, k = _timings(t0[heads], t1[heads], np.arange(len(heads)))
            run_of = np.cumsum(head) - 1  # each interval's run
            return starts, ends, run_timing[run_of[interval]], k
    u0, i0 = _distinct_sorted(t0)
    u1, i1 = _distinct_sorted(t1)
    code = i0 * len(u1) + i1
    if len(u0) * len(u1) <= 4 * n + 4096:  # few possible pairs: marked in a dense array, not sorted
        present = np.zeros(len(u0) * len(u1), dtype=bool)
        present[code] = True
        pairs = np.flatnonzero(present)
        pair_of = (np.cumsum(present) - 1)[code]
    else:
        pairs, pair_of = np.unique(code, return_inverse=True)
    return u0[pairs // len(u1)], u1[pairs % len(u1)], pair_of.ravel()[interval], len(pairs)


def _run_heads(*columns: np.ndarray) -> np.ndarray:
    """Per position: whether a run of equal values (in every column) starts there."""
    first = columns[0]
    head = np.empty(len(first), dtype=bool)
    head[0] = True
    np.not_equal(first[1:], first[:-1], out=head[1:])
    for column in columns[1:]:
        head[1:] |= column[1:] != column[:-1]
    return head


def _distinct_sorted(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)`; where values come in long runs (a rate update's
    intervals all end at once) only each run's first value is sorted and its code spread to the run."""
    n = len(values)
    if n > _RUNS_MIN:
        head = _run_heads(values)
        heads = np.flatnonzero(head)
        if 2 * len(heads) < n:
            distinct, inverse = np.unique(values[heads], return_inverse=True)
            return distinct, inverse.ravel()[np.cumsum(head) - 1]
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, inverse.ravel()


def _spread_rows(
    bins: AdaptiveBins,
    starts: np.ndarray,
    ends: np.ndarray,
    n_timings: int,
    entry_timing: np.ndarray,
    rows: np.ndarray,
    amounts: np.ndarray,
) -> None:
    """Amounts per (timing, row) summed, then spread into the bins in one call. Sums per (timing,
    row) code in a dense array where that is small (rows numbered among those used, where all
    rows would not fit), else over the distinct codes (sorted); either way each code's amounts
    are added in entry order and the codes come out in (timing, row) order: the same sums."""
    limit = 4 * len(rows) + 4096
    row_of: np.ndarray | None = None  # the row of each number, where rows are renumbered
    width = bins.rows
    if n_timings * width > limit:
        present = np.zeros(bins.rows, dtype=bool)
        present[rows] = True
        used = np.flatnonzero(present)
        if n_timings * len(used) <= limit:  # order kept: ranks ascend with rows
            row_of, width = used, len(used)
            rows = (np.cumsum(present) - 1)[rows]
    code = entry_timing * width + rows
    if n_timings * width <= limit:
        sums = np.bincount(code, amounts, minlength=n_timings * width)
        codes = np.flatnonzero(sums != 0)
        sums = sums[codes]
    else:
        codes, inverse = np.unique(code, return_inverse=True)
        sums = np.bincount(inverse.ravel(), amounts, minlength=len(codes))
    k = codes // width
    bins.spread(codes % width if row_of is None else row_of[codes % width], starts[k], ends[k], sums)


def _moved(links: np.ndarray, link_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries that moved bytes (copies: the network may reuse its arrays)."""
    link_bytes = np.asarray(link_bytes, dtype=float)
    moved = link_bytes != 0
    if moved.all():
        return np.array(links, dtype=np.int64), link_bytes.copy()
    return np.asarray(links, dtype=np.int64)[moved], link_bytes[moved]
