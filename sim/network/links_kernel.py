"""Whether any of a set of links is in use, compiled (numba): `FlowNetwork._alone` for large sets.

Before it replays a collective's schedule the flow network asks whether any of its links carries a
live flow, awaits an arriving one, or is claimed by a replayed or recorded step. A 16K-GPU training
run asks this ~200K times an iteration, about 270 links each (a TP ring's NVLink ports): as three
numpy gathers and reductions ~8 us a time, here one pass that stops at the first link in use.

numba is imported by the caller only once the flow table has loaded it for its fillings
(sim/network/filling_kernel.py), so a small run never pays the import; the compiled code is cached
beside this module.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def any_in_use(links, entries, arriving, claimant):  # pragma: no cover (compiled)
    """Whether some link of `links` has `entries` or `arriving` non-zero or `claimant` >= 0 (all int64)."""
    for link in links:
        if entries[link] != 0 or arriving[link] != 0 or claimant[link] >= 0:
            return True
    return False
