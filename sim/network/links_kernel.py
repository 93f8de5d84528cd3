"""Per-link passes of the flow network, compiled (numba): whether any of a set of links is in use
(`any_in_use`) and the bytes and busy time an update adds to every link (`advance`).

Before it replays a collective's schedule the flow network asks whether any of its links carries a
live flow, awaits an arriving one, or is claimed by a replayed or recorded step. A 16K-GPU training
run asks this ~200K times an iteration, about 270 links each (a TP ring's NVLink ports): as three
numpy gathers and reductions ~8 us a time, here one pass that stops at the first link in use.

At every update the flow network adds what each link moved since the last (`FlowNetwork._advance`):
as numpy calls, a product, two masks and two masked additions over every link (~10 us on a
mid-size cluster, ~100K times a run); here one pass over the links the flow table lists as in use
(`FlowSlots.listed_links`: every link with entries or a rate, a few thousand of a 16K-GPU Clos's
100K), the same additions to the bit: a link off the list has no entries and no rate, where the
masked additions add nothing. The pass drops from the list the links it finds idle; `enlist` puts
a new flow's links on it (a large table's flows: one pass, no sort for distinct links).

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


@njit(cache=True)
def advance(rate, entries, link_bytes, busy_s, dt, listed_links, n_listed, listed):  # pragma: no cover (compiled)
    """Per link of the first `n_listed` of `listed_links`: `link_bytes += rate * dt` where `rate` is
    not 0, `busy_s += dt` where `entries` > 0 (`np.add(..., where=...)`'s additions, element by
    element: the same to the bit). A link with neither leaves the list (swapped with its last, its
    `listed` flag cleared); returns the list's new length."""
    i = 0
    while i < n_listed:
        link = listed_links[i]
        r = rate[link]
        if r != 0:
            link_bytes[link] += r * dt
        if entries[link] > 0:
            busy_s[link] += dt
        elif r == 0:
            n_listed -= 1
            listed_links[i] = listed_links[n_listed]
            listed[link] = False
            continue
        i += 1
    return n_listed


@njit(cache=True)
def enlist(links, listed, listed_links, n_listed):  # pragma: no cover (compiled)
    """Put each link of `links` not `listed` at the end of `listed_links` (once: flagged as it goes);
    returns the list's new length."""
    for link in links:
        if not listed[link]:
            listed[link] = True
            listed_links[n_listed] = link
            n_listed += 1
    return n_listed
