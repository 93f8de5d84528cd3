"""Tiered memory placement: hand-computed traces, watermarks, rate limits, migration bytes on links,
the steady-state faces of the policies against the epoch engine, and the workload's contracts.

The hand trace used throughout: pages 0 1 0 0 2 0 1 1 1 1 (one access per epoch, so the engine
replays access by access) on a 4-page footprint whose fast tier holds 1 page (ratio 1:3); the
sampled policies fault on every access (hint_fault_fraction 1) and have no watermarks.
"""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import pytest

from sim.errors import ScenarioError
from sim.memory.access import load_trace
from sim.memory.placement import SLOW as SLOW_TIER
from sim.memory.tiers import PageState, Tuning, ZipfRows, advance, placement_policy
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.cost import CostModel

TRACE = [0, 1, 0, 0, 2, 0, 1, 1, 1, 1]
EXACT = Tuning(hint_fault_fraction=1.0, watermark_low=0, watermark_high=0, demote_watermark=0, reclaim_batch_pages=1)


def replay(policy: str, trace=TRACE, pages=4, fast=1, tuning=EXACT):
    """Per access: (local?, promoted, demoted) through the engine, one access per epoch."""
    st = PageState(pages, fast)
    rules = placement_policy(policy, tuning).rules(fast)
    rng = np.random.default_rng(0)
    steps = []
    for page in trace:
        out = advance(st, rules, np.bincount([page], minlength=pages), rng, 0.0)
        steps.append((int(out.local), out.promoted, out.demoted))
    return steps


def totals(steps):
    return tuple(int(sum(s[i] for s in steps)) for i in range(3))


# ---- hand-computed traces ----------------------------------------------------------------------


def test_static_first_touch_keeps_page_0_local_and_never_migrates():
    # 0 is touched first and takes the only fast page; 1 and 2 land on the slow tier for good
    assert totals(replay("static")) == (4, 0, 0)  # page 0's four accesses are local


def test_lru_promotes_every_slow_access_and_evicts_the_least_recent():
    # 0 new->fast | 1 new->fast, 0 out | 0 miss, in; 1 out | 0 hit | 2 new->fast, 0 out |
    # 0 miss, in; 2 out | 1 miss, in; 0 out | 1 hit | 1 hit | 1 hit
    steps = replay("lru")
    assert [s[0] for s in steps] == [1, 1, 0, 1, 1, 0, 0, 1, 1, 1]
    assert totals(steps) == (7, 3, 5)


def test_tpp_needs_two_faults_and_room_made_by_kswapd():
    # 1 and 2 fall back to slow at first touch (not sampled yet); access 7 faults page 1 and only
    # activates it; access 8 faults it again but the tier is full: the promotion fails and wakes
    # kswapd, which demotes page 0; access 9 promotes page 1, access 10 finds it local
    steps = replay("tpp")
    assert [s[0] for s in steps] == [1, 0, 1, 1, 0, 1, 0, 0, 0, 1]
    assert totals(steps) == (5, 1, 1)
    assert [s[1:] for s in steps][6:9] == [(0, 0), (0, 1), (1, 0)]


def test_engine_lru_with_one_access_per_epoch_is_an_exact_lru():
    rng = np.random.default_rng(3)
    pages, fast = 50, 8
    trace = ZipfRows(pages, 0.9).sample(rng, 3000) - 1
    st = PageState(pages, fast)
    st.place(np.arange(pages), SLOW_TIER)  # a cache: first accesses miss too
    rules = placement_policy("lru").rules(fast)
    engine_hits = sum(int(advance(st, rules, np.bincount([p], minlength=pages), rng).local) for p in trace)
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for p in trace.tolist():
        if p in cache:
            cache.move_to_end(p)
            hits += 1
        else:
            cache[p] = None
            if len(cache) > fast:
                cache.popitem(last=False)
    assert engine_hits == hits


# ---- watermarks and rate limits ----------------------------------------------------------------


def first_touch_20_pages(policy: str):
    """20 pages touched once on a 10-page fast tier, low = 1, high = 2, TPP demote = 3 pages."""
    tuning = Tuning(
        hint_fault_fraction=1.0, watermark_low=0.1, watermark_high=0.2, demote_watermark=0.3, reclaim_batch_pages=1
    )
    st = PageState(20, 10)
    rules = placement_policy(policy, tuning).rules(10)
    out = advance(st, rules, np.ones(20, dtype=np.int64), np.random.default_rng(0))
    return st, rules, out


