"""A large flow table's per-refill bookkeeping, compiled (numba): what sim/network/flow_table.py,
flow_slots.py and flow_clocks.py do as numpy calls on a small table.

- `prepare` (`FlowTable._prepare`): a refill gathers its region - the clocks and loose flows whose
  rate can change - into rows: the bundled flows first, each row's bundle as a compact *unit* id,
  the units' shared entries, the edge entries (the clocks' pairs, found through the pairs grouped by
  bundle, then the flows' own), the rows' old rates. `load` (`FlowTable._load`): the load rows put
  on each link.
- `connected` (`FlowTable._affected`, in the one-call refill of sim/network/refill_kernel.py): the loose
  unbundled flows a change can affect.
- `leave_links` (`FlowSlots.remove`): finished flows leave their links' sums; `remove_slots`: that
  with the flows' rates before and their slots cleared after.
- `apply_pairs` (`BundleClocks._add_pairs`): members' edge entries onto their clocks' pairs.
- `retime` (`BundleClocks.retime`): clocks' finish and due times.
- `settle_rows` (`FlowTable.recompute`): a refill's new rates onto its flows and clocks.
- `report_rates` (`FlowNetwork._report_rates`): the links whose rate changed, with what they moved
  at their last reported rate.
As numpy each is a few to ~35 calls, each a few microseconds of overhead on arrays of a few hundred to
a few thousand entries: on a 1,024-GPU all-to-all (~15K refills an iteration, ~1,000 rows each) they
were about a third of the run.

The kernels do the numpy path's floating-point operations in the same order, so their results are
the same to the last bit: a load is summed per link in entry order (as `np.bincount` and
`np.add.at` do), the shared part and the edge part separately and then added, a unit's rate
multiplied by its flows before it is summed; sums onto per-link and per-pair totals are made one by
one or summed first exactly where the numpy path does either. No fast-math: the compiler may not
reassociate or fuse them. tests/network/test_network_fast_paths.py compares both paths on live
tables and a whole run.

The network's advance of its link totals between updates (`FlowNetwork._advance`) stays numpy. A
compiled pass over a 16K-GPU Clos's 100K links takes ~70 us against numpy's ~160 us, but in a run
that loads numba midway (as the flow table does) it took 4 ms on most calls of the first training
steps, on the same arrays that numpy updated in 0.4 ms (cause not found: not page faults, not the
code's placement, not denormals): 12 s of a 60 s run.

numba is imported by the flow table only once it has loaded it for its fillings
(sim/network/filling_kernel.py), so a small run never pays the import; the compiled code is cached
beside this module.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from sim.network.links_kernel import add_on, drop_stale_cache, fill_on

drop_stale_cache(Path(__file__), ("links_kernel.py",))  # its kernels are compiled into this module's

_FEW_TIMES = 32  # distinct times `by_time` orders by counting


@njit(cache=True)
def _copy_entries(value, start, length, from_link, from_weight, row, link, weight, j):  # pragma: no cover (compiled)
    """Entries start..start+length-1 of (`from_link`, `from_weight`) into (`row`, `link`, `weight`) from
    position `j`, each in row `value`; returns the position after them."""
    for e in range(start, start + length):
        row[j], link[j], weight[j] = value, from_link[e], from_weight[e]
        j += 1
    return j


@njit(cache=True)
def prepare(  # pragma: no cover (compiled)
    flows,
    clocks,
    slot_bundle,
    slot_start,
    slot_length,
    slot_fresh,
    slot_rate,
    entry_link,
    entry_weight,
    clock_count,
    clock_rate,
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
):
    """The rows of a refill of loose `flows` and `clocks` (bundle ids, ascending): (flows bundled
    first, unit per bundled row, bundle id per unit, multiplicity per bundled row, shared entries
    (unit, link, weight), edge entries (row, link, weight), edge entries of bundled rows, old rates,
    members of the clocks). See `FlowTable._parts` for what each is. `in_order`: the grouped pairs
    are numbered bundle by bundle (`by_bundle` ascending), so the clocks' runs, taken in clock
    order, are already in pair order."""
    n, c = len(flows), len(clocks)
    ordered = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        if slot_bundle[flows[i]] >= 0:
            ordered[k] = flows[i]
            k += 1
    n_bundled = k
    for i in range(n):
        if slot_bundle[flows[i]] < 0:
            ordered[k] = flows[i]
            k += 1
    # units: the distinct bundles of the bundled rows (clocks, then bundled flows), ascending
    row_bundle = np.empty(c + n_bundled, np.int64)
    for i in range(c):
        row_bundle[i] = clocks[i]
    for i in range(n_bundled):
        row_bundle[c + i] = slot_bundle[ordered[i]]
    compact = np.full(len(store_length), -1, np.int64)
    for i in range(c + n_bundled):
        compact[row_bundle[i]] = 0
    units = 0
    for b in range(len(store_length)):
        if compact[b] == 0:
            compact[b] = units
            units += 1
    ids = np.empty(units, np.int64)
    u = 0
    for b in range(len(store_length)):
        if compact[b] >= 0:
            ids[u] = b
            u += 1
    unit = np.empty(c + n_bundled, np.int64)
    for i in range(c + n_bundled):
        unit[i] = compact[row_bundle[i]]
    # the units' shared entries
    total = 0
    for u in range(units):
        total += store_length[ids[u]]
    u_row = np.empty(total, np.int64)
    u_link = np.empty(total, np.int64)
    u_weight = np.empty(total)
    j = 0
    for u in range(units):
        b = ids[u]
        j = _copy_entries(u, store_start[b], store_length[b], bundle_link, bundle_weight, u_row, u_link, u_weight, j)
    # edge entries: the clocks' non-empty pairs in pair order, then the flows' own
    row_of = np.full(len(clock_count), -1, np.int64)
    for i in range(c):
        row_of[clocks[i]] = i
    # the flows' own entries (after the clocks' pairs)
    own = 0
    bundled_own = 0
    for i in range(n):
        own += slot_length[ordered[i]]
        if i < n_bundled:
            bundled_own += slot_length[ordered[i]]
    # the clocks' non-empty pairs, in pair order: where the grouped pairs are numbered bundle by
    # bundle, each clock's run in clock order (then the pairs made since they were grouped), written
    # as they are scanned; else marked through the pairs grouped by bundle (and those made since),
    # then read off the marks
    if c and in_order:
        scanned = n_pairs - grouped  # the pairs to look at: one pass, written without branches
        for i in range(c):
            b = clocks[i]
            if b + 1 < len(by_bundle_start):
                scanned += by_bundle_start[b + 1] - by_bundle_start[b]
        e_row = np.empty(scanned + 1 + own, np.int64)  # one spare
        e_link = np.empty(scanned + 1 + own, np.int64)
        e_weight = np.empty(scanned + 1 + own)
        k = 0
        for i in range(c):
            b = clocks[i]
            if b + 1 < len(by_bundle_start):
                for p in range(by_bundle_start[b], by_bundle_start[b + 1]):  # bundle b's pairs: row i
                    e_row[k], e_link[k], e_weight[k] = i, pair_link[p], pair_weight[p]
                    k += pair_count[p] > 0
        for p in range(grouped, n_pairs):
            e_row[k], e_link[k], e_weight[k] = row_of[pair_bundle[p]], pair_link[p], pair_weight[p]
            k += (pair_count[p] > 0) & (row_of[pair_bundle[p]] >= 0)
        n_pair_entries = k
    else:
        selected = np.empty(0, np.int64)
        if c:
            mark = np.zeros(n_pairs, np.bool_)
            marked = 0
            for i in range(c):
                b = clocks[i]
                if b + 1 < len(by_bundle_start):
                    for q in range(by_bundle_start[b], by_bundle_start[b + 1]):
                        live = pair_count[by_bundle[q]] > 0
                        mark[by_bundle[q]] = live
                        marked += live
            for p in range(grouped, n_pairs):
                live = (pair_count[p] > 0) & (row_of[pair_bundle[p]] >= 0)
                mark[p] = live
                marked += live
            selected = np.empty(marked + 1, np.int64)  # one spare: written without branches
            k = 0
            for p in range(n_pairs):  # no mispredictions
                selected[k] = p
                k += mark[p]
            selected = selected[:k]
        n_pair_entries = len(selected)
        e_row = np.empty(n_pair_entries + own, np.int64)
        e_link = np.empty(n_pair_entries + own, np.int64)
        e_weight = np.empty(n_pair_entries + own)
        for q in range(n_pair_entries):
            e_row[q] = row_of[pair_bundle[selected[q]]]
            e_link[q] = pair_link[selected[q]]
            e_weight[q] = pair_weight[selected[q]]
    split = n_pair_entries + bundled_own
    j = n_pair_entries
    for i in range(n):
        f = ordered[i]
        j = _copy_entries(c + i, slot_start[f], slot_length[f], entry_link, entry_weight, e_row, e_link, e_weight, j)
    e_row, e_link, e_weight = e_row[:j], e_link[:j], e_weight[:j]
    # multiplicity (clocks: their members) and old rates
    mult = np.ones(c + n_bundled)
    members = 0
    for i in range(c):
        mult[i] = float(clock_count[clocks[i]])
        members += clock_count[clocks[i]]
    old = np.empty(c + n)
    for i in range(c):
        old[i] = clock_rate[clocks[i]]
    for i in range(n):
        old[c + i] = 0.0 if slot_fresh[ordered[i]] else slot_rate[ordered[i]]
    return ordered, n_bundled, unit, ids, mult, u_row, u_link, u_weight, e_row, e_link, e_weight, split, old, members


@njit(cache=True)
def load(  # pragma: no cover (compiled)
    unit, mult, has_mult, units, u_row, u_link, u_weight, e_row, e_link, e_weight, rate, edge_start, edge, touched,
    every, shared,
):  # fmt: skip
    """Per link: summed entries x rate of a refill's rows (`FlowTable._load`). `edge`: the edge
    entries' sums so far (zeros, or a bundled filling's load of the first `edge_start` of them),
    continued in place by the others in entry order; the shared part is summed apart (in `shared`)
    and added. On the links of `touched` (every link of the entries, or more; every link where
    `every`): the sums are right there only (elsewhere `edge` and `shared`, per-link scratch, are
    left as they were; the sums would be 0). Returns `edge` where there are no shared entries, else
    `shared`."""
    for i in range(edge_start, len(e_link)):
        edge[e_link[i]] += e_weight[i] * rate[e_row[i]]
    if not len(unit):
        return edge
    per_unit = np.zeros(units)
    for i in range(len(unit)):
        per_unit[unit[i]] += rate[i] * mult[i] if has_mult else rate[i]
    fill_on(shared, 0.0, touched, every)
    for j in range(len(u_link)):
        shared[u_link[j]] += u_weight[j] * per_unit[u_row[j]]
    add_on(shared, edge, touched, every)
    return shared


@njit(cache=True)
def leave_links(  # pragma: no cover (compiled)
    slots,
    rate,
    slot_bundle,
    slot_start,
    slot_length,
    store_start,
    store_length,
    bundle_link,
    bundle_weight,
    entry_link,
    entry_weight,
    link_rate,
    link_weight,
    link_entries,
    link_bundled,
):
    """Finished `slots` (at `rate`) leave their links (`FlowSlots.remove`): their entries - the
    bundled ones' shared entries, then every slot's edge entries - come off the per-link load,
    summed entries, entries and bundled entries, as `FlowSlots._link_add` takes them off (one by
    one onto the sums for a few entries, summed per link first and then added for many); a link
    left without entries gets load and summed entries 0. Returns the entries' links."""
    n, links = len(slots), len(link_rate)
    total = 0
    for i in range(n):
        b = slot_bundle[slots[i]]
        if b >= 0:
            total += store_length[b]
        total += slot_length[slots[i]]
    row = np.empty(total, np.int64)
    link = np.empty(total, np.int64)
    weight = np.empty(total)
    j = 0
    for i in range(n):
        b = slot_bundle[slots[i]]
        if b >= 0:
            j = _copy_entries(i, store_start[b], store_length[b], bundle_link, bundle_weight, row, link, weight, j)
    for i in range(n):
        s = slots[i]
        j = _copy_entries(i, slot_start[s], slot_length[s], entry_link, entry_weight, row, link, weight, j)
    if total * 8 < links:  # np.add.at: one by one onto the sums
        for j in range(total):
            link_rate[link[j]] += -weight[j] * rate[row[j]]
        for j in range(total):
            link_weight[link[j]] += -weight[j]
    else:  # np.bincount, then added
        summed = np.zeros(links)
        for j in range(total):
            summed[link[j]] += -weight[j] * rate[row[j]]
        for k in range(links):
            link_rate[k] += summed[k]
        summed[:] = 0.0
        for j in range(total):
            summed[link[j]] += -weight[j]
        for k in range(links):
            link_weight[k] += summed[k]
    for j in range(total):  # counts: exact either way
        link_entries[link[j]] -= 1
        if slot_bundle[slots[row[j]]] >= 0:
            link_bundled[link[j]] -= 1
    for j in range(total):
        if link_entries[link[j]] == 0:
            link_rate[link[j]] = 0.0
            link_weight[link[j]] = 0.0
    return link


