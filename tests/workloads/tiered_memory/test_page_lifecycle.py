"""Page lifecycles on tiered memory: allocation streams and frees, the watermarks acting on
allocation, kswapd's rate, file-first reclaim, ping-pong, migration costs, and the invariants
(pages conserved, one tier per page, no tier over capacity, same seed same result)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from sim.errors import ScenarioError
from sim.memory.lifecycle import AllocationStream, Lifecycle
from sim.memory.placement import ANON, FAST, FILE, SLOW, UNALLOCATED, PageState, advance
from sim.memory.tiers import Tuning, placement_policy
from sim.runner import run
from sim.scenario.model import load_scenario, scenario_from_dict

# 10-page fast tier: low = 1, high = 2, TPP's demotion watermark = 3 pages
MARKS = Tuning(
    hint_fault_fraction=1.0, watermark_low=0.1, watermark_high=0.2, demote_watermark=0.3, reclaim_batch_pages=1
)
NONE = np.zeros(0, dtype=np.int64)


def state_with(fast_used: int, pages: int = 40, fast: int = 10, kind: int = ANON) -> PageState:
    """`fast_used` old pages (0..fast_used-1) on the fast tier, accessed in epoch 0."""
    st = PageState(pages, fast)
    st.kind[:] = kind
    st.place(np.arange(fast_used), FAST)
    st.key[:fast_used] = 0.5
    return st


def allocate(st: PageState, policy: str, pages, kswapd_pages=math.inf, tuning=MARKS, free=NONE):
    rules = placement_policy(policy, tuning).rules(st.fast_pages)
    counts = np.zeros(st.pages, dtype=np.int64)
    return advance(st, rules, counts, np.random.default_rng(0), 0.0, np.asarray(pages), free, kswapd_pages)


# ---- the watermarks acting on allocation (closed forms) ------------------------------------------


@pytest.mark.parametrize("policy", ["static", "numa_balancing", "tpp", "lru"])
def test_without_pressure_everything_allocates_on_the_fast_tier(policy):
    st = state_with(0, pages=40, fast=40)
    out = allocate(st, policy, np.arange(20))
    assert (out.allocated_fast, out.allocated_slow, out.demoted) == (20, 0, 0)


def test_numa_balancing_burst_beyond_the_low_watermark_spills_and_does_not_wake_kswapd():
    st = state_with(5)  # 5 free, low = 1: room for 4
    out = allocate(st, "numa_balancing", np.arange(10, 18))
    assert (out.allocated_fast, out.allocated_slow, out.demoted) == (4, 4, 0)
    assert st.free == 1  # the tier stays at low: the allocator fell back without waking kswapd


@pytest.mark.parametrize(
    "kswapd_pages, fast, demoted, free_after", [(0, 4, 0, 1), (1, 5, 1, 1), (3, 6, 3, 2), (math.inf, 6, 4, 3)]
)
def test_tpp_burst_takes_its_headroom_plus_what_kswapd_demotes_meanwhile(kswapd_pages, fast, demoted, free_after):
    # 5 old pages, 5 free, low = 1: room for 4 of the 6 new pages. They take the tier below TPP's
    # demotion watermark (3), so kswapd demotes old pages while they go on: fast = min(6, 4 +
    # min(kswapd, 2)), the rest spills; then kswapd restores the demotion watermark (3 free)
    # with what is left of its budget
    st = state_with(5)
    out = allocate(st, "tpp", np.arange(10, 16), kswapd_pages=kswapd_pages)
    assert (out.allocated_fast, out.allocated_slow) == (fast, 6 - fast)
    assert out.demoted == out.kswapd_demoted == demoted
    assert st.free == free_after
    assert (st.tier[10 : 10 + fast] == FAST).all()  # kswapd took old pages, not the new ones


def test_frees_make_room_for_the_next_allocations():
    st = state_with(9)  # full to low
    out = allocate(st, "numa_balancing", np.arange(20, 23), free=np.arange(0, 3))
    assert out.freed == 3 and (out.allocated_fast, out.allocated_slow) == (3, 0)


def test_tpp_page_type_aware_allocation_puts_page_cache_on_the_slow_tier():
    st = state_with(0)
    st.kind[10:14] = FILE
    tuning = dataclasses.replace(MARKS, file_pages_on_slow_tier=True)
    out = allocate(st, "tpp", np.arange(10, 16), tuning=tuning)
    assert (out.allocated_fast, out.allocated_file_slow) == (2, 4)
    assert (st.tier[10:14] == SLOW).all() and (st.tier[14:16] == FAST).all()


def test_reclaim_takes_inactive_page_cache_before_older_anonymous_pages():
    st = state_with(6)
    st.kind[3:6] = FILE
    st.key[:3], st.key[3:6] = 1.2, [2.5, 2.6, 2.7]  # anon older than the file pages
    st.epoch = 3  # neither accessed in this epoch
    assert st.demote(2) == (2, 0)
    assert (st.tier[3:5] == SLOW).all() and (st.tier[:3] == FAST).all()
    st.key[5] = 3.5  # the last file page was accessed in this epoch: it is active, anon goes first
    st.demote(1)
    assert st.tier[5] == FAST and np.count_nonzero(st.tier[:3] == SLOW) == 1


def test_a_page_demoted_before_it_was_accessed_again_is_a_ping_pong():
    tuning = Tuning(hint_fault_fraction=1.0, watermark_low=0, watermark_high=0, reclaim_batch_pages=1)
    rules = placement_policy("numa_balancing", tuning).rules(2)
    st = PageState(4, 2)
    st.place(np.arange(4), SLOW)
    rng = np.random.default_rng(0)

    def epoch(*counts):
        return advance(st, rules, np.array(counts), rng)

    assert epoch(1, 0, 0, 0).promoted == 1  # epoch 1: page 0 promoted
    assert epoch(0, 1, 0, 0).promoted == 1  # epoch 2: page 1 promoted, the tier is full
    out = epoch(0, 0, 1, 0)  # page 2's promotion fails and wakes kswapd: it demotes page 0
    assert (out.promoted, out.demoted, out.ping_pong) == (0, 1, 1) and st.tier[0] == SLOW
    assert epoch(0, 0, 1, 0).promoted == 1  # epoch 4: page 2 promoted
    epoch(0, 1, 2, 0)  # epoch 5: pages 1 and 2 used on the fast tier
    out = epoch(0, 0, 0, 1)  # page 3 fails, kswapd demotes page 1: used since its promotion
    assert (out.demoted, out.ping_pong) == (1, 0) and st.tier[1] == SLOW


# ---- allocation streams (closed forms) -------------------------------------------------------------


def test_steps_further_apart_than_a_lifetime_skip_the_pages_born_and_freed_between_them():
    s = AllocationStream(start_s=0.0, rate_pages_per_s=1000.0, total_pages=None, lifetime_s=0.004)
    lc = Lifecycle([s], first_page=0)
    for t in (0.0, 0.0105, 0.05, 0.0501):
        freed, allocated = lc.step(t)
        assert len(np.unique(allocated)) == len(allocated) <= s.slots
        assert lc.live(0) == s.allocated_by(t) - s.freed_by(t) <= s.slots


def test_churn_keeps_rate_times_lifetime_pages_live_in_distinct_slots():
    s = AllocationStream(start_s=1.0, rate_pages_per_s=1000.0, total_pages=None, lifetime_s=0.25, access_share=1.0)
    assert s.slots == 251
    lc = Lifecycle([s], first_page=7)
    freed, allocated = lc.step(0.5)
    assert len(freed) == len(allocated) == lc.live(0) == 0
    seen_live = []
    for t in np.arange(1.0, 3.0, 0.0137):
        freed, allocated = lc.step(float(t))
        assert len(np.unique(allocated)) == len(allocated)
        seen_live.append(lc.live(0))
        counts, share = lc.counts(1000.0, np.random.default_rng(0), lc.end_page)
        assert share == 1.0 and counts[:7].sum() == 0
        assert (np.flatnonzero(counts) >= 7).all() and (np.flatnonzero(counts) < 7 + 251).all()
    assert max(seen_live[30:]) <= 251 and min(seen_live[30:]) >= 249  # 250 +- 1
    assert s.allocated_by(2.0) == 1001 and s.freed_by(2.0) == 751


def test_a_burst_allocates_everything_at_once_and_frees_it_after_its_lifetime():
    s = AllocationStream(start_s=0.2, rate_pages_per_s=math.inf, total_pages=64, lifetime_s=0.5)
    assert (s.allocated_by(0.19), s.allocated_by(0.2), s.freed_by(0.69), s.freed_by(0.71)) == (0, 64, 0, 64)


# ---- the workload: invariants, determinism, costs ----------------------------------------------------


def scenario(policy="tpp", ratio="1:4", scale=1.0, **workload):
    """4 MiB resident + page cache read at 2 ms + a 2 MiB burst at 10 ms (freed 10 ms later) +
    churn from 5 ms (3 ms lifetimes), over 40 ms; `scale` shrinks every time."""
    return {
        "name": "lifecycle",
        "seed": 5,
        "hardware": {
            "gpus_per_node": 1,
            "nodes": 1,
            "memory_tiers": [
                {"base": "ddr5-host", "name": "ddr5-host", "queue_depth": 1024},
                {"base": "cxl-expander", "name": "cxl-expander", "queue_depth": 1024},
            ],
        },
        "workload": {
            "kind": "tiered_memory",
            "policy": policy,
            "fast_tier": "ddr5-host",
            "slow_tier": "cxl-expander",
            "ratio": ratio,
            "footprint": "4 MiB",
            "duration_s": f"{40 * scale} ms",
            "epoch_accesses": 20_000,
            "allocations": [
                {"page_type": "file", "at": f"{2 * scale} ms", "bytes": "1 MiB", "access_share": 0.05},
                {"at": f"{10 * scale} ms", "bytes": "2 MiB", "lifetime": f"{10 * scale} ms", "access_share": 0.4},
                {
                    "at": f"{5 * scale} ms",
                    "rate": f"{200 / scale} MiB/s",
                    "lifetime": f"{3 * scale} ms",
                    "access_share": 0.3,
                    "zipf_alpha": 1.0,
                },
            ],
            **workload,
        },
    }


@pytest.mark.parametrize("policy", ["static", "lru", "numa_balancing", "tpp"])
@pytest.mark.parametrize("ratio", ["2:1", "1:4"])
def test_pages_are_conserved_in_one_tier_each_and_no_tier_overflows(policy, ratio):
    lru = {"epoch_accesses": 100, "scale": 0.01} if policy == "lru" else {}  # lru: short epochs
    sc = scenario_from_dict(scenario(policy, ratio, **lru))
    cfg = sc.workload
    pages = cfg.address_space(cfg.pages())
    st = PageState(pages, cfg.fast_pages(pages))
    lc = Lifecycle(cfg.streams(), cfg.pages())
    for first, slots, kind in lc.page_types():
        st.kind[first : first + slots] = kind
    rules = placement_policy(policy, cfg.tuning.tuning()).rules(st.fast_pages)
    rng = np.random.default_rng(1)
    allocated = freed = 0
    base = np.random.default_rng(2)
    for k in range(300):
        now = k * 1e-4
        free, alloc = lc.step(now)
        extra, share = lc.counts(200, rng, pages)
        extra[: cfg.pages()] += base.poisson(200 * (1 - share) / cfg.pages(), cfg.pages())
        out = advance(st, rules, extra, rng, now, alloc, free, kswapd_pages=50)
        allocated += out.allocated_fast + out.allocated_slow
        freed += out.freed
        n_fast, n_slow = st.resident()
        assert allocated - freed == n_fast + n_slow == np.count_nonzero(st.tier != UNALLOCATED)
        assert n_fast == st.fast_used <= st.fast_pages
    m = run(sc).metrics
    assert m["pages_allocated"] - m["pages_freed"] == m["pages_resident_fast"] + m["pages_resident_slow"]
    assert m["pages_resident_fast"] <= m["fast_pages"]
    assert m["pages"] == pages and m["pages_freed"] > 0


def test_same_seed_same_result():
    a, b = (run(scenario_from_dict(scenario("numa_balancing"))).metrics for _ in range(2))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_tpp_places_more_new_pages_on_the_fast_tier_than_numa_balancing_under_pressure():
    m = {p: run(scenario_from_dict(scenario(p))).metrics for p in ("numa_balancing", "tpp")}
    assert m["tpp"]["allocation_local_fraction"] > m["numa_balancing"]["allocation_local_fraction"]


def trace_run(tmp_path, trace, **workload):
    path = tmp_path / "t.csv"
    path.write_text("page,count\n" + "".join(f"{p}\n" for p in trace))
    data = scenario(
        "lru",
        "1:1",
        footprint="8 KiB",
        access={"trace": str(path)},
        epoch_accesses=1,
        outstanding_accesses=1,
        threads=1,
        allocations=[],
        **workload,
    )
    del data["workload"]["duration_s"]
    return run(scenario_from_dict(data))


def test_a_synchronous_migration_stalls_the_thread_for_its_page_cost(tmp_path):
    # lru, 1 fast page of 2: access 1 (page 0) allocates locally; access 2 (page 1) demotes page 0
    # synchronously (direct reclaim) before it allocates page 1 locally: one page cost on top
    fast = 110e-9  # ddr5-host latency (catalog)
    first = trace_run(tmp_path, [0], migration_page_cost="10 us").sim_time_s
    r = trace_run(tmp_path, [0, 1], migration_page_cost="10 us")
    assert r.metrics["demotions"] == 1 and r.metrics["local_traffic_fraction"] == 1.0
    assert r.sim_time_s == pytest.approx(first + fast + 10e-6, rel=1e-9)
    assert r.metrics["stall_fraction"] == pytest.approx(10e-6 / r.sim_time_s)


def test_compute_between_accesses_adds_and_overlap_hides_the_shorter_part(tmp_path):
    fast = 110e-9
    for overlap, expected in ((0.0, 4 * (fast + 300e-9)), (1.0, 4 * 300e-9), (0.5, 4 * (300e-9 + fast / 2))):
        r = trace_run(tmp_path, [0, 0, 0, 0], compute_per_access="300 ns", compute_overlap=overlap)
        assert r.sim_time_s == pytest.approx(expected, rel=1e-9)
        assert r.metrics["throughput_relative_to_all_local"] == pytest.approx(1.0)


# ---- scenario errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "allocations, path, text",
    [
        ([{"rate": "1 GiB/s"}], "workload.allocations.0.bytes", "needs bytes, or a rate and a lifetime"),
        (
            [{"bytes": "1 MiB", "access_share": 0.7}, {"bytes": "1 MiB", "access_share": 0.4}],
            "workload.allocations",
            "at most 1",
        ),
    ],
)
def test_bad_allocations_are_one_line_errors_naming_the_key(tmp_path, allocations, path, text):
    import yaml

    data = scenario(allocations=allocations)
    file = tmp_path / "bad.yaml"
    file.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError) as err:
        load_scenario(file)
    message = str(err.value)
    assert "bad.yaml" in message and path in message and text in message and "\n" not in message


def test_unknown_page_type_names_the_allowed_values(tmp_path):
    import yaml

    file = tmp_path / "bad.yaml"
    file.write_text(yaml.safe_dump(scenario(allocations=[{"bytes": "1 MiB", "page_type": "shmem"}])))
    with pytest.raises(ScenarioError) as err:
        load_scenario(file)
    message = str(err.value)
    assert "workload.allocations.0.page_type" in message and "shmem" in message and "anon" in message
