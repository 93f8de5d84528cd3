"""The flow network's fast paths give the straightforward path's results (issue 13).

Each shortcut is compared with the plain computation on small cases, to float rounding:
- `progressive_filling` (entries of unfrozen flows only) vs `max_min_fair` (mat-vecs over all flows),
  and its plain-Python path vs its compiled path (sim/network/filling_kernel.py; identical to the
  last bit), and a flow table that switches to the compiled path midway vs one that never does;
- `bundled_filling` (flows with the same switch-to-switch links filled as one) vs `max_min_fair`
  whenever its exactness check accepts, and the check rejects the cases it must reject;
- `FlowTable` (incremental: only flows whose rate can change are refilled, bytes left kept lazily)
  vs `max_min_fair` over all live flows after every change; flows of a bundle kept in one clock
  (sim/network/flow_clocks.py) finish when and as the plain table's do;
- `FlowNetwork` end to end (finish times, per-link bytes) vs the same network with `plain = True`;
- ECMP paths merged into one row with shared links summed, cached estimates, reused rows;
- the analytical network's plain-Python path for transfers of a few link entries vs its numpy path.
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.network.analytical as network
import sim.network.flow_clocks as flow_clocks
import sim.network.flow_table as flow_table
import sim.network.max_min as max_min
from sim.network.flow_clocks import BundleClocks
from sim.network.flow_table import FlowTable
from sim.network.max_min import bundled_filling, flow_matrix, max_min_fair, progressive_filling
from tests.conftest import make_cluster

CASES = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUNS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Against an exact reference: links within REL_TOL (1e-9) of the lowest level fill together, so a
# rate may sit up to REL_TOL off the exact one at each level it is frozen by, and residuals pass that
# on to later levels: a few REL_TOL (e.g. 2e9 against the exact 1,999,999,998: 1.0e-9 apart).
REL = 4 * max_min.REL_TOL


def random_flows(rng, n_flows, n_links, max_len=4, fractional=True):
    """(lengths, flat link ids, weights): flows over random links, some entries fractional."""
    lengths = rng.integers(1, max_len + 1, n_flows)
    flat = rng.integers(0, n_links, lengths.sum())
    weights = (
        np.where(rng.random(len(flat)) < 0.3, rng.choice([0.25, 0.5], len(flat)), 1.0)
        if fractional
        else np.ones(len(flat))
    )
    return lengths, flat, weights


def reference(lengths, flat, weights, capacity):
    return max_min_fair(flow_matrix(lengths, flat, len(capacity), weights), capacity)


@CASES
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 12))
def test_progressive_filling_equals_max_min_fair(seed, n_flows, n_links):
    rng = np.random.default_rng(seed)
    lengths, flat, weights = random_flows(rng, n_flows, n_links)
    capacity = rng.choice([1.0, 2.0, 5.0, 10.0], n_links) * 1e9  # ties between links are common
    row = np.repeat(np.arange(n_flows), lengths)
    fast = progressive_filling(row, flat, weights, n_flows, capacity)
    assert fast == pytest.approx(reference(lengths, flat, weights, capacity), rel=REL)


@CASES
@given(st.integers(0, 2**32 - 1), st.integers(1, 10), st.integers(1, 30))
def test_few_entries_are_filled_in_python_to_the_last_bit_of_the_compiled_path(seed, n_flows, n_links):
    rng = np.random.default_rng(seed)
    lengths, flat, weights = random_flows(rng, n_flows, n_links, max_len=3)
    assert len(flat) <= max_min._TINY  # the plain-Python path
    capacity = rng.choice([1.0, 2.0, 5.0, 10.0], n_links) * 1e9 * rng.choice([1.0, 1 / 3], n_links)
    row = np.repeat(np.arange(n_flows + 1), np.append(lengths, 0))  # and a flow with no link
    level_py, level_np = np.full(n_links, np.inf), np.full(n_links, np.inf)
    python = progressive_filling(row, flat, weights, n_flows + 1, capacity, level_py)
    saved, max_min._TINY = max_min._TINY, -1
    try:
        compiled = progressive_filling(row, flat, weights, n_flows + 1, capacity, level_np)
    finally:
        max_min._TINY = saved
    assert python.tolist() == compiled.tolist() and python[-1] == np.inf
    assert level_py.tolist() == level_np.tolist()


@CASES
@given(st.integers(0, 2**32 - 1), st.integers(10, 300), st.integers(2, 200))
def test_the_compiled_filling_equals_the_plain_python_one_to_the_last_bit(seed, n_flows, n_links):
    """Many entries and levels, ties between links, fractional entries, unlimited links and flows
    that cross none: the same rates and link levels, bit for bit."""
    rng = np.random.default_rng(seed)
    lengths, flat, weights = random_flows(rng, n_flows, n_links, max_len=6)
    lengths[rng.random(n_flows) < 0.05] = 0
    flat = flat[: lengths.sum()]
    weights = weights[: lengths.sum()] * rng.choice([1.0, 1 / 3], lengths.sum())
    limits = [1.0, 2.0, 5.0, 7.3] + ([np.inf] if seed % 2 else [])  # odd seeds: some unlimited links
    capacity = rng.choice(limits, n_links) * rng.choice([1.0, 1e9], n_links)
    row = np.repeat(np.arange(n_flows), lengths)
    level_py, level_c = np.full(n_links, np.inf), np.full(n_links, np.inf)
    python = progressive_filling(row, flat, weights, n_flows, capacity, level_py, compiled=False)
    compiled = progressive_filling(row, flat, weights, n_flows, capacity, level_c, compiled=True)
    assert python.tolist() == compiled.tolist()
    assert level_py.tolist() == level_c.tolist()
    if not seed % 2:
        assert compiled == pytest.approx(reference(lengths, flat, weights, capacity), rel=REL)


@CASES
@given(st.integers(0, 2**32 - 1), st.integers(10, 200), st.integers(2, 60), st.booleans())
def test_a_filling_done_in_one_level_is_the_plain_python_one_to_the_last_bit(seed, n_flows, n_links, ring):
    """The uncompiled filling's numpy first level (`_one_level_filling`): where every flow freezes
    at the first level (a ring's flows, one per link, all at one rate) its rates and link levels are
    the plain-Python filling's, bit for bit; where some flow would go on filling it declines (None)."""
    rng = np.random.default_rng(seed)
    if ring:  # flow i on links i and i + 1 (mod n): a ring's neighbours on equal links, one level
        n_links = n_flows
        lengths = np.full(n_flows, 2)
        flat = np.stack([np.arange(n_flows), (np.arange(n_flows) + 1) % n_flows], axis=1).ravel()
        weights = np.full(len(flat), rng.choice([1.0, 0.5, 1 / 3]))
        capacity = np.full(n_links, rng.choice([1.0, 7.3]) * 1e9)
    else:
        lengths, flat, weights = random_flows(rng, n_flows, n_links, max_len=4)
        capacity = rng.choice([1.0, 2.0, 5.0, np.inf], n_links) * rng.choice([1.0, 1e9], n_links)
    row = np.repeat(np.arange(n_flows + 1), np.append(lengths, 0))  # and a flow with no link
    level_one, level_py = np.full(n_links, np.inf), np.full(n_links, np.inf)
    one = max_min._one_level_filling(row, flat, weights, n_flows + 1, capacity, level_one)
    python = max_min._python_filling(row.tolist(), flat.tolist(), weights.tolist(), n_flows + 1, capacity, level_py)
    if ring:
        assert one is not None
    if one is not None:
        assert one.tolist() == python.tolist() and one[-1] == np.inf
        assert level_one.tolist() == level_py.tolist()
    else:
        assert len(set(python[:-1].tolist())) > 1  # declined: flows froze at more than one level


def test_a_flow_table_fills_in_python_first_then_compiled_with_the_same_rates(monkeypatch):
    """A table fills in plain Python until PYTHON_FILLING_ENTRIES (a small run never loads numba),
    then compiled: the rates are those of a table that fills compiled from the start."""
    rng = np.random.default_rng(3)
    nic = 10e9
    capacity, shared, path = leaf_spine(4, 4, nic, nic / 3)
    tables = {budget: FlowTable(capacity, shared) for budget in (0, 600, 10**9)}
    for step in range(30):
        n = int(rng.integers(20, 60))
        pairs = [path(*rng.choice(16, 2, replace=False)) for _ in range(n)]
        nbytes = rng.uniform(1e8, 1e9, n)
        doomed = rng.random()
        for budget, table in tables.items():
            monkeypatch.setattr(flow_table, "PYTHON_FILLING_ENTRIES", budget)
            live = table.slots()
            if len(live):
                table.remove(live[np.random.default_rng(step).random(len(live)) < doomed * 0.5])
            lengths, flat, weights = flows_on(pairs)
            table.add(flat, weights, lengths, nbytes, np.full(n, step), np.arange(n), float(step))
            table.recompute(float(step))
    (rates, python_first, python_only) = (tables[b].matrix()[1] for b in (0, 600, 10**9))
    assert rates.tolist() == python_first.tolist() == python_only.tolist()
    assert tables[600]._python_entries >= 600 and tables[10**9]._python_entries > 600


def leaf_spine(leaves, hosts_per_leaf, nic, uplink):
    """A two-level tree: links 0..H-1 host up, H..2H-1 host down, then per leaf one uplink and one
    downlink (the shared links). Returns (capacity, shared, path of a host pair)."""
    hosts = leaves * hosts_per_leaf
    capacity = np.concatenate([np.full(2 * hosts, nic), np.full(2 * leaves, uplink)])
    shared = np.zeros(len(capacity), dtype=bool)
    shared[2 * hosts :] = True

    def path(s, d):
        ls, ld = s // hosts_per_leaf, d // hosts_per_leaf
        return [s, hosts + d] if ls == ld else [s, 2 * hosts + ls, 2 * hosts + leaves + ld, hosts + d]

    return capacity, shared, path


def flows_on(paths):
    lengths = np.array([len(p) for p in paths])
    return lengths, np.concatenate(paths), np.ones(lengths.sum())


def leaf_spine_case(rng, leaves, hosts_per_leaf, nic, uplink, n_flows):
    """Random flows between the hosts of `leaf_spine`: (lengths, flat, weights, capacity, shared)."""
    capacity, shared, path = leaf_spine(leaves, hosts_per_leaf, nic, uplink)
    pairs = [rng.choice(leaves * hosts_per_leaf, 2, replace=False) for _ in range(n_flows)]
    return (*flows_on([path(s, d) for s, d in pairs]), capacity, shared)


def bundle_inputs(lengths, flat, weights, shared):
    """`bundled_filling` inputs, flows keyed by their shared entries (bundled flows first), and the
    order of the flows in them."""
    row = np.repeat(np.arange(len(lengths)), lengths)
    on_shared = shared[flat]
    keys, unit = {}, {}
    for i in range(len(lengths)):
        mine = on_shared & (row == i)
        if mine.any():
            unit[i] = keys.setdefault((tuple(flat[mine]), tuple(weights[mine])), len(keys))
    order = list(unit) + [i for i in range(len(lengths)) if i not in unit]
    position = np.argsort(order)
    u_row = np.array([u for k, u in keys.items() for _ in k[0]], dtype=int)
    u_link = np.array([link for k in keys for link in k[0]], dtype=int)
    u_weight = np.array([w for k in keys for w in k[1]], dtype=float)
    edge = ~on_shared
    e_pos, e_link, e_weight = position[row[edge]], flat[edge], weights[edge]
    b = e_pos < len(unit)
    return (
        np.array([unit[i] for i in unit], dtype=int),
        (u_row, u_link, u_weight),
        (e_pos[b], e_link[b], e_weight[b]),
        (e_pos[~b] - len(unit), e_link[~b], e_weight[~b]),
        len(lengths) - len(unit),
    ), np.array(order)


def test_the_compiled_links_in_use_check_is_the_numpy_one():
    """`FlowNetwork._alone` asks about large link sets compiled (sim/network/links_kernel.py): in
    use means a live flow's entries, a pending arrival or a claim (>= 0) on some link of the set."""
    from sim.network.links_kernel import any_in_use

    rng = np.random.default_rng(11)
    for _ in range(300):
        entries = np.where(rng.random(400) < 0.01, rng.integers(1, 5, 400), 0).astype(np.int64)
        arriving = np.where(rng.random(400) < 0.01, 1, 0).astype(np.int64)
        claimant = np.where(rng.random(400) < 0.01, rng.integers(0, 9, 400), -1).astype(np.int64)
        links = np.unique(rng.integers(0, 400, int(rng.integers(1, 120)))).astype(np.int64)
        expected = bool(entries[links].any() or arriving[links].any() or (claimant[links] >= 0).any())
        assert any_in_use(links, entries, arriving, claimant) == expected


def test_the_compiled_advance_adds_the_numpy_paths_bytes_and_busy_time_to_the_last_bit():
    """`FlowNetwork._advance` of a table that fills compiled adds each link's bytes (rate x dt where
    the rate is not 0) and busy time (dt where the link has entries) in one pass over the links
    listed as in use (sim/network/links_kernel.py `advance`): the same sums as the masked numpy
    additions over every link, as long as every link with entries or a rate is listed. The pass
    drops the idle links from the list and keeps the others."""
    from sim.network.links_kernel import advance

    rng = np.random.default_rng(12)
    n = 500
    link_bytes, busy_s = rng.random(n) * 1e9, rng.random(n)
    expected_bytes, expected_busy = link_bytes.copy(), busy_s.copy()
    listed_links, listed, n_listed = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), 0
    for _ in range(200):
        rate = np.where(rng.random(n) < 0.3, rng.random(n) * 5e10, 0.0)
        entries = np.where(rate != 0, rng.integers(1, 4, n), (rng.random(n) < 0.05).astype(np.int64))
        rate[rng.random(n) < 0.01] = 1e-7  # a rounding residue on a link without entries
        dt = float(rng.random() * 1e-3)
        np.add(expected_bytes, rate * dt, out=expected_bytes, where=rate != 0)
        np.add(expected_busy, dt, out=expected_busy, where=entries > 0)
        used = (entries > 0) | (rate != 0)
        also_idle = rng.random(n) < 0.1  # listed while idle: left out of the sums, dropped
        new = np.flatnonzero((used | also_idle) & ~listed)
        listed_links[n_listed : n_listed + len(new)] = rng.permutation(new)
        listed[new], n_listed = True, n_listed + len(new)
        n_listed = advance(rate, entries.astype(np.int64), link_bytes, busy_s, dt, listed_links, n_listed, listed)
        assert sorted(listed_links[:n_listed]) == list(np.flatnonzero(used)) == list(np.flatnonzero(listed))
    assert np.array_equal(link_bytes, expected_bytes) and np.array_equal(busy_s, expected_busy)