@njit(cache=True)
def remove_slots(  # pragma: no cover (compiled)
    slots,
    slot_bundle,
    slot_start,
    slot_length,
    slot_alive,
    slot_fresh,
    slot_clocked,
    slot_rate,
    slot_finish,
    slot_due,
    slot_group,
    clock_rate,
    store_start,
    store_length,
    bundle_link,
    bundle_weight,
    entry_link,
    entry_weight,
    link_rate,
    link_weight,
    link_entries,
    link_bundled,
):
    """`FlowSlots.remove`'s arrays: the finished `slots`' rates (a clocked one's its clock's), the
    lowest of those that had one (inf if none), their links' sums (`leave_links`), then the slots
    cleared. Returns (the entries' links, the slots that were clocked, in order, the lowest rate,
    whether any slot was fresh)."""
    n = len(slots)
    rate = np.empty(n)
    lowest = np.inf
    fresh = False
    n_clocked = 0
    for i in range(n):
        s = slots[i]
        rate[i] = clock_rate[slot_bundle[s]] if slot_clocked[s] else slot_rate[s]
        if slot_fresh[s]:
            fresh = True
        elif rate[i] < lowest:
            lowest = rate[i]
        n_clocked += slot_clocked[s]
    link = leave_links(
        slots, rate, slot_bundle, slot_start, slot_length, store_start, store_length, bundle_link, bundle_weight,
        entry_link, entry_weight, link_rate, link_weight, link_entries, link_bundled,
    )  # fmt: skip
    clocked = np.empty(n_clocked, np.int64)
    k = 0
    for i in range(n):
        s = slots[i]
        if slot_clocked[s]:
            clocked[k] = s
            k += 1
        slot_alive[s], slot_fresh[s], slot_clocked[s] = False, False, False
        slot_rate[s], slot_finish[s], slot_due[s], slot_group[s] = 0.0, np.inf, np.inf, -1
    return link, clocked, lowest, fresh


