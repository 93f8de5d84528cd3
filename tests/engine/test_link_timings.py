"""`_timings` (sim/engine/link_traffic.py) groups the intervals that link traffic bins by their
(start, end): the distinct timings in sorted order and each entry's timing. Intervals mostly come in
runs of one timing (a transfer's sub-flows); long runs are coded run by run. The result is the same
as coding every interval, whatever the runs."""

from __future__ import annotations

import numpy as np
import pytest

import sim.engine.link_traffic as link_traffic
from sim.engine.link_traffic import _timings


def intervals_in_runs(seed: int, runs: int, longest: int):
    """`runs` runs of 1..longest intervals of one timing each; timings repeat across runs."""
    rng = np.random.default_rng(seed)
    timings = rng.uniform(0, 10, (max(1, runs // 3), 2))
    timings[:, 1] += timings[:, 0]
    chosen = timings[rng.integers(0, len(timings), runs)]
    lengths = rng.integers(1, longest + 1, runs)
    t0, t1 = np.repeat(chosen[:, 0], lengths), np.repeat(chosen[:, 1], lengths)
    interval = rng.integers(0, len(t0), 3 * len(t0))  # entries (e.g. link entries) of intervals
    return t0, t1, interval


def coded_one_by_one(t0, t1, interval):
    """Every interval coded on its own: the reference."""
    u0, i0 = np.unique(t0, return_inverse=True)
    u1, i1 = np.unique(t1, return_inverse=True)
    pairs, pair_of = np.unique(i0 * len(u1) + i1, return_inverse=True)
    return u0[pairs // len(u1)], u1[pairs % len(u1)], pair_of[interval], len(pairs)


@pytest.mark.parametrize("seed, runs, longest", [(0, 50, 400), (1, 300, 2), (2, 1000, 1), (3, 5, 1000), (4, 1, 70)])
def test_timings_coded_by_runs_are_those_coded_one_by_one(seed, runs, longest):
    t0, t1, interval = intervals_in_runs(seed, runs, longest)
    starts, ends, timing, n = _timings(t0, t1, interval)
    ref_starts, ref_ends, ref_timing, ref_n = coded_one_by_one(t0, t1, interval)
    assert n == ref_n == len(starts) == len(ends)
    assert starts.tolist() == ref_starts.tolist() and ends.tolist() == ref_ends.tolist()
    assert timing.tolist() == ref_timing.tolist()
    assert (starts[timing] == t0[interval]).all() and (ends[timing] == t1[interval]).all()


@pytest.mark.parametrize("seed, reports, links, starts", [(0, 27, 2500, 40), (1, 200, 100, 10_000), (2, 400, 3, 5)])
def test_rate_reports_ending_together_are_coded_as_one_by_one(seed, reports, links, starts):
    """A flow network reports, at each rate update, one interval per link whose rate changed: all
    end now, each starts when its link's rate was last reported (one of `starts` earlier instants).
    Ends come in long runs, starts do not: the ends' runs are coded run by run and the (start, end)
    pairs marked in a dense array where few are possible, else sorted; the same coding either way."""
    rng = np.random.default_rng(seed)
    ends = np.sort(rng.uniform(5, 10, reports))
    earlier = rng.uniform(0, 5, starts)
    t1 = np.repeat(ends, links)
    t0 = earlier[rng.integers(0, starts, len(t1))]
    interval = rng.integers(0, len(t0), 2 * len(t0))
    got, expected = _timings(t0, t1, interval), coded_one_by_one(t0, t1, interval)
    assert [np.asarray(x).tolist() for x in got] == [np.asarray(x).tolist() for x in expected]


def test_short_inputs_are_coded_one_by_one(monkeypatch):
    t0, t1, interval = intervals_in_runs(5, 10, 3)
    monkeypatch.setattr(link_traffic, "_RUNS_MIN", 10**9)
    assert [np.asarray(x).tolist() for x in _timings(t0, t1, interval)] == [
        np.asarray(x).tolist() for x in coded_one_by_one(t0, t1, interval)
    ]


def test_repeated_ranges_index_each_part_tiled_its_number_of_times():
    from sim.engine.link_traffic import _repeated_ranges

    parts = [np.array([3.0, 1.0]), np.array([], dtype=float), np.array([7.0]), np.array([2.0, 5.0, 4.0])]
    times = np.array([2, 3, 0, 1])
    index = _repeated_ranges(np.array([len(p) for p in parts]), times)
    tiled = np.concatenate([np.tile(p, k) for p, k in zip(parts, times)])
    assert np.concatenate(parts)[index].tolist() == tiled.tolist() == [3.0, 1.0, 3.0, 1.0, 2.0, 5.0, 4.0]


def spread_over_distinct_codes(bins, starts, ends, n_timings, entry_timing, rows, amounts):
    """The reference: amounts summed per distinct (timing, row) code, in entry order, then spread."""
    code = entry_timing * bins.rows + rows
    codes, inverse = np.unique(code, return_inverse=True)
    sums = np.bincount(inverse, amounts, minlength=len(codes))
    k = codes // bins.rows
    bins.spread(codes % bins.rows, starts[k], ends[k], sums)


@pytest.mark.parametrize(
    "rows, used_rows, n_timings",
    [(4, 4, 50), (5000, 20, 300), (5000, 20, 3000), (5000, 900, 40)],  # dense, renumbered rows, sparse, sparse
)
def test_amounts_spread_per_timing_and_row_fill_the_bins_the_reference_fills(rows, used_rows, n_timings):
    from sim.engine.link_traffic import AdaptiveBins, _spread_rows

    rng = np.random.default_rng(rows + used_rows + n_timings)
    n = 1000
    starts = np.sort(rng.uniform(0, 5, n_timings))
    ends = starts + rng.choice([0.0, 1e-6, 0.3, 2.0], n_timings)
    entry_timing = rng.integers(0, n_timings, n)
    entry_row = rng.choice(rng.choice(rows, used_rows, replace=False), n)
    amounts = rng.uniform(0, 3, n) * (rng.random(n) > 0.05)
    amounts[:2] = [1e16, -1e16]  # rounding depends on the order of addition
    entry_timing[:2], entry_row[:2] = entry_timing[2], entry_row[2]
    fast, reference = AdaptiveBins(rows, 64), AdaptiveBins(rows, 64)
    _spread_rows(fast, starts, ends, n_timings, entry_timing, entry_row, amounts)
    spread_over_distinct_codes(reference, starts, ends, n_timings, entry_timing, entry_row, amounts)
    assert fast.width_s == reference.width_s
    assert fast._direct.tolist() == reference._direct.tolist() and fast._rate.tolist() == reference._rate.tolist()


@pytest.mark.parametrize("flows", [0, 1, 7, 8, link_traffic._FEW_ENDS, link_traffic._FEW_ENDS + 1, 1000])
def test_a_transfer_ends_when_its_last_flow_does_whatever_its_size(flows):
    """`LinkTraffic.on_flows` reports a transfer as (endpoints, start, its last flow's end): the
    largest of the flows' ends, found from a list for a few flows and by numpy beyond (the same
    value either way), or the start for a transfer of no flows."""
    seen = []
    traffic = link_traffic.LinkTraffic([], transfer_ends=seen.extend)
    ends = np.random.default_rng(flows).uniform(1.0, 2.0, flows)
    traffic.on_flows(["a"] * flows, ["b"] * flows, 0.5, ends, "step")
    expected = float(ends.max()) if flows else 0.5
    assert seen == [(["a"] * flows, ["b"] * flows, 0.5, expected, "step")]
    assert type(seen[0][3]) is float