def test_allocation_keeps_the_low_watermark_and_kswapd_restores_its_target():
    st, _, out = first_touch_20_pages("numa_balancing")
    assert (out.allocated_fast, out.allocated_slow) == (9, 11)  # fast fills until 1 page (low) is free
    # the allocator falls back to the slow node without waking kswapd: the tier stays at low
    assert (out.demoted, st.free) == (0, 1)
    st, _, out = first_touch_20_pages("tpp")
    assert (out.allocated_fast, out.demoted, st.free) == (9, 2, 3)  # TPP: to its demote watermark


def test_tpp_promotes_into_its_headroom_while_numa_balancing_first_fails_and_wakes_kswapd():
    hot = np.zeros(20, dtype=np.int64)
    hot[15] = 2  # a page on the slow tier
    st, rules, _ = first_touch_20_pages("tpp")
    first, second = (advance(st, rules, hot, np.random.default_rng(0)) for _ in range(2))
    assert (first.promoted, first.demoted) == (0, 0)  # the first fault activates it
    assert (second.promoted, second.demoted, st.free) == (1, 1, 3)  # promoted into the headroom, refilled
    st, rules, _ = first_touch_20_pages("numa_balancing")
    first, second = (advance(st, rules, hot, np.random.default_rng(0)) for _ in range(2))
    assert (first.promoted, first.demoted) == (0, 2)  # free = low < high: refused, kswapd to high + 1
    assert second.promoted == 1


def test_classic_numa_balancing_stops_promoting_once_the_fast_tier_is_full():
    classic = Tuning(
        hint_fault_fraction=1.0,
        watermark_low=0,
        watermark_high=0,
        reclaim_batch_pages=1,
        failed_promotion_wakes_kswapd=False,
    )
    assert totals(replay("numa_balancing", tuning=classic)) == totals(replay("static"))
    assert totals(replay("numa_balancing"))[1] > 0  # tiering mode promotes


def test_promotion_rate_limit_counts_bytes_per_one_second_window():
    tuning = Tuning(
        hint_fault_fraction=1.0,
        rate_limit_bytes_per_s=2 * 4096,
        watermark_low=0,
        watermark_high=0,
        reclaim_batch_pages=1,
    )
    st = PageState(10, 10)
    st.place(np.arange(10), SLOW_TIER)
    rules = placement_policy("numa_balancing", tuning).rules(10)
    counts = np.ones(10, dtype=np.int64)
    promoted = [advance(st, rules, counts, np.random.default_rng(0), t).promoted for t in (0.0, 0.5, 1.0, 1.2)]
    assert promoted == [2, 0, 2, 0]


# ---- the steady state (embedding face) agrees with the engine ------------------------------------


@pytest.mark.parametrize(
    "policy, demote", [("static", 0.0), ("lru", 0.0), ("numa_balancing", 0.0), ("tpp", 0.0), ("tpp", 0.05)]
)
def test_steady_state_hit_and_promotion_rates_match_the_engine_on_a_zipf_stream(policy, demote):
    pages, fast, epoch = 1000, 200, 10
    tuning = Tuning(
        hint_fault_fraction=0.05, watermark_low=0, watermark_high=0, demote_watermark=demote, reclaim_batch_pages=1
    )
    p = placement_policy(policy, tuning)
    dist = ZipfRows(pages, 0.8)
    rng = np.random.default_rng(11)
    stream = dist.sample(rng, 200_000) - 1
    st, rules = PageState(pages, fast), p.rules(fast)
    local = promoted = accesses = 0.0
    for i in range(0, len(stream), epoch):
        out = advance(st, rules, np.bincount(stream[i : i + epoch], minlength=pages), rng)
        if i >= 50_000:
            local, promoted, accesses = local + out.local, promoted + out.promoted, accesses + out.local + out.remote
    assert local / accesses == pytest.approx(p.hit_rate(dist, fast), abs=0.02)
    assert promoted / accesses == pytest.approx(p.promotion_rate(dist, fast), rel=0.15, abs=1e-3)