@pytest.mark.parametrize("compiled", [False, True])
def test_the_flow_table_lists_every_link_in_use(compiled):
    """Every link a flow table's flows cross is on its list of links in use (`FlowSlots.listed_links`,
    what the compiled advance passes over), once: listed by numpy calls while the table is small,
    in one compiled pass once it fills compiled (sim/network/links_kernel.py `enlist`)."""
    rng = np.random.default_rng(3)
    capacity = np.full(40, 10e9)
    slots = FlowTable(capacity)
    if compiled:
        slots._python_entries = flow_table.PYTHON_FILLING_ENTRIES
    assert slots.compiled == compiled
    for _ in range(5):
        lengths = rng.integers(1, 4, 6)
        flat = rng.integers(0, 40, int(lengths.sum()))
        k = len(lengths)
        slots.add(flat, np.ones(len(flat)), lengths, np.full(k, 1e6), np.zeros(k, dtype=np.int64), np.arange(k), 0.0)
        listed = slots.listed_links[: slots.n_listed]
        assert len(set(listed.tolist())) == len(listed)
        assert set(np.flatnonzero(slots.link_entries > 0)) <= set(listed.tolist())
        assert np.array_equal(np.flatnonzero(slots.listed), np.sort(listed))


@CASES
@given(st.integers(0, 2**32 - 1), st.sampled_from([1.0, 3.0, 20.0]), st.integers(2, 60))
def test_bundled_filling_is_exact_whenever_its_check_accepts(seed, oversubscription, n_flows):
    rng = np.random.default_rng(seed)
    nic = 10e9
    lengths, flat, weights, capacity, shared = leaf_spine_case(rng, 3, 3, nic, 3 * nic / oversubscription, n_flows)
    capacity = capacity * rng.choice([1.0, 1.0, 0.5], len(capacity))  # some slower NICs
    inputs, order = bundle_inputs(lengths, flat, weights, shared)
    rate = bundled_filling(*inputs, capacity)
    if rate is not None:
        assert rate == pytest.approx(reference(lengths, flat, weights, capacity)[order], rel=REL)


