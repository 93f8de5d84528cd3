"""The (segment, group) entries of the energy report's coarse spread, gathered compiled (numba).

A representative GPU's activity segment is spread into the coarse bins once per group (host or pool)
holding devices it stands for, scaled by their number (`EnergyMeter._spread_gpu`, the CSR pairs of
`_class_members`). A 16K-GPU training run has ~830K segments and ~14M such entries: gathered with
numpy (repeats, aranges and five fancy-indexed takes of 14M elements) that took ~1.5 s; here it is
one pass that writes each entry's row, interval and amount.

The entries are the numpy path's, in its order and value for value (`amount x count` per entry, the
same product); `AdaptiveBins.spread` then spreads them either way. numba is imported when a run
first has that many entries (start-up); the compiled code is cached beside this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def gather_pairs(t0, t1, amount, dev_seg, ptr, pair_group, pair_count, pair_on_host, hosted_only):  # pragma: no cover
    """(rows, t0, t1, amounts) of every (segment s, pair p) with p in ptr[dev_seg[s]] ..
    ptr[dev_seg[s] + 1], segment-major: row pair_group[p], amount[s] x pair_count[p]; with
    `hosted_only`, only the pairs with pair_on_host[p]."""
    n = len(t0)
    m = 0
    for s in range(n):
        d = dev_seg[s]
        for p in range(ptr[d], ptr[d + 1]):
            if not hosted_only or pair_on_host[p]:
                m += 1
    rows = np.empty(m, np.int64)
    a = np.empty(m)
    b = np.empty(m)
    amounts = np.empty(m)
    k = 0
    for s in range(n):
        d = dev_seg[s]
        for p in range(ptr[d], ptr[d + 1]):
            if not hosted_only or pair_on_host[p]:
                rows[k] = pair_group[p]
                a[k] = t0[s]
                b[k] = t1[s]
                amounts[k] = amount[s] * pair_count[p]
                k += 1
    return rows, a, b, amounts
