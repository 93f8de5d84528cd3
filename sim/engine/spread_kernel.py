"""`AdaptiveBins.spread` compiled (numba), for calls with many amounts (sim/engine/link_traffic.py).

Spreading an amount uniformly over [t0, t1] adds to the bin holding t0 the part inside it (`first`),
to the bin holding t1 its part (`last`), and to every bin in between `density x width` through a
difference array (`rate`); an amount inside one bin, or at a point, goes to that bin whole. The numpy
path does this with a dozen temporaries and four `np.add.at` calls over up to millions of amounts
(the energy report of a 16K-GPU training run); here it is five passes over the amounts, adding in
the numpy path's order (points, then firsts, lasts, whole bins' rates up and down), so each bin
receives the same additions in the same order: the same sums to the last bit.

numba is imported when a run first spreads that many amounts at once (start-up); the compiled
code is cached beside this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def spread(direct, rate, bins, width, rows, t0, t1, amounts):  # pragma: no cover (compiled)
    """Add `amounts[i]` (none zero) to row `rows[i]` of `direct` (rows x bins, flat) spread over
    [t0[i], t1[i]] (inside the bins' span), whole bins through `rate` (rows x (bins + 1), flat)."""
    n = len(amounts)
    lo = np.empty(n, np.int64)
    hi = np.empty(n, np.int64)
    point = np.empty(n, np.bool_)  # the whole amount in one bin
    density = np.empty(n)  # amount per second of the others
    for i in range(n):
        lo[i] = min(np.int64(t0[i] / width), bins - 1)
        hi[i] = min(np.int64(t1[i] / width), bins - 1)
        length = t1[i] - t0[i]
        point[i] = hi[i] == lo[i] or length <= 0
        density[i] = 0.0 if point[i] else amounts[i] / length
    for i in range(n):
        if point[i]:
            direct[rows[i] * bins + lo[i]] += amounts[i]
    for i in range(n):
        if not point[i]:
            first = density[i] * ((lo[i] + 1) * width - t0[i])
            direct[rows[i] * bins + lo[i]] += first if first >= 0.0 else 0.0
    for i in range(n):
        if not point[i]:
            last = density[i] * (t1[i] - hi[i] * width)
            direct[rows[i] * bins + hi[i]] += last if last >= 0.0 else 0.0
    for i in range(n):
        if not point[i] and hi[i] - lo[i] > 1:
            rate[rows[i] * (bins + 1) + lo[i] + 1] += density[i] * width
    for i in range(n):
        if not point[i] and hi[i] - lo[i] > 1:
            rate[rows[i] * (bins + 1) + hi[i]] += -(density[i] * width)


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