def test_sampled_policies_tend_to_pinning_the_hottest_rows_and_lru_to_che():
    dist = ZipfRows(1_000_000, 1.0)
    tpp, nb = placement_policy("tpp"), placement_policy("numa_balancing")
    pinned, lru = placement_policy("static_hot_rows"), placement_policy("lru")
    c = 20_000
    assert lru.hit_rate(dist, c) < nb.hit_rate(dist, c) < pinned.hit_rate(dist, c)
    assert tpp.hit_rate(dist, c) < nb.hit_rate(dist, c)  # TPP's 2% headroom costs capacity
    assert lru.promotion_rate(dist, c) == pytest.approx(1 - lru.hit_rate(dist, c))


def test_the_embedding_hbm_cache_uses_the_shared_policies():
    data = {
        "name": "t",
        "hardware": {"gpu": "a100-sxm-80gb", "gpus_per_node": 1, "nodes": 1, "memory_tiers": ["ddr5-host"]},
        "workload": {
            "kind": "embedding_training",
            "tables": [{"name": "t", "rows": 100_000, "dim": 16, "pooling": 4, "zipf_alpha": 1.0}],
            "dense": {"bottom_mlp": [13, 16], "top_mlp": [16, 1], "interaction": "dcn", "interaction_rank": 16},
        },
    }
    from sim.models.dlrm import Table
    from sim.workloads.embedding.cost import Shard

    out = {}
    for policy in ("lru", "numa_balancing"):
        data["workload"]["sharding"] = {"cache_policy": policy}
        sc = scenario_from_dict(data)
        model = CostModel(sc.hardware, sc.workload)
        assert model.cache is not None and model.cache.name == policy
        table = Table(name="t", rows=100_000, dim=16, pooling=4, zipf_alpha=1.0, dtype="fp16")
        shard = Shard(
            table,
            "table_wise",
            0,
            1,
            100_000,
            16,
            lookups=1000.0,
            rank=0,
            cache_rows=20_000,
            tier_rows={"ddr5-host": 100_000},
        )
        out[policy] = [(a.tier, a.write, a.count) for a in model.traffic(shard).fwd]
    lru_hit = placement_policy("lru").hit_rate(ZipfRows(100_000, 1.0), 20_000)
    fills = [c for t, w, c in out["lru"] if t == "ddr5-host" and not w]
    assert fills == [pytest.approx(1000 * (1 - lru_hit))]  # every LRU miss fills the cache
    nb_reads = [c for t, w, c in out["numa_balancing"] if t == "ddr5-host" and not w]
    assert len(nb_reads) == 2 and nb_reads[0] < nb_reads[1]  # few promoted fills, most misses in place


# ---- the workload --------------------------------------------------------------------------------


def workload_scenario(tmp_path=None, trace=TRACE, **workload):
    data = {
        "name": "tiered-test",
        "seed": 3,
        "hardware": {
            "gpus_per_node": 1,
            "nodes": 1,
            "memory_tiers": [
                {"base": "ddr5-host", "name": "ddr5-host", "queue_depth": 1024},
                {"base": "cxl-expander", "name": "cxl-expander", "queue_depth": 1024},
            ],
        },
        "workload": {"kind": "tiered_memory", "fast_tier": "ddr5-host", "slow_tier": "cxl", **workload},
    }
    if tmp_path is not None:
        path = tmp_path / "trace.csv"
        path.write_text("page,count\n" + "".join(f"{p}\n" for p in trace))
        data["workload"].setdefault("access", {"trace": str(path)})
        data["workload"].setdefault("ratio", "1:3")
        data["workload"].setdefault("footprint", "16 KiB")  # 4 pages of 4 KiB
        data["workload"].setdefault("epoch_accesses", 1)
    return data


def tuning_of(t: Tuning) -> dict:
    return {
        "hint_fault_fraction": t.hint_fault_fraction,
        "watermark_low": t.watermark_low,
        "watermark_high": t.watermark_high,
        "demote_watermark": t.demote_watermark,
        "reclaim_batch_pages": t.reclaim_batch_pages,
    }


