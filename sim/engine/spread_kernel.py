"""`AdaptiveBins.spread` compiled (numba), for calls with many amounts (sim/engine/link_traffic.py).

Spreading an amount uniformly over [t0, t1] adds to the bin holding t0 the part inside it (`first`),
to the bin holding t1 its part (`last`), and to every bin in between `density x width` through a
difference array (`rate`); an amount inside one bin, or at a point, goes to that bin whole. The numpy
path does this with a dozen temporaries and four `np.add.at` calls over up to millions of amounts
(the energy report of a 16K-GPU training run); here it is five passes over the amounts, adding in
the numpy path's order (points, then firsts, lasts, whole bins' rates up and down), so each bin
receives the same additions in the same order: the same sums to the last bit.

The energy report of a 16K-GPU training run spreads each representative GPU's activity segment once
per group of the devices it stands for (~830K segments, ~14M entries): `spread_fanout` spreads such
a *fan-out* (segments x the pairs of a CSR table, amount x the pair's scale) without building its
entries (gathered, they and the passes' temporaries took ~800 MB and ~3 s), the additions those
entries would make in the same order; `spread` is the fan-out of one entry per amount.

numba is imported when a run first spreads that many amounts at once (start-up); the compiled
code is cached beside this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def spread(direct, rate, bins, width, rows, t0, t1, amounts):  # pragma: no cover (compiled)
    """Add `amounts[i]` (none zero) to row `rows[i]` of `direct` (rows x bins, flat) spread over
    [t0[i], t1[i]] (inside the bins' span), whole bins through `rate` (rows x (bins + 1), flat):
    `spread_fanout` of one entry per amount (scaled by 1.0: the same amounts)."""
    n = len(amounts)
    one = np.arange(n + 1)
    spread_fanout(direct, rate, bins, width, t0, t1, amounts, one, one, rows, np.ones(n), np.ones(0, np.bool_), False)


@njit(cache=True)
def fanout_extent(t1, amount, key, ptr, scale, mask, masked):  # pragma: no cover (compiled)
    """(number of, latest end of) the entries of a fan-out (`spread_fanout`) whose amount is not 0."""
    kept = 0
    end = -np.inf
    for s in range(len(amount)):
        k = key[s]
        for p in range(ptr[k], ptr[k + 1]):
            if (not masked or mask[p]) and amount[s] * scale[p] != 0:
                kept += 1
                end = max(end, t1[s])
    return kept, end


@njit(cache=True)
def spread_fanout(direct, rate, bins, width, t0, t1, amount, key, ptr, row, scale, mask, masked):  # pragma: no cover
    """Spread the entries of a fan-out: per segment s (interval [t0[s], t1[s]], `amount[s]`) and per
    pair p of its key (ptr[key[s]] .. ptr[key[s] + 1], only those with mask[p] when `masked`), the
    amount amount[s] x scale[p] into row row[p], the entries segment-major, those of amount 0 left
    out (`AdaptiveBins.spread` of them: the same additions to every bin in the same order, without
    building the entries). Five passes over the entries: points, firsts, lasts, whole bins' rates up
    and down."""
    n = len(amount)
    lo = np.empty(n, np.int64)
    hi = np.empty(n, np.int64)
    point = np.empty(n, np.bool_)  # the whole amount in one bin
    length = np.empty(n)
    for s in range(n):
        lo[s] = min(np.int64(t0[s] / width), bins - 1)
        hi[s] = min(np.int64(t1[s] / width), bins - 1)
        length[s] = t1[s] - t0[s]
        point[s] = hi[s] == lo[s] or length[s] <= 0
    for step in range(5):  # points, firsts, lasts, whole bins' rates up, down: each a pass, in entry order
        for s in range(n):
            if point[s] != (step == 0) or (step >= 3 and hi[s] - lo[s] <= 1):
                continue
            k = key[s]
            for p in range(ptr[k], ptr[k + 1]):
                a = amount[s] * scale[p]
                if (masked and not mask[p]) or a == 0:
                    continue
                if step == 0:
                    direct[row[p] * bins + lo[s]] += a
                elif step == 1:
                    first = a / length[s] * ((lo[s] + 1) * width - t0[s])
                    direct[row[p] * bins + lo[s]] += first if first >= 0.0 else 0.0
                elif step == 2:
                    last = a / length[s] * (t1[s] - hi[s] * width)
                    direct[row[p] * bins + hi[s]] += last if last >= 0.0 else 0.0
                elif step == 3:
                    rate[row[p] * (bins + 1) + lo[s] + 1] += a / length[s] * width
                else:
                    rate[row[p] * (bins + 1) + hi[s]] += -(a / length[s] * width)


@njit(cache=True)
def row_sums(timing, flat, entry_bytes, rows, coef, n_timings, width, dense_max):  # pragma: no cover (compiled)
    """`link_traffic._spread_rows`' sums for `LinkTraffic._bin`: entry i moves `entry_bytes[i]` on link
    `flat[i]` in timing `timing[i]`; each of the link's slots j adds `coef[link, j] x bytes` to row
    `rows[link, j]`. Returns (code = timing x width + row, sum) of the codes whose sum is not 0, codes
    ascending, each sum added in entry order then slot order (the numpy path's `bincount` over the
    flattened entries): in a dense array of the codes where there are at most `dense_max`, else
    over the codes sorted stably."""
    n, slots = len(flat), rows.shape[1]
    m = n * slots
    if n_timings * width <= dense_max:
        dense = np.zeros(n_timings * width)
        for i in range(n):
            link, base = flat[i], timing[i] * width
            for j in range(slots):
                dense[base + rows[link, j]] += coef[link, j] * entry_bytes[i]
        k = 0
        for c in range(len(dense)):
            k += dense[c] != 0
        codes = np.empty(k, np.int64)
        sums = np.empty(k)
        k = 0
        for c in range(len(dense)):
            if dense[c] != 0:
                codes[k], sums[k] = c, dense[c]
                k += 1
        return codes, sums
    code = np.empty(m, np.int64)
    amount = np.empty(m)
    for i in range(n):
        link, base = flat[i], timing[i] * width
        for j in range(slots):
            code[i * slots + j] = base + rows[link, j]
            amount[i * slots + j] = coef[link, j] * entry_bytes[i]
    order = np.argsort(code, kind="mergesort")
    codes = np.empty(m, np.int64)
    sums = np.empty(m)
    k = -1
    for q in range(m):
        e = order[q]
        if k < 0 or code[e] != codes[k]:
            k += 1
            codes[k], sums[k] = code[e], 0.0
        sums[k] += amount[e]
    keep = 0
    for q in range(k + 1):
        if sums[q] != 0:
            codes[keep], sums[keep] = codes[q], sums[q]
            keep += 1
    return codes[:keep].copy(), sums[:keep].copy()