@CASES
@given(st.integers(0, 2**32 - 1), st.sampled_from([1.0, 3.0, 20.0]), st.integers(2, 60), st.booleans())
def test_bundled_filling_compiled_is_the_numpy_one_to_the_last_bit(seed, oversubscription, n_flows, clocks):
    """`bundled_filling` runs as numpy calls (a small table's, `compiled=False`) or as one compiled
    call (sim/network/filling_kernel.py `bundled_fill`): the same rates, the same bundled load on
    the edge links, and the same refusals, with or without rows standing for several flows (clocks,
    `multiplicity`) and with fractional edge entries (per-link sums depend on their order)."""
    rng = np.random.default_rng(seed)
    nic = 10e9
    lengths, flat, weights, capacity, shared = leaf_spine_case(rng, 3, 3, nic, 3 * nic / oversubscription, n_flows)
    edge = ~shared[flat]
    weights[edge] = rng.choice([1.0, 0.5, 1 / 3], int(edge.sum()))
    capacity = capacity * rng.choice([1.0, 1.0, 0.5], len(capacity))
    inputs, _ = bundle_inputs(lengths, flat, weights, shared)
    multiplicity = rng.integers(1, 4, len(inputs[0])).astype(float) if clocks else None
    loads = [np.full(len(capacity), np.nan), np.full(len(capacity), np.nan)]
    plain, compiled = (
        bundled_filling(*inputs, capacity, multiplicity, load, compiled=c) for load, c in zip(loads, (False, True))
    )
    assert (plain is None) == (compiled is None)
    if plain is not None:
        assert np.array_equal(plain, compiled) and np.array_equal(loads[0], loads[1])


def test_bundled_filling_accepts_oversubscribed_all_to_all_and_rejects_nic_bound_flows():
    hosts = 8
    pairs = [(s, d) for s in range(hosts) for d in range(hosts) if s != d]

    def all_to_all(uplink):
        capacity, shared, path = leaf_spine(2, 4, 10e9, uplink)
        return (*flows_on([path(s, d) for s, d in pairs]), capacity, shared)

    # 8:1 oversubscribed uplinks: cross-leaf flows are limited by them, same-leaf flows take the NIC rest
    lengths, flat, weights, capacity, shared = all_to_all(uplink=4 * 10e9 / 8)
    inputs, order = bundle_inputs(lengths, flat, weights, shared)
    rate = bundled_filling(*inputs, capacity)
    assert rate is not None
    assert rate == pytest.approx(reference(lengths, flat, weights, capacity)[order], rel=REL)
    cross = lengths[order] == 4
    assert rate[cross] == pytest.approx(np.full(cross.sum(), 5e9 / 16))  # 16 flows per uplink
    # full bisection: the NICs limit cross-leaf flows, which a bundle of them cannot express
    lengths, flat, weights, capacity, shared = all_to_all(uplink=4 * 10e9)
    assert bundled_filling(*bundle_inputs(lengths, flat, weights, shared)[0], capacity) is None


@RUNS
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_flow_table_rates_equal_a_full_recomputation_after_every_change(seed, with_bundles):
    rng = np.random.default_rng(seed)
    nic = 10e9
    capacity, shared, path = leaf_spine(3, 3, nic, rng.choice([nic, nic / 4]))
    table = FlowTable(capacity, shared if with_bundles else None)
    for step in range(12):
        live = table.slots()
        if len(live) and rng.random() < 0.4:
            table.remove(rng.choice(live, rng.integers(1, len(live) + 1), replace=False))
        if rng.random() < 0.7:
            n = int(rng.integers(1, 25))
            lengths, flat, weights = flows_on([path(*rng.choice(9, 2, replace=False)) for _ in range(n)])
            table.add(flat, weights, lengths, np.full(n, 1e9), np.full(n, step), np.arange(n), float(step))
        table.recompute(float(step))
        matrix, rate = table.matrix()
        if len(rate):
            assert rate == pytest.approx(max_min_fair(matrix, capacity), rel=REL)
            assert table.link_rate == pytest.approx(matrix @ rate, rel=1e-9, abs=1e-3)


@RUNS
@given(st.integers(0, 2**32 - 1))
def test_bundled_flows_run_on_clocks_and_finish_as_in_the_plain_table(seed):
    """An oversubscribed leaf-spine: after a bundled refill the cross-leaf flows join their
    bundle's clock, and a refill costs a row per clock. Run in lockstep with the plain table
    (every flow refilled by `max_min_fair`), flows start at different times and finish one by one:
    the same flows finish at the same instants with the same bytes left along the way."""
    rng = np.random.default_rng(seed)
    capacity, shared, path = leaf_spine(3, 3, 10e9, 10e9 / 4)
    fast, plain = FlowTable(capacity, shared), FlowTable(capacity, shared, plain=True)
    now, started, clocked_rows = 0.0, 0, []
    for step in range(60):
        if step % 6 == 0 and started < 90:  # a batch of flows starts
            n = int(rng.integers(12, 24))  # about 2 flows per leaf pair and more
            lengths, flat, weights = flows_on([path(*rng.choice(9, 2, replace=False)) for _ in range(n)])
            nbytes = rng.uniform(1e8, 1e9, n)
            for table in (fast, plain):
                table.add(flat, weights, lengths, nbytes, np.zeros(n, dtype=int), np.arange(n), now)
            started += n
        for table in (fast, plain):
            table.recompute(now)
        if fast.clocks.members:
            clocked_rows.append((fast.clocks.members, int((fast.clocks.count > 0).sum())))
        assert fast.next_finish() == pytest.approx(plain.next_finish(), rel=REL)
        live = plain.slots()
        assert fast.slots().tolist() == live.tolist()
        assert fast.left_at(live, now) == pytest.approx(plain.left_at(live, now), rel=REL, abs=1.0)
        now = plain.next_finish()
        if now == np.inf:
            break
        done = plain.done(now)
        assert sorted(fast.done(now).tolist()) == sorted(done.tolist())
        for table in (fast, plain):
            table.remove(done)
    assert clocked_rows and max(members - clocks for members, clocks in clocked_rows) > 0  # clocks held several flows


@RUNS
@given(st.integers(0, 2**32 - 1))
def test_load_after_a_bundled_refill_reuses_the_bundled_part_to_the_last_bit(seed):
    """After a bundled refill the new load's edge part starts from the bundled rows' load that
    `bundled_filling` computed (its `edge_load`) and adds the other rows' entries one by one: the
    same additions in the same order as one pass over all entries, so the same bits."""
    checked = []
    one_pass = FlowTable._edge_load

    def both_ways(table, parts, rate):
        load = one_pass(table, parts, rate)
        if "bundled_load" in parts:
            plain = one_pass(table, {k: v for k, v in parts.items() if k != "bundled_load"}, rate)
            assert np.array_equal(load, plain)
            checked.append(True)
        return load

    rng = np.random.default_rng(seed)
    capacity, shared, path = leaf_spine(3, 3, 10e9, 10e9 / 4)
    table = FlowTable(capacity, shared)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FlowTable, "_edge_load", both_ways)
        refill_until_done(table, rng, shared, path, hosts=9, steps=40)
    assert checked


def refill_until_done(table, rng, shared, path, hosts, steps):
    """Every fifth step a batch of flows between random hosts of a leaf-spine starts: cross-leaf
    flows (bundled) and same-leaf ones (not) share the NIC links, with fractional edge entries (the
    per-link sums depend on their order). Each step refills, moves to the next finish and removes
    the flows done then."""
    now = 0.0
    for step in range(steps):
        if step % 5 == 0:
            n = int(rng.integers(12, 24))
            lengths, flat, weights = flows_on([path(*rng.choice(hosts, 2, replace=False)) for _ in range(n)])
            edge = ~shared[flat]
            weights[edge] = rng.choice([1.0, 0.5, 1 / 3], int(edge.sum()))
            nbytes = rng.uniform(1e8, 1e9, n)
            table.add(flat, weights, lengths, nbytes, np.zeros(n, dtype=int), np.arange(n), now)
        table.recompute(now)
        now = table.next_finish()
        if now == np.inf:
            break
        table.remove(table.done(now))


def test_bundled_filling_reports_the_bundled_load_on_edge_links():
    """`edge_load` receives the bundled flows' load per link: their edge entries x their rates."""
    capacity, shared, path = leaf_spine(2, 4, 10e9, 4 * 10e9 / 8)
    pairs = [(s, d) for s in range(8) for d in range(8) if s != d]
    lengths, flat, weights = flows_on([path(s, d) for s, d in pairs])
    inputs, _ = bundle_inputs(lengths, flat, weights, shared)
    edge_load = np.full(len(capacity), np.nan)
    rate = bundled_filling(*inputs, capacity, None, edge_load)
    assert rate is not None
    b_row, b_link, b_weight = inputs[2]
    assert np.array_equal(edge_load, np.bincount(b_link, b_weight * rate[b_row], minlength=len(capacity)))
    assert edge_load[~shared].sum() > 0 and (edge_load[shared] == 0).all()