@njit(cache=True)
def connected(flows, slot_start, slot_length, entry_link, dirty):  # pragma: no cover (compiled)
    """Which of `flows` (loose, unbundled) connect to a `dirty` link through their edge entries and
    those of other such flows (`FlowTable._affected`'s rounds: a flow on a dirty link is hit and
    dirties its links, until no flow is newly hit). `dirty` (bool per link) is updated in place."""
    n = len(flows)
    hit = np.zeros(n, np.bool_)
    grew = True
    while grew:
        grew = False
        for i in range(n):
            if hit[i]:
                continue
            s = slot_start[flows[i]]
            for e in range(s, s + slot_length[flows[i]]):
                if dirty[entry_link[e]]:
                    hit[i] = True
                    break
        for i in range(n):  # the newly hit dirty their links (a round, as the numpy path's)
            if hit[i]:
                s = slot_start[flows[i]]
                for e in range(s, s + slot_length[flows[i]]):
                    if not dirty[entry_link[e]]:
                        dirty[entry_link[e]] = True
                        grew = True
    return hit


@njit(cache=True)
def apply_pairs(index, weight, sign, few, pair_weight, pair_count):  # pragma: no cover (compiled)
    """Entries' weights (and `sign` entries each) onto their (bundle, link) pairs `index`
    (`BundleClocks._add_pairs`): with `few` one by one (a pair left without entries gets weight 0
    at once), else summed per pair in entry order first and then added (pairs left without entries
    get weight 0 after)."""
    m = len(index)
    if few:
        for j in range(m):
            i = index[j]
            pair_weight[i] += weight[j]
            pair_count[i] += sign
            if pair_count[i] == 0:
                pair_weight[i] = 0.0
        return
    order = np.argsort(index, kind="mergesort")  # stable: each pair's entries in entry order
    j = 0
    while j < m:
        i = index[order[j]]
        summed = 0.0
        counted = 0
        while j < m and index[order[j]] == i:
            summed += weight[order[j]]
            counted += 1
            j += 1
        pair_weight[i] += summed
        pair_count[i] += sign * counted
    for j in range(m):
        if pair_count[index[j]] == 0:
            pair_weight[index[j]] = 0.0


