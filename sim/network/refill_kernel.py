"""A large flow table's refill in one compiled call (numba): `FlowTable.recompute`'s steps from its
region to its rows' new rates, which sim/network/flow_table.py otherwise makes as a dozen calls.

`refill` takes the refill's water level and changed links and
1. picks the region: the loose flows at or above the level connected to a change
   (`FlowTable._affected`, region_kernel's `connected`) and the clocks at or above it
   (`BundleClocks.running`);
2. gathers its rows (region_kernel's `prepare`) and, unless the region is every live flow, the load
   they put on their links at their old rates and the capacity the others leave (`_prepare`);
3. fills them: bundled (filling_kernel's `bundled_fill`, when `attempt` and the bundles pay off) or
   row by row (`fill` over `_expanded`'s entries);
4. puts the new load on the links and the new rates onto the rows (region_kernel's `load`,
   `settle_rows`).
It stops before step 2 when the region has clocks but may not try the bundled filling, and before
step 4 when the bundled filling of a region with clocks fails (or does not apply): those clocks
must first be turned back into per-flow rows (`FlowTable._unclock`: their heaps are Python), and
the flow table refills the region row by row itself.

Each step calls the kernel the step-by-step path calls, on the same arrays, and the arithmetic in
between is the same element-wise operations (`capacity - (link_rate - old_load)`,
`link_rate - old_load + new_load`), so the rates, loads and times are the same to the last bit.
A row-by-row filling of a few entries, which the step-by-step path fills in plain Python, is
filled by `fill` here: the same rates to the last bit (tests/network/test_network_fast_paths.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from sim.network.filling_kernel import bundled_fill, fill
from sim.network.region_kernel import connected, load, prepare, settle_rows

# the files whose kernels (and constants) this module's kernels compile in
_COMPILED_IN = ("region_kernel.py", "filling_kernel.py", "max_min.py")


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


drop_stale_cache(Path(__file__), _COMPILED_IN)

NOTHING = 0  # no rate can change
UNCLOCK = 1  # the region has clocks but may not be filled bundled: stopped before gathering rows
FAILED = 2  # the bundled filling of a region with clocks failed or did not apply: nothing changed
REFILLED = 3  # rates, loads and times set


@njit(cache=True)
def _region(
    loose, low, changed, slot_bundle, slot_fresh, slot_rate, slot_start, slot_length, entry_link, link_bundled
):  # pragma: no cover (compiled)
    """The loose flows at or above `low` whose rate can change (`FlowTable._affected`), in slot order."""
    m = 0
    region = np.empty(len(loose), np.int64)
    singles = 0
    for i in range(len(loose)):
        f = loose[i]
        if slot_fresh[f] or slot_rate[f] >= low:
            region[m] = f
            m += 1
            if slot_bundle[f] < 0:
                singles += 1
    region = region[:m]
    if singles == 0:
        return region
    dirty = np.empty(len(link_bundled), np.bool_)
    for link in range(len(link_bundled)):
        dirty[link] = link_bundled[link] > 0
    for link in changed:
        dirty[link] = True
    single = np.empty(singles, np.int64)
    j = 0
    for i in range(m):
        if slot_bundle[region[i]] < 0:
            single[j] = region[i]
            j += 1
    hit = connected(single, slot_start, slot_length, entry_link, dirty)
    kept = np.empty(m, np.int64)
    k = 0
    j = 0
    for i in range(m):
        f = region[i]
        if slot_bundle[f] < 0:
            if hit[j]:
                kept[k] = f
                k += 1
            j += 1
        else:
            kept[k] = f
            k += 1
    return kept[:k]


@njit(cache=True)
def _running(clock_count, clock_rate, n_clocks, members, low):  # pragma: no cover (compiled)
    """Bundle ids of clocks with members at a rate of at least `low` (`BundleClocks.running`)."""
    if members == 0:
        return np.zeros(0, np.int64)
    out = np.empty(n_clocks, np.int64)
    k = 0
    for b in range(n_clocks):
        if clock_count[b] > 0 and clock_rate[b] >= low:
            out[k] = b
            k += 1
    return out[:k]


@njit(cache=True)
def _expanded(unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight):  # pragma: no cover (compiled)
    """(row, link, weight) of every entry of the rows (`FlowTable._expanded`): each bundled row's
    shared entries (its unit's, `u_row` ascending), then the edge entries."""
    if len(unit) == 0:
        return e_row, e_link, e_weight
    u_len = np.zeros(units, np.int64)
    for j in range(len(u_row)):
        u_len[u_row[j]] += 1
    u_first = np.zeros(units, np.int64)
    for u in range(1, units):
        u_first[u] = u_first[u - 1] + u_len[u - 1]
    total = len(e_link)
    for i in range(len(unit)):
        total += u_len[unit[i]]
    row = np.empty(total, np.int64)
    link = np.empty(total, np.int64)
    weight = np.empty(total)
    j = 0
    for i in range(len(unit)):
        u = unit[i]
        for q in range(u_first[u], u_first[u] + u_len[u]):
            row[j], link[j], weight[j] = i, u_link[q], u_weight[q]
            j += 1
    for q in range(len(e_link)):
        row[j], link[j], weight[j] = e_row[q], e_link[q], e_weight[q]
        j += 1
    return row, link, weight


@njit(cache=True, error_model="numpy")
def refill(  # pragma: no cover (compiled)
    loose,
    changed,
    low,
    attempt,
    n_alive,
    members,
    slot_bundle,
    slot_start,
    slot_length,
    slot_fresh,
    slot_rate,
    slot_left,
    slot_t_ref,
    slot_finish,
    slot_due,
    entry_link,
    entry_weight,
    link_bundled,
    capacity,
    link_rate,
    n_clocks,
    clock_count,
    clock_rate,
    clock_v,
    clock_t,
    pair_bundle,
    pair_link,
    pair_weight,
    pair_count,
    n_pairs,
    by_bundle_start,
    by_bundle,
    grouped,
    in_order,
    store_start,
    store_length,
    bundle_link,
    bundle_weight,
    now,
    done_bytes,
):
    """One refill (see the module docstring). Returns (outcome, flows, clocks, rate, left, link
    rates, bundled, check failed): `flows` the region's loose flows (after gathering: bundled ones
    first), `clocks` its clocks; with REFILLED, the rows' new rates (clocks, then flows), the flows'
    bytes left now, the links' new rates (a new array) and whether the filling was bundled; `check
    failed`: a bundled filling was tried and its check failed."""
    no_rates = np.zeros(0)
    flows = _region(
        loose, low, changed, slot_bundle, slot_fresh, slot_rate, slot_start, slot_length, entry_link, link_bundled
    )
    clocks = _running(clock_count, clock_rate, n_clocks, members, low)
    c = len(clocks)
    if len(flows) == 0 and c == 0:
        return NOTHING, flows, clocks, no_rates, no_rates, link_rate, False, False
    if c and not attempt:
        return UNCLOCK, flows, clocks, no_rates, no_rates, link_rate, False, False
    ordered, n_bundled, unit, ids, mult, u_row, u_link, u_weight, e_row, e_link, e_weight, split, old, in_clocks = (
        prepare(
            flows, clocks, slot_bundle, slot_start, slot_length, slot_fresh, slot_rate, entry_link, entry_weight,
            clock_count, clock_rate, pair_bundle, pair_link, pair_weight, pair_count, n_pairs, by_bundle_start,
            by_bundle, grouped, in_order, store_start, store_length, bundle_link, bundle_weight,
        )
    )  # fmt: skip
    num_links = len(capacity)
    units = len(ids)
    has_mult = c > 0
    rows = c + len(ordered)
    whole = len(flows) + in_clocks == n_alive
    old_load = no_rates
    residual = capacity
    if not whole:
        old_load = load(
            unit, mult, has_mult, units, u_row, u_link, u_weight, e_row, e_link, e_weight, old, num_links, 0,
            np.zeros(num_links),
        )  # fmt: skip
        residual = np.empty(num_links)
        for link in range(num_links):
            residual[link] = capacity[link] - (link_rate[link] - old_load[link])
    rate = np.empty(rows)
    bundled_load = np.empty(num_links)
    bundled = False
    failed = False
    n_unit = len(unit)
    if attempt and n_unit and not units * 2 > n_bundled + in_clocks:
        k = split
        s_row = np.empty(len(e_row) - k, np.int64)
        for q in range(k, len(e_row)):
            s_row[q - k] = e_row[q] - n_unit
        bundled = bundled_fill(
            unit, u_row, u_link, u_weight, e_row[:k], e_link[:k], e_weight[:k], s_row, e_link[k:], e_weight[k:],
            rows - n_unit, residual, mult, has_mult, rate, bundled_load,
        )  # fmt: skip
        failed = not bundled
    if not bundled:
        if c:
            return FAILED, ordered, clocks, no_rates, no_rates, link_rate, False, failed
        row, link, weight = _expanded(unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight)
        fill(row, link, weight, rows, residual, rate, no_rates, False)
    if bundled:
        new_load = load(
            unit, mult, has_mult, units, u_row, u_link, u_weight, e_row, e_link, e_weight, rate, num_links, split,
            bundled_load.copy(),
        )  # fmt: skip
    else:
        new_load = load(
            unit, mult, has_mult, units, u_row, u_link, u_weight, e_row, e_link, e_weight, rate, num_links, 0,
            np.zeros(num_links),
        )  # fmt: skip
    if whole:
        new_rate = new_load
    else:
        new_rate = np.empty(num_links)
        for link in range(num_links):
            new_rate[link] = link_rate[link] - old_load[link] + new_load[link]
    left = settle_rows(
        ordered, clocks, old, rate, now, slot_left, slot_t_ref, slot_rate, slot_fresh, slot_finish, slot_due,
        clock_v, clock_t, clock_rate, done_bytes,
    )  # fmt: skip
    return REFILLED, ordered, clocks, rate, left, new_rate, bundled, failed