def test_clock_members_join_heaps_laid_out_as_by_one_push_each():
    """Members joining clocks are pushed per bundle in C (`BundleClocks.join`): each heap is laid out
    exactly as by pushing the members one at a time in the order given (its layout is the order in
    which a clock's members turn back into rows), and the pairs sum their edge entries."""
    rng = np.random.default_rng(7)
    clocks = BundleClocks(num_links=12)
    clocks.ensure(5)
    reference: dict[int, list] = {}
    pairs: dict[tuple[int, int], float] = {}
    next_slot = 0
    for _ in range(4):
        n = int(rng.integers(1, 40))
        slots = np.arange(next_slot, next_slot + n)
        next_slot += n
        bundles = rng.integers(0, 5, n)
        left = rng.choice([1e6, 2e6, 3e6], n)  # ties: (key, slot) orders them
        owner = np.repeat(np.arange(n), 2)
        link, weight = rng.integers(0, 12, 2 * n), rng.choice([1.0, 0.5], 2 * n)
        keys = clocks.join(slots, bundles, left, (owner, link, weight))
        for key, slot, b in zip(keys.tolist(), slots.tolist(), bundles.tolist()):
            heapq.heappush(reference.setdefault(b, []), (key, slot))
        for o, l, w in zip(owner.tolist(), link.tolist(), weight.tolist()):
            code = (int(bundles[o]), l)
            pairs[code] = pairs.get(code, 0.0) + w
    assert clocks.heaps == reference
    p = clocks.pairs
    got = {(b, l): w for b, l, w in zip(*(p.arrays[k][: p.size].tolist() for k in ("bundle", "link", "weight")))}
    assert got == pytest.approx(pairs)


def test_clock_heaps_kept_compiled_are_laid_out_as_heapq_lays_out_the_lists():
    """Once the table fills compiled its clocks keep their heaps in a pool and push and pop them
    compiled (sim/network/heap_kernel.py). Two sets of clocks in lockstep, one compiled and one not,
    through members joining (blocks outgrowing their room), leaving (stale entries popped off the
    tops), falling due, clocks stopped and heaps rebuilt, hold the same entries in the same places
    of every heap, the same heads and due times, and give up the same due members in the same order."""
    rng = np.random.default_rng(5)
    clocks = {mode: BundleClocks(num_links=6) for mode in (False, True)}
    for c in clocks.values():
        c.ensure(6)
        c.rate[:6] = 1e6  # each member sends 1 MB/s from t = 0: a member is due when its key is sent
    alive, clocked, key = np.zeros(4000, dtype=bool), np.zeros(4000, dtype=bool), np.zeros(4000)

    def valid(k, s):
        return bool(alive[s] and clocked[s] and key[s] == k)

    next_slot, now, popped = 0, 0.0, 0
    for step in range(60):
        n = int(rng.integers(1, 60))
        slots = np.arange(next_slot, next_slot + n)
        next_slot += n
        bundles = rng.integers(0, 6, n)
        left = rng.choice([1e6, 2e6, 3e6], n) + now * 1e6  # ties: (key, slot) orders them
        edge = (np.arange(n), rng.integers(0, 6, n), np.ones(n))
        for mode, c in clocks.items():
            keys = c.join(slots, bundles, left, edge, compiled=mode)
            c.retime(np.unique(bundles), compiled=mode)
        alive[slots], clocked[slots], key[slots] = True, True, keys
        gone = slots[rng.random(n) < 0.2]  # some leave before they are due: stale heap entries
        alive[gone] = False
        for mode, c in clocks.items():
            c.leave(bundles[np.isin(slots, gone)], (np.zeros(0, int),) * 3, valid, mode, (alive, clocked, key))
        now += 0.5
        due = {mode: np.asarray(c.due_members(now, valid, (alive, clocked, key) if mode else None)).tolist()
               for mode, c in clocks.items()}  # fmt: skip
        assert due[True] == due[False]
        alive[due[False]] = False
        popped += len(due[False])
        if step % 9 == 4:  # a clock stops: its members become rows
            b = np.array([rng.integers(0, 6)])
            for mode, c in clocks.items():
                s, _ = c.member_slots(b, lambda k, s: alive[s] & clocked[s] & (key[s] == k), mode)
                c.stop(b, mode)
            clocked[s] = False
        if step % 13 == 12:  # the table renumbers its slots: heaps rebuilt from the live members
            live = np.flatnonzero(alive & clocked)
            owner = np.array([next(b for b, h in clocks[False].heap_lists().items() if any(e[1] == x for e in h))
                              for x in live.tolist()], dtype=np.int64)  # fmt: skip
            for mode, c in clocks.items():
                c.rebuild(live, owner, key[live], mode)
        assert clocks[True].heap_lists() == clocks[False].heap_lists()
        for name in ("head", "due", "count"):
            assert np.array_equal(getattr(clocks[True], name)[:6], getattr(clocks[False], name)[:6]), name
    assert popped > 100 and clocks[True]._pooled and not clocks[False]._pooled


def test_region_pairs_are_the_nonempty_pairs_of_the_regions_clocks_in_pair_order():
    """A refill takes the pairs of the clocks in its region (`BundleClocks.region_pairs`): those of
    these bundles still holding entries, in the order the pairs were made (the order in which the
    refill sums their loads per link)."""
    rng = np.random.default_rng(3)
    clocks = BundleClocks(num_links=16)
    clocks.ensure(8)
    n = 200
    owner, link, weight = np.arange(n), rng.integers(0, 16, n), rng.choice([1.0, 0.5], n)
    bundles = rng.integers(0, 8, n)
    clocks.join(np.arange(n), bundles, rng.uniform(1e6, 2e6, n), (owner, link, weight))
    gone = rng.random(n) < 0.3  # some members leave: their pairs may empty
    clocks.leave(bundles[gone], (np.arange(int(gone.sum())), link[gone], weight[gone]), lambda key, slot: True)
    p = clocks.pairs
    made = list(zip(*(p.arrays[k][: p.size].tolist() for k in ("bundle", "link", "weight", "count"))))
    expected = [(b, l, w) for b, l, w, c in made if b in (1, 4, 6) and c > 0]
    assert 0 < len(expected) < len(made)
    got = clocks.region_pairs(np.array([1, 4, 6]))
    assert [a.dtype.kind for a in got] == ["i", "i", "f"]
    assert list(zip(*(a.tolist() for a in got))) == expected