@njit(cache=True, error_model="numpy")
def retime(bundles, head, v, rate, t, count, finish, due, done_bytes):  # pragma: no cover (compiled)
    """Finish and due time of these clocks' heads (`BundleClocks.retime`, `finish_and_due`'s
    arithmetic: a division by a zero rate gives inf, as numpy's does); empty clocks get inf."""
    for b in bundles:
        if count[b] == 0:
            finish[b] = np.inf
            due[b] = np.inf
            continue
        left = head[b] - v[b]
        finish[b] = t[b] + left / rate[b] if left > 0 else t[b]
        due[b] = t[b] + (left - done_bytes) / rate[b] if left > done_bytes else t[b]


@njit(cache=True, error_model="numpy")
def settle_rows(  # pragma: no cover (compiled)
    flows, clocks, old, rate, now, left, t_ref, slot_rate, fresh, finish, due, clock_v, clock_t, clock_rate, done_bytes
):
    """A refill's new rates onto its rows (`FlowTable.recompute`): each loose flow's bytes left as of
    `now` at its old rate (at least 0, as `np.maximum`), its new rate, finish and due times
    (`finish_and_due`'s arithmetic); each clock moved to `now` at its old rate, then given its new
    one. Rows are the clocks, then `flows` (`old`, `rate`: per row). Returns the flows' bytes left."""
    c = len(clocks)
    out = np.empty(len(flows))
    for i in range(len(flows)):
        f = flows[i]
        x = left[f] - old[c + i] * (now - t_ref[f])
        if x < 0.0:
            x = 0.0
        r = rate[c + i]
        out[i] = x
        left[f] = x
        t_ref[f] = now
        slot_rate[f] = r
        fresh[f] = False
        finish[f] = now + x / r if x > 0 else now
        due[f] = now + (x - done_bytes) / r if x > done_bytes else now
    for i in range(c):
        b = clocks[i]
        clock_v[b] += clock_rate[b] * (now - clock_t[b])
        clock_t[b] = now
        clock_rate[b] = rate[i]
    return out


