"""Members leaving their bundle clocks in one compiled call (numba): `BundleClocks.leave` of
sim/network/flow_clocks.py once its flow table fills compiled, which otherwise makes a dozen calls.

`leave` looks the members' (bundle, link) pairs up among the pairs' sorted codes, and where every
one is found there (the usual case: pairs are made when members join) it
1. takes the members off their clocks' counts,
2. takes their edge entries off their pairs (region_kernel's `apply_pairs`: one by one for a few,
   else summed per pair in entry order first),
3. pops the stale tops of the touched clocks' heaps and resets the emptied clocks (heap_kernel's
   `refresh`), and
4. times the touched clocks' heads again (region_kernel's `retime`),
the same kernels on the same arrays as the step-by-step path, in its order: the same counts, pairs,
heaps and times to the bit (tests/network/test_network_fast_paths.py runs both in lockstep). Where a
pair is not among the sorted codes (made since they were last sorted), it changes nothing and the
clocks go the step-by-step way, which finds such pairs in a Python dict.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from sim.network.flow_clocks import FEW_PAIR_ENTRIES
from sim.network.heap_kernel import refresh
from sim.network.links_kernel import drop_stale_cache
from sim.network.region_kernel import apply_pairs, retime

drop_stale_cache(Path(__file__), ("heap_kernel.py", "region_kernel.py", "flow_clocks.py"))  # FEW_PAIR_ENTRIES


@njit(cache=True, error_model="numpy")
def leave(  # pragma: no cover (compiled)
    bundles,
    owner,
    link,
    weight,
    num_links,
    sorted_codes,
    sorted_pairs,
    pair_weight,
    pair_count,
    count,
    head,
    rate,
    v,
    t,
    finish,
    due,
    heap_start,
    heap_size,
    pool_key,
    pool_slot,
    alive,
    clocked,
    member_key,
    done_bytes,
):
    """Members of `bundles` with edge entries (`owner` position, `link`, `weight`) leave (see the
    module docstring). Returns False, having changed nothing, where a pair is not among
    `sorted_codes` (bundle x num_links + link, ascending; `sorted_pairs` their pairs)."""
    m = len(link)
    index = np.empty(m, np.int64)
    n = len(sorted_codes)
    for j in range(m):  # `_pairs_of_codes`' lookup
        code = bundles[owner[j]] * num_links + link[j]
        if n == 0:
            return False
        pos = min(np.searchsorted(sorted_codes, code), n - 1)
        if sorted_codes[pos] != code:
            return False
        index[j] = sorted_pairs[pos]
    for b in bundles:
        count[b] -= 1
    if m:
        taken = np.empty(m)
        for j in range(m):
            taken[j] = -weight[j]
        apply_pairs(index, taken, -1, m <= FEW_PAIR_ENTRIES, pair_weight, pair_count)
    touched = np.unique(bundles)
    refresh(touched, count, head, rate, v, heap_start, heap_size, pool_key, pool_slot, alive, clocked, member_key, True)
    retime(touched, head, v, rate, t, count, finish, due, done_bytes)
    return True
