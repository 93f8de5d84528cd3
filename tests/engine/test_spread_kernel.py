"""`AdaptiveBins.spread` (sim/engine/link_traffic.py) spreads amounts uniformly over intervals into
time bins; calls with many amounts run compiled (sim/engine/spread_kernel.py). Both paths give the
same bins to the last bit, and a spread keeps every amount (the bins sum to the amounts added).
So does `LinkTraffic`'s binning of many link entries at once, whose weighted sums per (timing, row)
are made compiled (`row_sums`)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.engine.link_traffic as link_traffic
from sim.engine.link_traffic import AdaptiveBins, LinkTraffic


def random_amounts(seed: int, n: int, rows: int):
    """Amounts over intervals: points, intervals inside one bin, across a few bins and across many,
    zero amounts, and starts on bin edges."""
    rng = np.random.default_rng(seed)
    t0 = rng.choice([rng.uniform(0, 50), 0.0, 1.0, 2.5], n) * rng.uniform(0.5, 1.0, n)
    span = rng.choice([0.0, 1e-9, 0.01, 0.7, 13.0], n)
    amounts = rng.uniform(0, 5, n) * (rng.random(n) > 0.1)
    return rng.integers(0, rows, n), t0, t0 + span, amounts


@pytest.mark.parametrize("seed", range(5))
def test_the_compiled_spread_fills_the_same_bins_as_numpy(seed, monkeypatch):
    rows, t0, t1, amounts = random_amounts(seed, 3000, rows=7)
    numpy_bins, compiled_bins = AdaptiveBins(7, 64), AdaptiveBins(7, 64)
    for lo in range(0, 3000, 1000):  # three calls: the bins coarsen between them
        part = slice(lo, lo + 1000)
        monkeypatch.setattr(link_traffic, "COMPILED_SPREAD_MIN", 10**9)
        numpy_bins.spread(rows[part], t0[part] * (1 + lo), t1[part] * (1 + lo), amounts[part])
        monkeypatch.setattr(link_traffic, "COMPILED_SPREAD_MIN", 0)
        compiled_bins.spread(rows[part], t0[part] * (1 + lo), t1[part] * (1 + lo), amounts[part])
    assert compiled_bins.width_s == numpy_bins.width_s
    assert compiled_bins._direct.tolist() == numpy_bins._direct.tolist()
    assert compiled_bins._rate.tolist() == numpy_bins._rate.tolist()
    assert compiled_bins.values().sum() == pytest.approx(amounts.sum(), rel=1e-9)


def test_one_amount_over_three_bins_goes_to_each_in_proportion(monkeypatch):
    """2.0 over [0.5, 3.5) with 1-second bins: 0.5 s in bin 0, whole bins 1 and 2, 0.5 s in bin 3."""
    monkeypatch.setattr(link_traffic, "COMPILED_SPREAD_MIN", 0)
    bins = AdaptiveBins(1, 8, width_s=1.0)
    bins.spread([0], [0.5], [3.5], [3.0])
    assert bins.values()[0].tolist() == [0.5, 1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dense", [True, False])
def test_link_traffic_sums_many_entries_compiled_into_the_same_bins_as_numpy(seed, dense, monkeypatch):
    """Sub-flows over links whose bytes weigh into 3 slots of rows (some slots unused: coefficient
    0), in runs of one timing and scattered timings, binned by two row sets: summed per (timing,
    row) compiled - in a dense array, or over the codes sorted where the dense array would be too
    large - or with numpy, the bins are the same to the last bit."""
    rng = np.random.default_rng(seed)
    links, n = 40, 3000
    row_sets = []
    for n_rows in (5, 23):
        rows = rng.integers(0, n_rows, (links, 3))
        coef = rng.uniform(0.1, 2.0, (links, 3)) * (rng.random((links, 3)) < 0.8)
        row_sets.append((rows, coef, n_rows))
    lengths = rng.integers(1, 4, n)
    flat = rng.integers(0, links, int(lengths.sum()))
    start = rng.choice(rng.uniform(0, 10, 50), n) if seed % 2 else np.repeat(rng.uniform(0, 10, 60), n // 60)
    end = start + rng.choice([0.0, 0.3, 2.0], n)
    nbytes = rng.uniform(1, 1e6, n)
    bins = {}
    for compiled in (False, True):
        monkeypatch.setattr(link_traffic, "COMPILED_SPREAD_MIN", 0 if compiled else 10**9)
        monkeypatch.setattr(link_traffic, "_DENSE_SUMS_MAX", 1 << 22 if dense else 0)
        traffic = LinkTraffic([(rows, coef, AdaptiveBins(r, 64)) for rows, coef, r in row_sets])
        for lo in range(0, n, 1000):
            part = slice(lo, lo + 1000)
            first = int(lengths[:lo].sum())
            links_of = flat[first : first + int(lengths[part].sum())]
            traffic.on_subflows(start[part], end[part], links_of, lengths[part], nbytes[part])
        traffic.flush()
        bins[compiled] = [b for _, _, b in traffic.row_sets]
    for plain, fast in zip(bins[False], bins[True]):
        assert fast.width_s == plain.width_s
        assert fast._direct.tobytes() == plain._direct.tobytes() and fast._rate.tobytes() == plain._rate.tobytes()


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_a_fanout_spreads_as_its_entries_built_and_spread(seed, masked):
    """`AdaptiveBins.spread_fanout` spreads segment s's amount x scale[p] into row row[p] for each
    pair p of its key (a CSR table; only masked-in pairs with a mask), segment-major, without
    building those entries: the bins (and their coarsening) are those of `spread` of the entries
    built, to the bit; entries of amount 0 are left out as `spread` leaves them out."""
    rng = np.random.default_rng(seed)
    keys, rows = 30, 9
    counts = rng.integers(0, 5, keys)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    row, scale = rng.integers(0, rows, ptr[-1]), rng.integers(0, 4, ptr[-1])
    mask = rng.random(ptr[-1]) < 0.6 if masked else None
    _, t0, t1, amount = random_amounts(seed, 2000, rows=1)
    key = rng.integers(0, keys, 2000)
    built = [
        (row[p], t0[s], t1[s], amount[s] * scale[p])
        for s in range(2000)
        for p in range(ptr[key[s]], ptr[key[s] + 1])
        if mask is None or mask[p]
    ]
    expected, fanned = AdaptiveBins(rows, 64), AdaptiveBins(rows, 64)
    for scale_t in (1.0, 40.0):  # the second call coarsens the bins
        expected.spread(*(np.array(column) * (scale_t if i in (1, 2) else 1) for i, column in enumerate(zip(*built))))
        fanned.spread_fanout(t0 * scale_t, t1 * scale_t, amount, key, ptr, row, scale, mask)
    assert fanned.width_s == expected.width_s > 64 * link_traffic.MIN_BIN_S
    assert fanned._direct.tolist() == expected._direct.tolist()
    assert fanned._rate.tolist() == expected._rate.tolist()
