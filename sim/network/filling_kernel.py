"""Progressive filling compiled (numba): the max-min fair rates of `progressive_filling`
(sim/network/max_min.py) in one call instead of a dozen numpy calls per level.

A refill of the flow network fills a few hundred to a few thousand entries in 1-30 levels; each
level as numpy calls costs ~15 us of call overhead on arrays of every link, which made progressive
filling about a quarter of a 1,024-GPU embedding iteration. Compiled, a level costs the links the
entries use and the entries still unfrozen.

The kernel does the floating-point operations of the numpy path it replaced, and of the plain-Python
path (`_python_filling`), in the same order, so its rates are the same to the last bit: a link's
summed entries and a level's frozen entries are added in entry order, remaining capacity and summed entries are reduced by a level's frozen sum once
per level (`remaining -= frozen_sum * level`, `count -= frozen_sum`), and a link's share is
`max(remaining, 0) / count`. No fast-math: the compiler may not reassociate or fuse them.

`fill_units` fills rows that share entries by unit (a refill's bundled rows, each with its bundle's
switch-to-switch entries) without repeating those entries per row: it counts each unit's unfrozen
rows. Its per-link sums come in another order, so it fills only where every sum is exact in any
order (weights multiples of 2**-20, `exact_sums`): there its rates are `fill_with`'s over the
expanded rows to the last bit.

numba is imported when the kernel is first needed (not by `import sim`: start-up, issue 26); the
compiled code is cached beside this module (numba's `cache=True`), so a process after the first
loads it instead of compiling (~1.4 s).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from sim.network.links_kernel import drop_stale_cache, fill_on
from sim.network.max_min import REL_TOL

drop_stale_cache(Path(__file__), ("links_kernel.py",))  # its kernels are compiled into this module's


@njit(cache=True)
def fill(row, link, weight, n, capacity, rate, link_level, want_level):  # pragma: no cover (compiled)
    """Max-min fair rates of `n` flows (entries: flow `row`, `link`, `weight`; int64, int64,
    float64) over links of `capacity` into `rate` (length n); with `want_level`, `link_level[l]`
    receives the level at which link l filled and froze flows (untouched for other links)."""
    fill_with(row, link, weight, n, capacity, rate, link_level, want_level, np.full(len(capacity), -1, np.int64))


@njit(cache=True)
def _number_links(links, compact, used, entry_link, u):  # pragma: no cover (compiled)
    """Number the links of `links` not numbered yet (`compact[link] < 0`) from `u` on, in order of
    first appearance (into `compact` and `used`), each entry's number into `entry_link`; returns
    the links numbered so far."""
    for i in range(len(links)):
        c = compact[links[i]]
        if c < 0:
            c = u
            compact[links[i]] = u
            used[u] = links[i]
            u += 1
        entry_link[i] = c
    return u


@njit(cache=True)
def _level_state(capacity, used, u, n, rate):  # pragma: no cover (compiled)
    """A filling's working arrays: the `u` used links' remaining capacity, share and bottleneck
    flags, per row whether it froze at this level, per link the frozen entries' sum and number;
    every rate set to inf (not frozen yet)."""
    remaining = np.empty(u)
    for c in range(u):
        remaining[c] = capacity[used[c]]
    rate[:] = np.inf
    return remaining, np.empty(u), np.zeros(u, np.bool_), np.zeros(n, np.bool_), np.zeros(u), np.zeros(u, np.int64)


@njit(cache=True)
def _next_level(remaining, count, entries, share, bottleneck):  # pragma: no cover (compiled)
    """The next level (the lowest share of a link with unfrozen entries) and, in `bottleneck`, the
    links that fill at it (within REL_TOL)."""
    level = np.inf
    for c in range(len(remaining)):
        share[c] = np.maximum(remaining[c], 0.0) / count[c] if entries[c] > 0 else np.inf
        if share[c] < level:
            level = share[c]
    limit = level * (1 + REL_TOL) + 1e-12
    for c in range(len(remaining)):
        bottleneck[c] = share[c] <= limit
    return level


@njit(cache=True)
def _freeze(live, k, row, entry_link, weight, newly, rate, level, frozen_sum, frozen_entries):  # pragma: no cover
    """The level's freezing of the first `k` `live` entries: an entry of a row frozen now (`newly`)
    sets its row's rate to `level` and adds its weight (and one) to its link's frozen sums; the
    others stay live, moved to the front in order. Returns how many stay."""
    kept = 0
    for j in range(k):
        i = live[j]
        if newly[row[i]]:
            rate[row[i]] = level
            frozen_sum[entry_link[i]] += weight[i]
            frozen_entries[entry_link[i]] += 1
        else:
            live[kept] = i
            kept += 1
    return kept


@njit(cache=True)
def _take_frozen(remaining, count, entries, frozen_sum, frozen_entries, level):  # pragma: no cover (compiled)
    """A level's frozen entries leave their links: the capacity they take at `level`, their summed
    weights and their number (the frozen sums start again from 0)."""
    for c in range(len(remaining)):
        remaining[c] -= frozen_sum[c] * level
        count[c] -= frozen_sum[c]
        entries[c] -= frozen_entries[c]
        frozen_sum[c] = 0.0
        frozen_entries[c] = 0


@njit(cache=True)
def fill_with(row, link, weight, n, capacity, rate, link_level, want_level, compact):  # pragma: no cover
    """`fill` given its per-link map `compact` (-1 on every link, left so): a caller filling again
    and again over many links (the flow table's refills) keeps one instead of making one per
    filling. Reads `capacity` and writes `link_level` on the entries' links only."""
    m = len(link)
    # the links the entries use, numbered in order of first appearance
    used = np.empty(m, np.int64)
    entry_link = np.empty(m, np.int64)
    u = _number_links(link, compact, used, entry_link, 0)
    count = np.zeros(u)  # summed entries of unfrozen flows, per used link
    entries = np.zeros(u, np.int64)  # their number (exact zero test)
    for i in range(m):
        count[entry_link[i]] += weight[i]
        entries[entry_link[i]] += 1
    remaining, share, bottleneck, newly, frozen_sum, frozen_entries = _level_state(capacity, used, u, n, rate)
    live = np.arange(m)  # entries of unfrozen flows, in entry order
    k = m
    while k > 0:
        level = _next_level(remaining, count, entries, share, bottleneck)
        for j in range(k):
            i = live[j]
            if bottleneck[entry_link[i]]:
                newly[row[i]] = True
                if want_level:
                    link_level[used[entry_link[i]]] = level
        k = _freeze(live, k, row, entry_link, weight, newly, rate, level, frozen_sum, frozen_entries)
        _take_frozen(remaining, count, entries, frozen_sum, frozen_entries, level)
        newly[:] = False
    for c in range(u):
        compact[used[c]] = -1


# `fill_units` sums weights in another order than `fill_with`: it may only where every sum is exact,
# i.e. every weight is a multiple of 2**-EXACT_BITS of at most EXACT_MAX and a filling has fewer than
# EXACT_ENTRIES entries (sums then stay below 2**53 units of 2**-EXACT_BITS)
EXACT_BITS = 20
EXACT_MAX = 1024.0
EXACT_ENTRIES = 1 << 22


@njit(cache=True)
def exact_sums(weights, entries):  # pragma: no cover (compiled)
    """Whether sums of up to `entries` of these weights are exact in any order (see EXACT_BITS)."""
    if entries >= EXACT_ENTRIES:
        return False
    scale = 2.0**EXACT_BITS
    for w in weights:
        if not (0.0 <= w <= EXACT_MAX) or np.floor(w * scale) != w * scale:
            return False
    return True


@njit(cache=True)
def unit_runs(u_row, units):  # pragma: no cover (compiled)
    """(first entry, number of entries) of each unit's shared entries (`u_row` ascending)."""
    u_len = np.zeros(units, np.int64)
    for q in range(len(u_row)):
        u_len[u_row[q]] += 1
    u_first = np.zeros(units, np.int64)
    for x in range(1, units):
        u_first[x] = u_first[x - 1] + u_len[x - 1]
    return u_first, u_len


@njit(cache=True)
def fill_units(
    unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight, n, capacity, rate, compact
):  # pragma: no cover (compiled)
    """`fill_with` of the rows of a refill without expanding their units' shared entries: rows
    0..len(unit)-1 are bundled, each with its unit's shared entries (`u_row` ascending, `u_link`,
    `u_weight`) besides its edge entries (`e_row`, `e_link`, `e_weight`, every row's); a unit's
    shared entries count once per unfrozen row of it. The same levels, frozen rows and per-link
    updates as `fill_with` over the expanded entries (`refill_kernel._expanded`), with each link's
    summed weights added in another order: the same rates to the last bit where those sums are
    exact (`exact_sums`). Returns False (and fills nothing) where they may not be. `compact`: as
    in `fill_with`."""
    n_unit = len(unit)
    u_first, u_len = unit_runs(u_row, units)
    expanded = len(e_link)  # the entries of the expanded rows
    for i in range(n_unit):
        expanded += u_len[unit[i]]
    if not (exact_sums(u_weight, expanded) and exact_sums(e_weight, expanded)):
        return False
    rows_of = np.zeros(units, np.int64)  # unfrozen bundled rows of each unit
    for i in range(n_unit):
        rows_of[unit[i]] += 1
    # the links the entries use, numbered in order of first appearance (shared, then edge)
    m_u, m_e = len(u_link), len(e_link)
    used = np.empty(m_u + m_e, np.int64)
    u_entry_link = np.empty(m_u, np.int64)
    e_entry_link = np.empty(m_e, np.int64)
    u = _number_links(e_link, compact, used, e_entry_link, _number_links(u_link, compact, used, u_entry_link, 0))
    count = np.zeros(u)  # summed entries of unfrozen rows, per used link
    entries = np.zeros(u, np.int64)  # their number (exact zero test)
    for x in range(units):
        if rows_of[x]:
            for q in range(u_first[x], u_first[x] + u_len[x]):
                count[u_entry_link[q]] += u_weight[q] * rows_of[x]
                entries[u_entry_link[q]] += rows_of[x]
    for i in range(m_e):
        count[e_entry_link[i]] += e_weight[i]
        entries[e_entry_link[i]] += 1
    remaining, share, bottleneck, newly, frozen_sum, frozen_entries = _level_state(capacity, used, u, n, rate)
    hit = np.zeros(units, np.bool_)
    frozen_rows = np.zeros(units, np.int64)
    live_e = np.arange(m_e)  # edge entries of unfrozen rows, in entry order
    k_e = m_e
    live_b = np.empty(n_unit, np.int64)  # unfrozen bundled rows with shared entries
    k_b = 0
    for i in range(n_unit):
        if u_len[unit[i]]:
            live_b[k_b] = i
            k_b += 1
    while k_e > 0 or k_b > 0:
        level = _next_level(remaining, count, entries, share, bottleneck)
        for x in range(units):  # a unit on a filled link freezes its unfrozen rows
            hit[x] = False
            if rows_of[x]:
                for q in range(u_first[x], u_first[x] + u_len[x]):
                    if bottleneck[u_entry_link[q]]:
                        hit[x] = True
                        break
        for j in range(k_e):
            i = live_e[j]
            if bottleneck[e_entry_link[i]]:
                newly[e_row[i]] = True
        for j in range(k_b):
            if hit[unit[live_b[j]]]:
                newly[live_b[j]] = True
        k_e = _freeze(live_e, k_e, e_row, e_entry_link, e_weight, newly, rate, level, frozen_sum, frozen_entries)
        kept = 0
        for j in range(k_b):
            i = live_b[j]
            if newly[i]:
                rate[i] = level
                frozen_rows[unit[i]] += 1
            else:
                live_b[kept] = i
                kept += 1
        k_b = kept
        for x in range(units):
            if frozen_rows[x]:
                for q in range(u_first[x], u_first[x] + u_len[x]):
                    frozen_sum[u_entry_link[q]] += u_weight[q] * frozen_rows[x]
                    frozen_entries[u_entry_link[q]] += frozen_rows[x]
                rows_of[x] -= frozen_rows[x]
                frozen_rows[x] = 0
        _take_frozen(remaining, count, entries, frozen_sum, frozen_entries, level)
        newly[:] = False
    for c in range(u):
        compact[used[c]] = -1
    return True


@njit(cache=True)
def bundled_fill(  # pragma: no cover (compiled)
    unit,
    u_row,
    u_link,
    u_weight,
    b_row,
    b_link,
    b_weight,
    s_row,
    s_link,
    s_weight,
    n_single,
    capacity,
    multiplicity,
    has_multiplicity,
    rate,
    edge_load,
    touched,
    every,
    compact,
    residual,
    level,
):
    """`bundled_filling` (sim/network/max_min.py) in one call, its operations in the same order: the
    bundles filled as single flows of k-fold entries on the shared links, the other flows on the
    capacity the bundles leave on the edge links, then the check. Writes the rates into `rate`
    (bundled rows, then the others) and the bundled rows' edge load into `edge_load`; returns
    whether the check holds. Per-link steps run on the links of `touched` (every link of the
    entries, or more; every link where `every`): `capacity` is read, and `edge_load`, `residual`
    and `level` (per-link scratch) are written, there only; the other links would add nothing (no
    bundled load, no check to fail). `compact`: `fill_with`'s map (-1 on every link, left so)."""
    n_bundled = len(unit)
    n_units = 0
    for i in range(n_bundled):
        n_units = max(n_units, unit[i] + 1)
    size = np.zeros(n_units)
    for i in range(n_bundled):
        size[unit[i]] += multiplicity[i] if has_multiplicity else 1.0
    weight = np.empty(len(u_link))
    for j in range(len(u_link)):
        weight[j] = u_weight[j] * size[u_row[j]]
    unit_rate = np.empty(n_units)
    fill_with(u_row, u_link, weight, n_units, capacity, unit_rate, np.empty(0), False, compact)
    for i in range(n_bundled):
        rate[i] = unit_rate[unit[i]]
    fill_on(edge_load, 0.0, touched, every)
    for j in range(len(b_link)):
        edge_load[b_link[j]] += b_weight[j] * rate[b_row[j]]
    if not _edge_residual(residual, capacity, edge_load, touched, every):
        return False  # the bundles overfill an edge link
    fill_on(level, np.inf, touched, every)
    single = np.empty(n_single)
    fill_with(s_row, s_link, s_weight, n_single, residual, single, level, True, compact)
    for i in range(n_single):
        rate[n_bundled + i] = single[i]
    for j in range(len(b_link)):
        filled = level[b_link[j]]
        if filled < np.inf and rate[b_row[j]] > filled * (1 + REL_TOL):
            return False  # an edge link fills below a bundle's rate
    return True


@njit(cache=True)
def _edge_residual(residual, capacity, edge_load, touched, every):  # pragma: no cover (compiled)
    """residual = capacity - edge_load on the links of `touched` (every link where `every`); False
    where the bundled load overfills a link."""
    if every:
        for link in range(len(residual)):
            residual[link] = capacity[link] - edge_load[link]
            if residual[link] < -REL_TOL * capacity[link] and edge_load[link] > 0:
                return False
    else:
        for link in touched:
            residual[link] = capacity[link] - edge_load[link]
            if residual[link] < -REL_TOL * capacity[link] and edge_load[link] > 0:
                return False
    return True