def test_rebuilt_clock_heaps_hold_each_bundles_members_sorted_by_key_and_slot():
    """After the table renumbers its slots (`FlowSlots._compact`) each clock's heap is rebuilt from
    its live members: a sorted list of (key, slot), one per bundle with members."""
    rng = np.random.default_rng(11)
    clocks = BundleClocks(num_links=4)
    n = 300
    bundles = rng.integers(0, 9, n)
    keys = rng.choice([1e6, 2e6, 3e6, 5.5e6], n)  # ties: the slot orders them
    slots = np.sort(rng.choice(1000, n, replace=False))  # ascending, as the table passes them
    clocks.rebuild(slots, bundles, keys)
    expected: dict[int, list] = {}
    for b, key, slot in zip(bundles.tolist(), keys.tolist(), slots.tolist()):
        expected.setdefault(b, []).append((key, slot))
    assert clocks.heaps == {b: sorted(entries) for b, entries in expected.items()}
    clocks.rebuild(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    assert clocks.heaps == {}


def test_flow_table_refills_only_flows_whose_rate_can_change():
    """Two independent links: a flow finishing on the fast one leaves the slow one alone. A refill
    with nothing come or gone changes nothing and says so (the network then reports no rates)."""
    capacity = np.array([1e9, 10e9])
    table = FlowTable(capacity)
    table.add(
        np.array([0, 0, 1, 1]),
        np.ones(4),
        np.ones(4, dtype=int),
        np.full(4, 1e9),
        np.zeros(4, dtype=int),
        np.arange(4),
        0.0,
    )
    assert table.recompute(0.0)  # flows came: rates may have changed
    assert table.rate[:4].tolist() == [0.5e9, 0.5e9, 5e9, 5e9]
    link_rate = table.link_rate.copy()
    assert not table.recompute(0.05)  # nothing came or went: no rate changed (none to report)
    assert np.array_equal(table.link_rate, link_rate)
    refilled = table.refilled_rows
    table.remove(np.array([2]))
    assert table.recompute(0.1)
    assert table.refilled_rows - refilled == 1  # only the other fast flow
    assert table.rate[3] == 10e9 and table.rate[0] == 0.5e9
    assert table.left_at(np.array([0, 3]), 0.1) == pytest.approx([1e9 - 0.05e9, 1e9 - 0.5e9])


TOPOLOGIES = st.sampled_from(
    [
        ({"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2, "oversubscription": 4}, 2),
        ({"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2, "oversubscription": 2, "aggregate_spines": False}, 1),
        ({"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 3}, 2),
        ({"kind": "single-switch"}, 2),
    ]
)


def run_network(topology, gpus_per_node, nodes, flows, plain):
    cluster = make_cluster("flow", nodes=nodes, gpus_per_node=gpus_per_node, topology=topology)
    net, sim = cluster.network, cluster.sim
    net.plain = plain
    finish = [None] * len(flows)

    def one(i, s, d, b, at):
        yield sim.timeout(at)
        yield net.transfer(cluster.devices[s].node, cluster.devices[d].node, b)
        finish[i] = sim.now

    for i, flow in enumerate(flows):
        sim.process(one(i, *flow))
    sim.env.run()
    return finish, net.link_bytes.copy(), net.link_busy_s.copy()


@RUNS
@given(TOPOLOGIES, st.data())
def test_flow_network_matches_the_plain_path(topology_case, data):
    topology, gpn = topology_case
    nodes = 4
    n = nodes * gpn
    flows = data.draw(
        st.lists(
            st.tuples(
                st.integers(0, n - 1),
                st.integers(0, n - 1),
                st.floats(1e5, 5e8),
                st.sampled_from([0.0, 0.0, 1e-4, 7e-4, 2e-3]),
            ),
            min_size=1,
            max_size=30,
        )
    )
    fast = run_network(topology, gpn, nodes, flows, plain=False)
    plain = run_network(topology, gpn, nodes, flows, plain=True)
    assert fast[0] == pytest.approx(plain[0], rel=REL)
    assert fast[1] == pytest.approx(plain[1], rel=1e-9, abs=1e-3)
    assert fast[2] == pytest.approx(plain[2], rel=1e-9, abs=1e-12)


def test_oversubscribed_all_to_all_uses_bundles_and_matches_the_plain_path():
    topology = {"kind": "fat-tree", "hosts_per_leaf": 2, "oversubscription": 4}
    rng = np.random.default_rng(1)
    flows = [(s, d, float(rng.uniform(1e7, 1e8)), 0.0) for s in range(8) for d in range(8) if s != d]
    fast = run_network(topology, 2, 4, flows, plain=False)
    plain = run_network(topology, 2, 4, flows, plain=True)
    assert fast[0] == pytest.approx(plain[0], rel=REL)
    assert fast[1] == pytest.approx(plain[1], rel=1e-9, abs=1e-3)
    cluster = make_cluster("flow", nodes=4, gpus_per_node=2, topology=topology)
    net = cluster.network
    net.transfer_many([(cluster.devices[s].node, cluster.devices[d].node, b) for s, d, b, _ in flows])
    cluster.sim.env.run()
    assert net._table.bundled_refills > 0  # the shortcut was taken, not the fallback


def test_ecmp_paths_merge_into_one_row_per_flow_with_shared_links_summed():
    c = make_cluster(
        nodes=4,
        gpus_per_node=1,
        topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 4, "aggregate_spines": False},
    )
    src, dst = c.devices[0].node, c.devices[3].node
    routed = c.network._route_sized([(src, dst, 8.0)], [src], [dst], np.array([8.0]))
    paths = c.topology.routes(src, dst)
    assert len(paths) == 4 and len(routed.lengths) == 1
    expected = {}
    for p in paths:
        for link in p:
            expected[link] = expected.get(link, 0.0) + 1 / len(paths)
    assert dict(zip(routed.flat.tolist(), routed.weights.tolist())) == pytest.approx(expected)
    assert routed.nbytes.tolist() == [8.0]


def test_cached_estimates_equal_the_path_formula():
    c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2})
    topo, net = c.topology, c.network
    for s in c.devices:
        for d in c.devices:
            paths = topo.routes(s.node, d.node)
            share = 1e8 / len(paths)
            direct = (
                0.0
                if paths == [()]
                else max(topo.path_latency_s(p) + share / topo.capacity[list(p)].min() for p in paths)
            )
            assert net.estimate_time_s(s.node, d.node, 1e8) == net.estimate_time_s(s.node, d.node, 1e8) == direct


def test_a_steps_estimate_is_its_slowest_flows_estimate():
    """`estimate_step_s` (a collective step's uncontended time, in one loop) is the largest
    `estimate_time_s` of its flows, to the bit, and 0 for a step without flows."""
    c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2})
    nodes, rng = [d.node for d in c.devices], np.random.default_rng(0)
    for _ in range(20):
        step = [(nodes[a], nodes[b], float(x)) for a, b, x in zip(*rng.integers(0, 8, (2, 6)), rng.uniform(0, 1e9, 6))]
        slowest = max(c.network.estimate_time_s(s, d, b) for s, d, b in step)
        assert c.network.estimate_step_s(step) == slowest
        assert c.network.estimate_step_s(step[:1]) == c.network.estimate_time_s(*step[0])
    assert c.network.estimate_step_s([]) == 0.0


def _callback_run(model, spec, batched):
    c = make_cluster(model, nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2})
    flows = [(c.devices[s].node, c.devices[d].node, b) for s, d, b in spec]
    done = [None] * len(flows)

    def mark(indices):
        for i in indices:
            assert done[i] is None, "each flow is reported once"
            done[i] = c.sim.now

    if batched:
        c.network.transfer_many(flows, name="batch", on_flow_done=mark)
    else:
        for i, flow in enumerate(flows):
            c.network.transfer_many([flow]).callbacks.append(lambda _e, i=i: mark([i]))
    c.sim.env.run()
    spans = c.sim.recorder.frame()
    return done, spans[spans["name"].str.startswith("batch")]["end_s"].tolist()


def test_trace_tracks_of_many_flows_looked_up_at_once_are_those_of_one_by_one():
    """A transfer's flows are traced on the kind of their first link (`first_link_kind`); the flows of
    a large transfer not seen before are routed at once (`first_link_kinds`, `Topology.route_batch`)
    and get the tracks the pair-by-pair lookup gives: scale-up within a host, NIC across hosts (ECMP:
    the first path's first link), local to itself."""
    c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2})
    nodes = [d.node for d in c.devices]
    pairs = [(s, d) for s in nodes for d in nodes] * 9  # each pair 9 times, itself included
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    one_by_one = [c.network.first_link_kind(s, d) for s, d in pairs]
    c.network._track_cache.clear()
    assert c.network.first_link_kinds(srcs, dsts) == one_by_one
    assert {"scale_up", "nic", "local"} <= set(one_by_one)


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_per_flow_callbacks_report_each_flow_at_its_finish(model):
    """`on_flow_done` reports each flow of a call when it completes (flows without bytes or
    without links at their recorded finish), so a workload can start many independent flows in
    one call (routed as a batch) instead of one call per flow."""
    spec = [(0, 5, 3e8), (1, 5, 1e8), (2, 6, 2e8), (3, 3, 1e8), (4, 7, 0.0), (0, 7, 4e8)]
    done, span_ends = _callback_run(model, spec, batched=True)
    assert done == pytest.approx(span_ends, rel=REL)
    assert len(set(done)) > 2  # flows finish at different times, each reported then


def test_one_call_with_per_flow_callbacks_equals_one_call_per_flow():
    spec = [(0, 5, 3e8), (1, 5, 1e8), (2, 6, 2e8), (3, 3, 1e8), (0, 7, 4e8), (6, 1, 5e7)]
    single, batched = _callback_run("flow", spec, False)[0], _callback_run("flow", spec, True)[0]
    assert batched == pytest.approx(single, rel=REL)


def _analytical_run(spec, few_entries: int):
    saved, network._FEW_ENTRIES = network._FEW_ENTRIES, few_entries
    try:
        c = make_cluster(
            "analytical", nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2}
        )
        events = [
            c.network.transfer_many([(c.devices[s].node, c.devices[d].node, b) for s, d, b in flows]) for flows in spec
        ]
        c.sim.env.run()
    finally:
        network._FEW_ENTRIES = saved
    return (
        [e.value for e in events],
        c.network.link_bytes.tolist(),
        c.network.link_busy_s.tolist(),
        c.sim.recorder.frame()["end_s"].tolist(),
    )


def test_analytical_transfers_of_few_entries_match_the_numpy_path_to_the_last_bit():
    """Small transfers (an ECMP-sprayed cross-leaf flow, an NVLink flow, a flow to itself, flows
    sharing links) take the plain-Python path; every time and byte count equals the numpy path's."""
    spec = [[(0, 5, 3e8)], [(1, 0, 1e8)], [(2, 2, 1e8)], [(0, 5, 2e8), (1, 5, 1e8), (4, 0, 7e7)], [(3, 6, 0.0)]]
    assert max(network._FEW_ENTRIES, 0) >= 12  # each call above is "few"
    few, vectorised = _analytical_run(spec, network._FEW_ENTRIES), _analytical_run(spec, -1)
    assert few == vectorised
    assert sum(few[1]) > 0 and len(set(few[3])) > 2