@njit(cache=True)
def by_time(times):  # pragma: no cover (compiled)
    """The order that sorts `times` ascending, stable (`np.argsort(times, kind="stable")`): by
    counting where they take a few distinct values (a rate update's intervals start at one of a
    few earlier updates), else by merge sort."""
    n = len(times)
    distinct = np.empty(_FEW_TIMES)
    code = np.empty(n, np.int64)
    d = 0
    for i in range(n):
        found = -1
        for j in range(d):
            if distinct[j] == times[i]:
                found = j
                break
        if found < 0:
            if d == _FEW_TIMES:
                return np.argsort(times, kind="mergesort")
            distinct[d] = times[i]
            found = d
            d += 1
        code[i] = found
    rank = np.empty(d, np.int64)
    ranked = np.argsort(distinct[:d])  # distinct values: no ties
    for r in range(d):
        rank[ranked[r]] = r
    first = np.zeros(d + 1, np.int64)
    for i in range(n):
        first[rank[code[i]] + 1] += 1
    for r in range(d):
        first[r + 1] += first[r]
    order = np.empty(n, np.int64)
    for i in range(n):
        r = rank[code[i]]
        order[first[r]] = i
        first[r] += 1
    return order


@njit(cache=True)
def report_rates(rate, reported, since, now, everything):  # pragma: no cover (compiled)
    """`FlowNetwork._report_rates`' intervals: the links whose reported rate differs from their rate
    (`everything`: every link with a reported rate); of those with a reported rate (and, with
    `everything`, time since), (link, reported since, bytes moved since at that rate), by time
    since (`by_time`), in link order among equal times. Their `since` becomes `now`; their
    reported rate their rate (unless `everything`)."""
    links = np.empty(len(rate), np.int64)  # one pass: at most every link, the first j kept
    t0 = np.empty(len(rate))
    nbytes = np.empty(len(rate))
    j = 0
    for k in range(len(rate)):
        if reported[k] != 0 if everything else reported[k] != rate[k]:
            if reported[k] != 0:
                span = now - since[k]
                if not everything or span > 0:
                    links[j], t0[j], nbytes[j] = k, since[k], reported[k] * span
                    j += 1
            since[k] = now
            if not everything:
                reported[k] = rate[k]
    order = by_time(t0[:j])
    return links[:j][order], t0[:j][order], nbytes[:j][order]
