"""`union` of many intervals compiled (numba), for the energy report's merges of millions of spans
(sim/engine/activity.py).

Once the intervals are sorted by group then start (`np.lexsort`, still numpy), merging them is one
pass: an interval opens a new merged one where its group starts or its start lies past the running
reach of the ends before it; a merged interval ends at the largest end among its intervals. The
numpy path takes a dozen temporaries of the intervals' size for that (a 1,024-GPU embedding
iteration's report merges 2M intervals: ~150 MB of fresh arrays); here the pass reads the intervals
through the sort order and writes only the merged ones. It makes the numpy path's floating-point
operations in its order - offsets `rank x span - smallest start`, reach the running maximum of `end
+ offset` (`np.maximum`'s choice of the first of equal values), a merged end the running maximum of
its ends from the first - so the merged intervals are the same to the last bit
(tests/energy/test_activity_sweep.py compares both).

numba is imported when a run first merges that many intervals at once; the compiled code is cached
beside this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def merge_sorted(order, group, start, end):  # pragma: no cover (compiled)
    """(group, start, end) of the disjoint intervals merged from intervals `order[0]`, `order[1]`, ...
    (sorted by group, then start); `activity._union`'s merge of them."""
    n = len(order)
    lowest, highest = np.min(start), np.max(end)
    width = highest - lowest
    span = (1.0 if 1.0 > width else width) * 2.0  # Python's max(width, 1.0)
    out_group = np.empty(n, group.dtype)
    out_start = np.empty(n, start.dtype)
    out_end = np.empty(n, end.dtype)
    m = -1
    rank = -1
    reach = 0.0
    previous = 0
    for i in range(n):
        k = order[i]
        g, s, e = group[k], start[k], end[k]
        new_group = i == 0 or g != previous
        if new_group:
            rank += 1
        offset = rank * span - lowest
        opens = new_group or s + offset > reach
        value = e + offset
        if i == 0 or not (reach >= value or reach != reach):  # np.maximum.accumulate: keeps the
            reach = value  # first of equal values, and NaN
        if opens:
            m += 1
            out_group[m], out_start[m], out_end[m] = g, s, e
        elif not (out_end[m] >= e or out_end[m] != out_end[m]):  # np.maximum.reduceat, as above
            out_end[m] = e
        previous = g
    m += 1
    return out_group[:m].copy(), out_start[:m].copy(), out_end[:m].copy()