@pytest.mark.parametrize("start_s", [0.0, 3.0, 1e4, 7.123456789])
def test_a_trajectorys_last_flow_is_the_max_and_argmax_of_its_ends(start_s):
    """`Trajectory.last_flow(start)`: (max, argmax) of start + finish offsets, without the array,
    to the bit - also where offsets a few ulps apart round onto the same end (argmax: the first)."""
    from sim.engine.replay import StepKey
    from sim.network.base import Routed
    from sim.network.replay import Trajectory

    top = 0.0123
    for offsets in (
        [0.004, top, 0.011, top],  # ties at the top: the first
        [top - 1e-18, top, 0.002],  # a smaller offset that rounds onto the top once shifted
        [top, np.nextafter(top, 0), 0.001],
        [0.5, 0.25],
        [0.0],
    ):
        offsets = np.array(offsets)
        n = len(offsets)
        routed = Routed(np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.ones(n), np.arange(n), np.zeros(n))
        trajectory = Trajectory(
            StepKey(), 0, 2.0, np.ones(n), np.zeros(n), routed, np.zeros(1, dtype=np.int64), None, None
        )
        trajectory.finish(2.0 + offsets.max(), 2.0 + offsets)
        ends = start_s + trajectory.finish_offsets
        assert trajectory.last_flow(start_s) == (ends.max().item(), int(ends.argmax()))


def _same(a, b) -> bool:
    """Equal to the bit, arrays (and their kind of number) and tuples of them alike."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype.kind == np.asarray(b).dtype.kind and np.array_equal(a, b)
    return a == b


@RUNS
@given(st.integers(0, 2**32 - 1))
def test_a_refills_rows_and_loads_compiled_are_the_numpy_ones_to_the_last_bit(seed):
    """Once a table fills compiled it also gathers a refill's rows (`_prepare`: bundled flows first,
    units, shared and edge entries, the clocks' pairs, old rates, old load, residual capacity) and
    sums loads (`_load`) compiled (sim/network/region_kernel.py). On an oversubscribed leaf-spine,
    with clocks and fractional edge entries (per-link sums depend on their order), every refill's
    rows and loads come out of both paths the same to the last bit."""
    mode = {"compiled": False}
    prepare, load = FlowTable._prepare, FlowTable._load
    refills, clocked = [], []

    def both(method, compare):
        def run(table, *args):
            before = mode["compiled"]
            mode["compiled"] = False
            plain = method(table, *args)
            mode["compiled"] = True
            compiled = method(table, *args)
            mode["compiled"] = before
            compare(plain, compiled)
            return plain

        return run

    def same_prepare(plain, compiled):
        (parts, old, old_load, residual), (parts_c, old_c, old_load_c, residual_c) = plain, compiled
        assert parts.keys() == parts_c.keys()
        assert all(_same(parts[k], parts_c[k]) for k in parts), [k for k in parts if not _same(parts[k], parts_c[k])]
        assert _same(old, old_c) and _same(residual, residual_c)
        assert (old_load is None) == (old_load_c is None) and (old_load is None or _same(old_load, old_load_c))
        refills.append(parts["rows"])
        clocked.append(parts["clocks"])

    def same_load(plain, compiled):
        assert _same(plain, compiled)

    rng = np.random.default_rng(seed)
    capacity, shared, path = leaf_spine(4, 6, 10e9, 10e9 / 4)
    table = FlowTable(capacity, shared)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FlowTable, "compiled", property(lambda self: mode["compiled"]))
        patch.setattr(FlowTable, "_prepare", both(prepare, same_prepare))
        patch.setattr(FlowTable, "_load", both(load, same_load))
        refill_until_done(table, rng, shared, path, hosts=24, steps=80)
    assert refills and max(clocked) > 0  # refills with clocks among their rows


@RUNS
@given(st.integers(0, 2**32 - 1))
def test_a_table_that_sums_compiled_keeps_the_per_link_sums_of_one_that_does_not(seed):
    """A table that fills compiled also takes finished flows off its links compiled (`remove`:
    sim/network/region_kernel.py `leave_links`). Two tables in lockstep on an oversubscribed
    leaf-spine, one summing compiled and one not, with fractional edge entries and removals of few
    and of many flows at once (one by one onto the sums, or summed per link first), keep the same
    per-link load, summed entries, entries and bundled entries, the same rates, the same flows'
    bytes left, finish and due times after each refill (`settle_rows`) and the same clocks
    (`BundleClocks.retime`), to the bit."""
    _in_lockstep(np.random.default_rng(seed), uplink=10e9 / 4)


def test_a_refill_in_one_compiled_call_takes_every_way_of_the_step_by_step_one():
    """A table that fills compiled refills in one compiled call (sim/network/refill_kernel.py), which
    hands the region back where clocks must first be turned into per-flow rows: a region with clocks
    in a backoff after a failed bundled check, or whose bundled check fails. On a 2:1 leaf-spine,
    where NIC links bind now and then, every way occurs (nothing to refill, bundled, row by row,
    a failed check with and without clocks, clocks to unclock first) and the table keeps the state
    of one that never compiles, to the bit."""
    import sim.network.refill_kernel as refill_kernel

    refill, outcomes = refill_kernel.refill, set()

    def spy(*args):
        result = refill(*args)
        outcomes.add((int(result[0]), bool(result[6]), bool(result[7])))  # outcome, bundled, check failed
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(refill_kernel, "refill", spy)
        for seed in range(8):
            _in_lockstep(np.random.default_rng(seed), uplink=3 * 10e9)
    done = refill_kernel.REFILLED
    assert {
        (refill_kernel.NOTHING, False, False),
        (refill_kernel.UNCLOCK, False, False),
        (refill_kernel.FAILED, False, True),
        (done, True, False),
        (done, False, False),
        (done, False, True),
    } <= outcomes, outcomes


@RUNS
@given(st.integers(0, 2**32 - 1))
def test_a_refill_of_a_few_of_many_links_works_on_those_and_keeps_every_sum(seed):
    """Among 20,000 idle links (a large fabric, few of whose links a refill's entries touch), a
    compiled refill computes residual capacity, loads and rates on the links its entries touch only
    (sim/network/refill_kernel.py `_touched`), in per-link arrays kept from refill to refill: the
    tables keep the same per-link sums, rates and times as one that never compiles, to the bit."""
    _in_lockstep(np.random.default_rng(seed), uplink=10e9 / 4, idle_links=20_000)


def test_a_kernel_cache_goes_when_a_file_it_compiles_in_is_newer(tmp_path):
    """numba keeps a compiled kernel until the file defining it changes; the one-call refill compiles
    in kernels of other files, so its cache is dropped when one of those is newer than it."""
    import os

    from sim.network.links_kernel import drop_stale_cache

    module, other = tmp_path / "fused.py", tmp_path / "calls.py"
    module.write_text("")
    other.write_text("")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    files = [
        cache / "fused.refill-10.py311.nbi",
        cache / "fused.refill-10.py311.1.nbc",
        cache / "calls.fill-3.py311.nbi",
    ]
    for f in files:
        f.write_text("")
        os.utime(f, (2000.0, 2000.0))
    os.utime(other, (1000.0, 1000.0))
    assert not drop_stale_cache(module, ("calls.py",)) and all(f.exists() for f in files)  # older: kept
    os.utime(other, (3000.0, 3000.0))
    assert drop_stale_cache(module, ("calls.py",))  # newer: the module's own cache goes, no other
    assert [f.exists() for f in files] == [False, False, True]


def _in_lockstep(rng, uplink: float, idle_links: int = 0, edge_weights=(1.0, 0.5, 1 / 3)) -> None:
    """Two tables on a leaf-spine of 4 leaves of 6 hosts (10 Gb/s NICs, `uplink` per leaf), one
    summing compiled and one not, take the same flows and refills; after each refill their per-link
    sums, rates, flows' times and clocks are the same, to the bit (the compiled refills working on
    the links their entries touch, or on every link where the entries are many, in per-link arrays
    kept from refill to refill). `idle_links`: links no flow crosses, after the fabric's;
    `edge_weights`: the weights flows' NIC and host entries take."""
    capacity, shared, path = leaf_spine(4, 6, 10e9, uplink)  # 56 links: a flow alone is "few"
    capacity = np.concatenate([capacity, np.full(idle_links, 10e9)])
    shared = np.concatenate([shared, np.zeros(idle_links, dtype=bool)])
    tables = {mode: FlowTable(capacity, shared) for mode in (False, True)}
    now = 0.0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FlowTable, "compiled", property(lambda self: self.sums_compiled))
        for mode, table in tables.items():
            table.sums_compiled = mode
        for step in range(80):
            if step % 5 == 0:
                n = int(rng.integers(12, 40))
                lengths, flat, weights = flows_on([path(*rng.choice(24, 2, replace=False)) for _ in range(n)])
                edge = ~shared[flat]
                weights[edge] = rng.choice(list(edge_weights), int(edge.sum()))
                nbytes = rng.uniform(1e8, 1e9, n)
                for table in tables.values():
                    table.add(flat, weights, lengths, nbytes, np.zeros(n, dtype=int), np.arange(n), now)
            for table in tables.values():
                table.recompute(now)
            plain, compiled = tables[False], tables[True]
            for name in ("link_rate", "link_weight", "link_entries", "link_bundled"):
                assert np.array_equal(getattr(plain, name), getattr(compiled, name)), name
            assert plain.rates(plain.slots()).tolist() == compiled.rates(compiled.slots()).tolist()
            live = plain.slots()
            for name in ("left", "t_ref", "finish", "due", "fresh"):  # new rates settled compiled, the same
                assert np.array_equal(getattr(plain, name)[live], getattr(compiled, name)[live]), name
            n = plain.clocks.state.size
            for name in ("finish", "due", "v", "t", "rate"):  # clocks moved and retimed compiled, the same
                assert np.array_equal(getattr(plain.clocks, name)[:n], getattr(compiled.clocks, name)[:n]), name
            assert (plain._failures, plain._backoff) == (compiled._failures, compiled._backoff)
            now = plain.next_finish()
            if now == np.inf:
                break
            done = plain.done(now)
            if step % 7 == 3:  # many at once: the live flows a step would finish later too
                live = plain.slots()
                done = np.union1d(done, live[rng.random(len(live)) < 0.5])
            for table in tables.values():
                table.remove(done)


