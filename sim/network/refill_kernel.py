"""A large flow table's refill in one compiled call (numba): `FlowTable.recompute`'s steps from its
region to its rows' new rates, which sim/network/flow_table.py otherwise makes as a dozen calls.

`refill` takes the refill's water level and changed links and
1. picks the region: the loose flows at or above the level connected to a change
   (`FlowTable._affected`, region_kernel's `connected`) and the clocks at or above it
   (`BundleClocks.running`);
2. gathers its rows (region_kernel's `prepare`) and, unless the region is every live flow, the load
   they put on their links at their old rates and the capacity the others leave (`_prepare`);
3. fills them: bundled (filling_kernel's `bundled_fill`, when `attempt` and the bundles pay off) or
   row by row (`fill_units`: each bundled row's shared entries counted per unit, the same rates where
   every sum is exact, as with whole-number weights; else `fill_with` over `_expanded`'s entries: a
   1,024-GPU all-to-all whose NIC-bound flows fail the bundled check refills ~100K rows of ~4 entries
   this way, 2 of them on the flows' unit);
4. puts the new load on the links and the new rates onto the rows (region_kernel's `load`,
   `settle_rows`).
It stops before step 2 when the region has clocks but may not try the bundled filling, and before
step 4 when the bundled filling of a region with clocks fails (or does not apply): those clocks
must first be turned back into per-flow rows (`FlowTable._unclock`: their heaps are Python), and
the flow table refills the region row by row itself.

Each step calls the kernel the step-by-step path calls, on the same arrays, and the arithmetic in
between is the same element-wise operations (`capacity - (link_rate - old_load)`,
`link_rate - old_load + new_load`), so the rates, loads and times are the same to the last bit.
Those per-link steps run on the links the region's entries touch only (`_touched`; every link, in
order, where the entries are as many as an eighth of the links: sim/network/links_kernel.py), in
working arrays the flow table keeps (`FlowTable._refill_scratch`), and the links' rates change in
place: elsewhere the old and new loads are 0, so a rate stays as it was (`x - 0 + 0` is x: no link's
rate is ever -0, sums start from +0), and a refill of every live flow finds no rate on a link without
entries. On a 16K-GPU Clos (100K links, ~3.6K flows a refill) the passes over every link, with
their fresh arrays, took most of a refill.
A row-by-row filling of a few entries, which the step-by-step path fills in plain Python, is
filled by `fill` here: the same rates to the last bit (tests/network/test_network_fast_paths.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from sim.network.filling_kernel import bundled_fill, fill_units, fill_with, unit_runs
from sim.network.links_kernel import drop_stale_cache, fill_on, rates_on, residual_on
from sim.network.region_kernel import connected, load, prepare, settle_rows

# the files whose kernels (and constants) this module's kernels compile in
_COMPILED_IN = ("region_kernel.py", "filling_kernel.py", "max_min.py", "links_kernel.py")


drop_stale_cache(Path(__file__), _COMPILED_IN)

NOTHING = 0  # no rate can change
UNCLOCK = 1  # the region has clocks but may not be filled bundled: stopped before gathering rows
FAILED = 2  # the bundled filling of a region with clocks failed or did not apply: nothing changed
REFILLED = 3  # rates, loads and times set


@njit(cache=True)
def _region(
    loose, low, changed, slot_bundle, slot_fresh, slot_rate, slot_start, slot_length, entry_link, link_bundled, dirty
):  # pragma: no cover (compiled)
    """The loose flows at or above `low` whose rate can change (`FlowTable._affected`), in slot order.
    `dirty`: per-link scratch (written and read on the links of the flows and changes only)."""
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
    single = np.empty(singles, np.int64)
    j = 0
    for i in range(m):
        if slot_bundle[region[i]] < 0:
            single[j] = region[i]
            j += 1
    # dirty: links with bundled entries or where flows came or went, on the links `connected` reads
    # (the single flows' own; elsewhere left as it was)
    for f in single:
        for e in range(slot_start[f], slot_start[f] + slot_length[f]):
            dirty[entry_link[e]] = link_bundled[entry_link[e]] > 0
    for link in changed:
        dirty[link] = True
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
    u_first, u_len = unit_runs(u_row, units)
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


@njit(cache=True)
def _touched(u_link, e_link, compact):  # pragma: no cover (compiled)
    """The distinct links of the entries, in order of first appearance (`compact`: -1 on every link,
    left so)."""
    touched = np.empty(len(u_link) + len(e_link), np.int64)
    k = 0
    for links in (u_link, e_link):
        for link in links:
            if compact[link] < 0:
                compact[link] = k
                touched[k] = link
                k += 1
    for i in range(k):
        compact[touched[i]] = -1
    return touched[:k]


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
    compact,
    scratch,
    dirty,
):
    """One refill (see the module docstring). Returns (outcome, flows, clocks, rate, left, link
    rates, bundled, check failed): `flows` the region's loose flows (after gathering: bundled ones
    first), `clocks` its clocks; with REFILLED, the rows' new rates (clocks, then flows), the flows'
    bytes left now, the links' new rates (`link_rate`, changed in place) and whether the filling was
    bundled; `check failed`: a bundled filling was tried and its check failed."""
    no_rates = np.zeros(0)
    no_links = np.zeros(0, np.int64)
    flows = _region(
        loose, low, changed, slot_bundle, slot_fresh, slot_rate, slot_start, slot_length, entry_link, link_bundled,
        dirty,
    )  # fmt: skip
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
    every = (len(u_link) + len(e_link)) * 8 >= len(capacity)  # many entries: every link, in order
    touched = no_links if every else _touched(u_link, e_link, compact)  # else the links they touch
    units = len(ids)
    has_mult = c > 0
    rows = c + len(ordered)
    whole = len(flows) + in_clocks == n_alive
    old_load = no_rates
    residual = capacity
    if not whole:
        old_edge = scratch[0]
        fill_on(old_edge, 0.0, touched, every)
        old_load = load(
            unit, mult, has_mult, units, u_row, u_link, u_weight, e_row, e_link, e_weight, old, 0, old_edge, touched,
            every, scratch[1],
        )  # fmt: skip
        residual = scratch[2]
        residual_on(residual, capacity, link_rate, old_load, touched, every)
    rate = np.empty(rows)
    bundled_load = scratch[3]
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
            rows - n_unit, residual, mult, has_mult, rate, bundled_load, touched, every, compact, scratch[4],
            scratch[5],
        )  # fmt: skip
        failed = not bundled
    if not bundled:
        if c:
            return FAILED, ordered, clocks, no_rates, no_rates, link_rate, False, failed
        if not (
            n_unit
            and fill_units(unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight, rows, residual, rate, compact)
        ):  # (fill_units: the same rates, where it may fill)
            row, link, weight = _expanded(unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight)
            fill_with(row, link, weight, rows, residual, rate, no_rates, False, compact)
        fill_on(bundled_load, 0.0, touched, every)  # no bundled load: the new load's edge sums start from 0
    new_load = load(
        unit, mult, has_mult, units, u_row, u_link, u_weight, e_row, e_link, e_weight, rate, split if bundled else 0,
        bundled_load, touched, every, scratch[6],
    )  # fmt: skip
    # whole: every link with entries is touched, the others carry no rate (0 before and after); else
    # elsewhere the old and new loads are 0: the rate stays
    rates_on(link_rate, old_load, new_load, whole, touched, every)
    left = settle_rows(
        ordered, clocks, old, rate, now, slot_left, slot_t_ref, slot_rate, slot_fresh, slot_finish, slot_due,
        clock_v, clock_t, clock_rate, done_bytes,
    )  # fmt: skip
    return REFILLED, ordered, clocks, rate, left, link_rate, bundled, failed
