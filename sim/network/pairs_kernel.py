"""`BundleClocks.region_pairs` compiled (numba), for clocks with many pairs (sim/network/flow_clocks.py).

A bundled refill of the flow network takes, for the clocks in its region, their *pairs* (a
bundle's members' edge entries summed per link) in pair order. The numpy path scans every pair ever
made (a 1,024-GPU embedding iteration keeps ~63K, a third of them empty at a time) with a gather of
the region mask, a test, a `flatnonzero` and three gathers: ~0.3 ms per refill, ~7% of that run.
Here it is one pass over the pairs writing the selected ones out: the same pairs in the same order
(a selection: no arithmetic, so nothing to round).

numba is imported when a run first holds that many pairs (start-up: a small run never does); the
compiled code is cached beside this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def select_pairs(in_region, bundle, link, weight, count):  # pragma: no cover (compiled)
    """(bundle, link, weight) of the pairs whose bundle is in the region (`in_region[bundle]`) and
    whose count is non-zero, in pair order."""
    n = len(bundle)
    k = 0
    for i in range(n):
        if count[i] > 0 and in_region[bundle[i]]:
            k += 1
    out_bundle = np.empty(k, np.int64)
    out_link = np.empty(k, np.int64)
    out_weight = np.empty(k)
    j = 0
    for i in range(n):
        if count[i] > 0 and in_region[bundle[i]]:
            out_bundle[j] = bundle[i]
            out_link[j] = link[i]
            out_weight[j] = weight[i]
            j += 1
    return out_bundle, out_link, out_weight