def test_flows_connected_to_no_change_keep_their_rates_compiled_as_in_numpy():
    """A refill leaves out loose unbundled flows connected (through shared edge links, by such
    flows) to no link where flows came or went and no link carrying bundled flows: they see the same
    capacity as before (`FlowTable._affected`). The compiled refill's region (refill_kernel's
    `_region`, through region_kernel's `connected`) is the same flows."""
    from sim.network.refill_kernel import _region

    capacity, shared, path = leaf_spine(2, 4, 10e9, 10e9 / 4)
    table = FlowTable(capacity, shared)
    quiet = [path(3, 2)]  # same leaf, links of its own
    chained = [path(0, 4), path(0, 1), path(2, 1)]  # bundled, then same-leaf flows chained to it
    lengths, flat, weights = flows_on(quiet + chained)
    table.add(flat, weights, lengths, np.full(4, 1e9), np.zeros(4, dtype=int), np.arange(4), 0.0)
    table.recompute(0.0)
    loose, changed = table._loose, np.array(path(6, 7))  # a flow arrives on leaf 1's hosts 6 and 7
    a = table._slots.arrays
    dirty = np.ones(table.num_links, dtype=bool)  # scratch left by an earlier refill: set where read
    compiled = _region(
        loose, -np.inf, changed, a["bundle"], a["fresh"], a["rate"], a["start"], a["length"],
        table._entries.arrays["link"], table.link_bundled, dirty,
    )  # fmt: skip
    assert compiled.tolist() == table._affected(loose, changed).tolist() == [1, 2, 3]  # all but the quiet flow


@RUNS
@given(st.integers(0, 2**32 - 1))
def test_clock_pairs_summed_compiled_are_the_ones_summed_in_numpy(seed):
    """Members joining and leaving clocks add their edge entries to (bundle, link) pairs
    (`BundleClocks._add_pairs`): one by one for a few entries, summed per pair first for many. Summed
    compiled (pairs looked up by their sorted codes) the pairs are made in the same order and hold
    the same weights and counts, to the bit, joins and leaves of few and of many members alike."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flow_clocks, "RESORT_PAIRS", 4)  # the sorted codes rebuilt as pairs are made
        _join_and_leave(seed)


def _join_and_leave(seed):
    rng = np.random.default_rng(seed)
    plain, compiled = BundleClocks(num_links=40), BundleClocks(num_links=40)
    members: list[tuple[int, np.ndarray, np.ndarray]] = []  # (bundle, links, weights) of each
    slot, resorted = 0, []
    for step in range(60):
        if step % 3 == 0 or not members:  # some join: a few, or many
            n = int(rng.choice([1, 3, 40]))
            bundles = rng.integers(0, 12, n)
            lengths = rng.integers(1, 4, n)
            owner = np.repeat(np.arange(n), lengths)
            link = rng.integers(0, 40, int(lengths.sum()))
            weight = rng.choice([1.0, 0.5, 1 / 3, 0.1], len(link))
            for clocks, c in ((plain, False), (compiled, True)):
                clocks.ensure(12)
                clocks.join(np.arange(slot, slot + n), bundles, rng.uniform(1e6, 2e6, n), (owner, link, weight), c)
            members += [(int(b), link[owner == i], weight[owner == i]) for i, b in enumerate(bundles)]
            slot += n
        else:  # some leave
            k = int(rng.integers(1, len(members) + 1))
            gone, members = members[:k], members[k:]
            bundles = np.array([b for b, _, _ in gone])
            owner = np.repeat(np.arange(k), [len(l) for _, l, _ in gone])
            link = np.concatenate([l for _, l, _ in gone])
            weight = np.concatenate([w for _, _, w in gone])
            for clocks, c in ((plain, False), (compiled, True)):
                clocks.leave(bundles, (owner, link, weight), lambda key, s: True, c)
        assert plain.pairs.size == compiled.pairs.size
        resorted.append(len(compiled._sorted[0]))
        for name in ("bundle", "link", "weight", "count"):
            n = plain.pairs.size
            assert np.array_equal(plain.pairs.arrays[name][:n], compiled.pairs.arrays[name][:n]), name
    assert max(resorted) > 0  # looked up in the sorted codes too


def test_a_run_whose_flow_table_sums_compiled_has_the_metrics_of_one_that_does_not(monkeypatch):
    """A flow table switches to its compiled fillings, rows, loads, closures, pair sums and clock
    times once it has filled PYTHON_FILLING_ENTRIES in plain Python. An oversubscribed fat-tree
    all-to-all (bundles and clocks) run compiled from its first refill and run never compiled has
    every metric and every link's bytes and busy time the same, to the bit."""
    from sim import load_scenario, run

    metrics, links = {}, {}
    for budget in (0, 10**12):
        monkeypatch.setattr(flow_table, "PYTHON_FILLING_ENTRIES", budget)
        result = run(load_scenario("scenarios/alltoall-fattree-oversub.yaml"))
        metrics[budget], links[budget] = result.metrics, result.links
    assert metrics[0] == metrics[10**12]
    assert links[0].equals(links[10**12])  # per link: bytes, busy time, utilisation


def test_a_network_whose_table_sums_compiled_reports_the_same_rate_intervals(monkeypatch):
    """At each update the flow network tells its traffic observers what the links whose rate changed
    moved at their last reported rate, and at the end what every link moved since (`_report_rates`;
    compiled once the table fills compiled: sim/network/region_kernel.py `report_rates`). Run compiled
    from the first refill and never compiled, the observers get the same calls with the same links,
    times and bytes, in the same order, to the bit."""
    from sim import load_scenario, run
    from sim.engine.link_traffic import LinkTraffic

    on_subflows = LinkTraffic.on_subflows
    calls: dict[int, list] = {}
    for budget in (0, 10**12):
        seen = calls[budget] = []

        def spy(self, t0, t1, flat, lengths, nbytes, seen=seen):
            seen.append([np.array(v, dtype=float).tolist() for v in (t0, t1, flat, lengths, nbytes)])
            on_subflows(self, t0, t1, flat, lengths, nbytes)

        monkeypatch.setattr(flow_table, "PYTHON_FILLING_ENTRIES", budget)
        monkeypatch.setattr(LinkTraffic, "on_subflows", spy)
        run(load_scenario("scenarios/emb-dlrm-16x8-a100-fat-tree-oversub.yaml"))
    assert len(calls[0]) > 100
    assert calls[0] == calls[10**12]
    for t0, _, links, *_ in calls[0]:  # by start, in link order among equal starts
        assert sorted(zip(t0, links)) == list(zip(t0, links))