@pytest.mark.parametrize("policy, local, promoted, demoted", [("static", 4, 0, 0), ("lru", 7, 3, 5), ("tpp", 5, 1, 1)])
def test_trace_replay_metrics_and_migration_bytes_on_the_links(tmp_path, policy, local, promoted, demoted):
    # migration_page_cost 0: kswapd keeps up with one-access epochs (its budget: tests of lifecycles)
    data = workload_scenario(tmp_path, policy=policy, tuning=tuning_of(EXACT), migration_page_cost=0)
    r = run(scenario_from_dict(data))
    m = r.metrics
    assert m["local_traffic_fraction"] == local / 10
    assert (m["promotions"], m["demotions"], m["pages"], m["fast_pages"]) == (promoted, demoted, 4, 1)
    assert m["promotions_per_s"] == pytest.approx(promoted / r.sim_time_s)
    links = r.links.set_index("link")["bytes"]
    page = 4096
    assert links["h0/ddr5-host->h0/cpu"] == pytest.approx(local * 64 + demoted * page)  # reads + demotions out
    assert links["h0/cxl-expander->h0/cpu"] == pytest.approx((10 - local) * 64 + promoted * page)
    assert links["h0/cpu->h0/ddr5-host"] == pytest.approx(promoted * page)  # promotions in
    assert links["h0/cpu->h0/cxl-expander"] == pytest.approx(demoted * page)
    assert 0 < m["throughput_relative_to_all_local"] <= 1.0


def test_all_local_traffic_runs_at_the_all_local_throughput(tmp_path):
    m = run(
        scenario_from_dict(
            workload_scenario(
                tmp_path, trace=[0, 0, 0, 0], policy="static", ratio="1:1", footprint="8 KiB", epoch_accesses=2
            )
        )
    ).metrics
    assert m["local_traffic_fraction"] == 1.0
    assert m["throughput_relative_to_all_local"] == pytest.approx(1.0)


GENERATED = {
    "footprint": "8 MiB",
    "ratio": "1:4",
    "duration_s": "0.2 s",
    "epoch_accesses": 200_000,
    "access": {"distribution": "hot_set", "hot_fraction": 0.05, "hot_access_fraction": 0.9, "phase_s": "0.1 s"},
}


def test_generated_stream_is_deterministic_and_tpp_beats_static_after_a_phase_change():
    runs = {p: run(scenario_from_dict(workload_scenario(policy=p, **GENERATED))).metrics for p in ("static", "tpp")}
    again = run(scenario_from_dict(workload_scenario(policy="tpp", **GENERATED))).metrics
    assert json.dumps(runs["tpp"], sort_keys=True) == json.dumps(again, sort_keys=True)
    static, tpp = runs["static"], runs["tpp"]
    assert static["promotions_per_s"] == static["demotions_per_s"] == 0
    assert len(tpp["local_traffic_fraction_by_phase"]) == 2
    # the hot set moved to random pages: static serves about the fast share (20%) locally
    assert static["local_traffic_fraction_by_phase"][1] == pytest.approx(0.2, abs=0.1)
    assert tpp["local_traffic_fraction_by_phase"][1] > static["local_traffic_fraction_by_phase"][1] + 0.2
    assert tpp["throughput_relative_to_all_local"] > static["throughput_relative_to_all_local"]
    assert tpp["promotions_per_s"] > 0 and tpp["demotions_per_s"] > 0


# ---- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, message",
    [
        ("page,count\n0,1\nx,2\n", "line 3: page 'x' is not an integer >= 0"),
        ("page,count\n0,1\n# note\n1,0\n", "line 4: count '0' is not an integer >= 1"),
        ("page,count\n0,1\n9,1\n", "line 3: page 9 is outside the footprint's 4 pages"),
        ("addr\n1\n", "needs a header row with columns page[,count]"),
    ],
)
def test_bad_trace_rows_are_one_line_errors(tmp_path, rows, message):
    path = tmp_path / "bad.csv"
    path.write_text(rows)
    with pytest.raises(ScenarioError) as err:
        load_trace(path, pages=4)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "workload.access.trace" in str(err.value)


@pytest.mark.parametrize(
    "change, path",
    [
        ({"ratio": "1-4"}, "ratio"),
        ({"fast_tier": "hbm3"}, "fast_tier"),
        ({"slow_tier": "ddr5-host"}, "slow_tier"),
        ({"policy": "lru", "epoch_accesses": 1_000_000}, "epoch_accesses"),
        ({"footprint": "1 TiB", "page_bytes": "2 MiB"}, "slow_tier"),
        ({"footprint": "1 TiB"}, "footprint"),  # 2^28 pages of 4 KiB: too many
    ],
)
def test_bad_fields_name_their_key(change, path):
    data = workload_scenario(**{**GENERATED, **change})
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(data)
    assert f"workload.{path}" in str(err.value)


def test_generator_needs_footprint_and_duration():
    data = workload_scenario(access={"distribution": "zipf"}, duration_s="1 s")
    with pytest.raises(ScenarioError, match="workload.footprint"):
        scenario_from_dict(data)
