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

A refill's per-link steps (residual capacity, loads, new rates: sim/network/refill_kernel.py) run on
the links its entries touch or on every link (`every`: where the entries are many, a pass in order,
which the compiler vectorises, costs less than reaching the links one by one): `fill_on`, `add_on`,
`residual_on`, `rates_on`.

numba is imported by the caller only once the flow table has loaded it for its fillings
(sim/network/filling_kernel.py), so a small run never pays the import; the compiled code is cached
beside this module (`drop_stale_cache` for the modules whose kernels compile these in).
"""

from __future__ import annotations

from pathlib import Path

from numba import njit


def drop_stale_cache(module: Path, compiled_in: tuple[str, ...]) -> bool:
    """numba drops a cached kernel when the file that defines it changes, not when a file whose
    kernels it calls does: drop `module`'s cache (its `__pycache__` index and data files) when one of
    `compiled_in` (beside it) is newer than it. Returns whether it did. (A cache numba keeps
    elsewhere - NUMBA_CACHE_DIR, or a user cache beside a read-only install - is left alone: there the
    sources do not change.)"""
    cache = module.parent / "__pycache__"
    try:
        index = list(cache.glob(f"{module.stem}.*.nbi"))
        newest = max((module.parent / name).stat().st_mtime for name in compiled_in)
        if not index or newest <= min(p.stat().st_mtime for p in index):
            return False
        for stale in cache.glob(f"{module.stem}.*.nb[ic]"):
            stale.unlink(missing_ok=True)
    except OSError:  # unreadable or read-only: nothing to drop here
        return False
    return True


@njit(cache=True)
def fill_on(values, value, touched, every):  # pragma: no cover (compiled)
    """values[link] = value on the links of `touched` (on every link where `every`)."""
    if every:
        values[:] = value
    else:
        for link in touched:
            values[link] = value


@njit(cache=True)
def add_on(values, more, touched, every):  # pragma: no cover (compiled)
    """values[link] += more[link] on the links of `touched` (on every link where `every`)."""
    if every:
        for link in range(len(values)):
            values[link] += more[link]
    else:
        for link in touched:
            values[link] += more[link]


@njit(cache=True)
def residual_on(residual, capacity, link_rate, old_load, touched, every):  # pragma: no cover (compiled)
    """residual = capacity - (link_rate - old_load): what other flows leave of each link, on the
    links of `touched` (on every link where `every`)."""
    if every:
        for link in range(len(residual)):
            residual[link] = capacity[link] - (link_rate[link] - old_load[link])
    else:
        for link in touched:
            residual[link] = capacity[link] - (link_rate[link] - old_load[link])


@njit(cache=True)
def rates_on(link_rate, old_load, new_load, whole, touched, every):  # pragma: no cover (compiled)
    """The links' new rates in place: the new load where the refill is `whole` (every live flow),
    else link_rate - old_load + new_load, on the links of `touched` (on every link where `every`)."""
    if every and whole:
        link_rate[:] = new_load
    elif every:
        for link in range(len(link_rate)):
            link_rate[link] = link_rate[link] - old_load[link] + new_load[link]
    elif whole:
        for link in touched:
            link_rate[link] = new_load[link]
    else:
        for link in touched:
            link_rate[link] = link_rate[link] - old_load[link] + new_load[link]


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