def test_members_leave_their_clocks_in_one_compiled_call_as_step_by_step(monkeypatch):
    """Finished members leave their clocks in one compiled call (sim/network/clock_kernel.py
    `leave`: counts, pairs, heaps, head times) where their pairs are all among the sorted pair
    codes, else step by step (pairs made since the codes were sorted are found in a dict). With the
    codes sorted again after a few new pairs, both ways occur, and tables in lockstep keep the
    state of one that never compiles, to the bit."""
    import sim.network.clock_kernel as clock_kernel

    monkeypatch.setattr(flow_clocks, "RESORT_PAIRS", 4)
    leave, ways = clock_kernel.leave, set()

    def spy(*args):
        done = leave(*args)
        ways.add(bool(done))
        return done

    monkeypatch.setattr(clock_kernel, "leave", spy)
    for seed in range(4):
        _in_lockstep(np.random.default_rng(seed), uplink=10e9 / 4)
    assert ways == {True, False}


@pytest.mark.parametrize("seed", range(6))
def test_intervals_ordered_by_time_compiled_are_in_a_stable_sorts_order(seed):
    """A rate update hands its intervals over by start (`region_kernel.by_time`): counted where they
    start at a few distinct times, merge-sorted where at many; either way the order of a stable
    sort, equal times keeping their order."""
    from sim.network.region_kernel import _FEW_TIMES, by_time

    rng = np.random.default_rng(seed)
    distinct = [1, 3, _FEW_TIMES, _FEW_TIMES + 1, 500, 1][seed]
    times = rng.choice(rng.random(distinct) * 10.0, size=[0, 1, 2000, 2000, 2000, 700][seed])
    assert by_time(times).tolist() == np.argsort(times, kind="stable").tolist()


def test_pairs_grouped_by_bundle_list_each_bundles_pairs_made_before_the_grouping(monkeypatch):
    """A compiled refill finds its clocks' pairs through the pairs grouped by bundle
    (`BundleClocks.pairs_by_bundle`): each bundle's run holds its pairs made before the last
    grouping, in the order they were made; pairs made since stay out until enough were made."""
    monkeypatch.setattr(flow_clocks, "RESORT_PAIRS", 8)
    rng = np.random.default_rng(5)
    clocks = BundleClocks(num_links=50)
    clocks.ensure(6)
    for step in range(12):
        n = int(rng.integers(1, 6))
        bundles = rng.integers(0, 6, n)
        link = rng.integers(0, 50, n)
        clocks.join(np.arange(n) + 10 * step, bundles, np.full(n, 1e6), (np.arange(n), link, np.ones(n)))
        start, ids, grouped, in_order = clocks.pairs_by_bundle()
        made = clocks.pairs.arrays["bundle"][:grouped].tolist()
        assert 0 < grouped <= clocks.pairs.size <= grouped + max(8, grouped // 4)
        for b in range(6):
            assert ids[start[b] : start[b + 1]].tolist() == [p for p, owner in enumerate(made) if owner == b]
        assert in_order == (made == sorted(made))  # numbered bundle by bundle: the runs are in pair order
        assert not in_order or ids.tolist() == list(range(grouped))


def test_a_refill_takes_its_clocks_pairs_run_by_run_or_by_marks_in_the_same_order(monkeypatch):
    """A compiled refill gathers its clocks' pairs in pair order (region_kernel `prepare`): run by
    run in clock order where the grouped pairs are numbered bundle by bundle (a table whose pairs
    came in its first join), else by marking them through the runs and reading the marks off.
    Regrouped often, the pairs of tables in lockstep come both ways, and each refill's rows are
    those of the table that never compiles, to the bit."""
    monkeypatch.setattr(flow_clocks, "RESORT_PAIRS", 8)
    pairs_by_bundle, ways = BundleClocks.pairs_by_bundle, set()

    def spy(clocks):
        grouping = pairs_by_bundle(clocks)
        ways.add(grouping[3])
        return grouping

    monkeypatch.setattr(BundleClocks, "pairs_by_bundle", spy)
    for seed in range(4):
        _in_lockstep(np.random.default_rng(seed), uplink=10e9 / 4)
    assert ways == {True, False}


def _units_case(rng, weights):
    """A refill's rows as `refill_kernel.refill` hands them to a row-by-row filling: bundled rows
    (each with its unit's shared entries) first, then single flows; edge entries for every row."""
    n_links, units = int(rng.integers(3, 40)), int(rng.integers(1, 8))
    n_unit, n_single = int(rng.integers(1, 30)), int(rng.integers(0, 20))
    unit = rng.integers(0, units, n_unit).astype(np.int64)
    shared = [(x, int(link)) for x in range(units) for link in rng.choice(n_links, int(rng.integers(0, 4)), False)]
    u_row = np.array([x for x, _ in shared], dtype=np.int64)
    u_link = np.array([link for _, link in shared], dtype=np.int64)
    edge = [
        (r, int(link))
        for r in range(n_unit + n_single)
        for link in rng.choice(n_links, int(rng.integers(0 if r < n_unit else 1, 4)), False)
    ]
    e_row = np.array([r for r, _ in edge], dtype=np.int64)
    e_link = np.array([link for _, link in edge], dtype=np.int64)
    capacity = rng.choice([10.0, 25.0, 100.0 / 3], n_links) * rng.uniform(0.5, 2.0, n_links)
    return (
        unit, units, u_row, u_link, rng.choice(weights, len(u_row)), e_row, e_link, rng.choice(weights, len(e_row)),
        n_unit + n_single, capacity,
    )  # fmt: skip


@CASES
@given(st.integers(0, 2**32 - 1))
def test_rows_filled_with_their_units_counted_are_the_expanded_rows_filled_to_the_last_bit(seed):
    """`fill_units` counts a unit's shared entries once per unfrozen row instead of expanding them
    row by row (`_expanded`): where the weights are multiples of a power of two (every sum exact, in
    any order) it gives `fill_with`'s rates over the expanded entries to the last bit, and it leaves
    the per-link map as it found it."""
    from sim.network.filling_kernel import fill_units, fill_with
    from sim.network.refill_kernel import _expanded

    unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight, n, capacity = _units_case(
        np.random.default_rng(seed), [0.125, 0.5, 1.0, 2.0, 3.0, 7.0]
    )
    compact = np.full(len(capacity), -1, dtype=np.int64)
    expanded, by_units = np.empty(n), np.empty(n)
    row, link, weight = _expanded(unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight)
    fill_with(row, link, weight, n, capacity, expanded, np.zeros(0), False, compact)
    assert fill_units(unit, units, u_row, u_link, u_weight, e_row, e_link, e_weight, n, capacity, by_units, compact)
    assert np.array_equal(by_units, expanded)
    assert (compact == -1).all()


def test_rows_with_weights_whose_sums_round_are_left_to_the_expanded_filling():
    """A third of a flow on a link (an ECMP split over three paths) sums differently in another
    order: `fill_units` declines (False) and fills nothing, so the refill expands the rows."""
    from sim.network.filling_kernel import exact_sums, fill_units

    assert exact_sums(np.array([0.5, 1.0, 3.0]), 1000)
    assert not exact_sums(np.array([1.0, 1 / 3]), 1000)
    assert not exact_sums(np.array([1.0]), 1 << 40)  # too many entries for exact sums
    case = _units_case(np.random.default_rng(0), [1 / 3])
    rate = np.full(case[8], -1.0)
    compact = np.full(len(case[9]), -1, dtype=np.int64)
    assert not fill_units(*case, rate, compact)
    assert (rate == -1.0).all() and (compact == -1).all()


def test_row_by_row_refills_of_whole_weights_count_units_and_keep_the_step_by_step_state():
    """With weights whose sums are exact (whole numbers and halves), a compiled table fills its
    row-by-row refills with `fill_units` - in the one-call refill and where clocks were turned back
    into rows first (`FlowTable._row_level`) - and keeps the state of a table that expands the rows,
    to the bit; refills where thirds meet on a link expand them."""
    import sim.network.filling_kernel as filling_kernel
    import sim.network.refill_kernel as refill_kernel

    fill_units, taken = filling_kernel.fill_units, []

    def spy(*args):
        taken.append(fill_units(*args))
        return taken[-1]

    for weights, exact in (((1.0, 0.5, 2.0), True), ((1.0, 1 / 3), False)):
        taken.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(filling_kernel, "fill_units", spy)  # `_row_level`'s
            patch.setattr(refill_kernel, "fill_units", spy)  # the one-call refill's, run as Python:
            patch.setattr(refill_kernel, "refill", refill_kernel.refill.py_func)  # it calls the spy
            for seed in range(4):
                _in_lockstep(np.random.default_rng(seed), uplink=3 * 10e9, edge_weights=weights)
        assert taken and all(taken) == exact, (weights, taken)  # thirds: expanded where they meet
