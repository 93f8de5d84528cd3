"""Embedding training over tiered memory: traffic hand counts, caches, planners, capacities.

Small clusters (2 hosts x 2 GPUs) keep these fast; the shipped scenarios are checked for plan
capacities cheaply and simulated with few iterations.
"""

from __future__ import annotations

import copy
import glob
import math

import numpy as np
import pytest

from sim.engine.simulation import Simulation
from sim.errors import ScenarioError
from sim.memory.tiers import LRUPlacement, StaticPlacement, ZipfRows, sampled_hit_rate
from sim.runner import run
from sim.scenario.model import load_scenario, scenario_from_dict
from sim.workloads.embedding.cost import a2a_flows, comm_matrices
from sim.workloads.embedding.workload import prepare

B, W = 64, 4  # batch per GPU, GPUs (2 hosts x 2)


def scenario(tables, placements=("hbm", "uvm"), planner="recshard", **workload):
    return {
        "name": "emb-test",
        "seed": 1,
        "hardware": {
            "gpu": "a100-sxm-80gb",
            "gpus_per_node": 2,
            "nodes": 2,
            "scale_up": "nvlink3",
            "nic": "cx7-200g-rdma",
            "host_link": "pcie4-x16",
            "topology": {"kind": "single-switch"},
            "memory_tiers": [
                {"base": "ddr5-host", "name": "ddr5-host", "queue_depth": 1024},
                {"base": "pmem-scm", "name": "pmem-scm", "capacity": "1 TiB"},
            ],
        },
        "workload": {
            "kind": "embedding_training",
            "batch_size_per_gpu": B,
            "tables": tables,
            "dense": {"bottom_mlp": [13, 64, 16], "top_mlp": [64, 1], "interaction": "dcn", "interaction_rank": 16},
            "placements": list(placements),
            "sharding": {"planner": planner, **workload.pop("sharding", {})},
            "iterations": 2,
            **workload,
        },
    }


def plan_of(data):
    sc = scenario_from_dict(data)
    return prepare(Simulation(sc.seed), sc.hardware, sc.workload)


SMALL = {"name": "small", "rows": 1000, "dim": 16, "pooling": 3, "zipf_alpha": 1.0}
# 60 GB with rowwise-adagrad state: more than one GPU's 66 GB budget can take next to a second one
BIG = {"name": "big", "rows": 200_000_000, "dim": 128, "pooling": 10, "zipf_alpha": 1.05}


# ---- access distribution -------------------------------------------------------------------------


@pytest.mark.parametrize("rows, alpha", [(1000, 1.05), (200_000, 0.8), (3_000_000, 1.2)])
def test_zipf_sums_match_exact_sums(rows, alpha):
    p = np.arange(1, rows + 1, dtype=float) ** -alpha
    p /= p.sum()
    d = ZipfRows(rows, alpha)
    for k in (1, 10, rows // 7, rows):
        assert d.cdf(k) == pytest.approx(p[:k].sum(), rel=1e-9)
    lookups = 50_000
    assert d.expected_distinct(lookups) == pytest.approx(-np.expm1(-lookups * p).sum(), rel=1e-6)
    assert d.expected_distinct(lookups, 100, rows // 2) == pytest.approx(
        -np.expm1(-lookups * p[100 : rows // 2]).sum(), rel=1e-6
    )


def test_sampled_ranks_follow_the_law():
    d = ZipfRows(5_000_000, 1.05)
    ranks = d.sample(np.random.default_rng(0), 200_000)
    for k in (1, 100, 10_000, 1_000_000):
        assert np.mean(ranks <= k) == pytest.approx(d.cdf(k), abs=0.005)


# ---- caches --------------------------------------------------------------------------------------


def test_cache_hit_rate_rises_with_cache_size_and_skew():
    lru = LRUPlacement()
    sizes = [100, 1_000, 10_000, 100_000]
    for alpha in (0.7, 1.0, 1.3):
        hits = [lru.hit_rate(ZipfRows(1_000_000, alpha), c) for c in sizes]
        assert all(a < b for a, b in zip(hits, hits[1:]))
    for c in sizes:
        hits = [lru.hit_rate(ZipfRows(1_000_000, a), c) for a in (0.7, 1.0, 1.3)]
        assert all(a < b for a, b in zip(hits, hits[1:]))
        # pinning the hottest rows (what a frequency-aware plan does) beats LRU
        assert StaticPlacement("hottest").hit_rate(ZipfRows(1_000_000, 1.0), c) > lru.hit_rate(
            ZipfRows(1_000_000, 1.0), c
        )


@pytest.mark.parametrize("alpha", [0.8, 1.0, 1.2])
@pytest.mark.parametrize("cache", [200, 2_000])
def test_che_approximation_error_against_a_sampled_lru_stream(alpha, cache):
    """Che's approximation vs replaying 150k sampled accesses through a real LRU: < 0.02 absolute."""
    d = ZipfRows(20_000, alpha)
    sampled = sampled_hit_rate("lru", d, cache, np.random.default_rng(7), 150_000, warmup=50_000)
    assert abs(LRUPlacement().hit_rate(d, cache) - sampled) < 0.02
    assert sampled_hit_rate("static_hot_rows", d, cache, np.random.default_rng(7), 100_000) == pytest.approx(
        d.cdf(cache), abs=0.006
    )


# ---- traffic hand counts -------------------------------------------------------------------------


def test_lookup_bytes_match_hand_counts():
    data = scenario(
        [SMALL, {**SMALL, "name": "cold"}],
        planner="manual",
        sharding={"tables": {"small": {"ranks": [1]}, "cold": {"ranks": [2], "placement": "uvm"}}},
    )
    _, model, plan = plan_of(data)
    small, cold = plan.shards
    lookups = B * W * 3  # global batch x pooling
    assert small.lookups == cold.lookups == lookups
    t = model.traffic(small)
    assert [(a.tier, a.count, a.access_bytes) for a in t.fwd] == [("hbm", lookups, 16 * 2)]  # fp16 rows
    assert t.fwd_hbm_extra_bytes == lookups * 8 + B * W * 16 * 2  # int64 indices + pooled outputs
    t = model.traffic(cold)  # all rows in host DDR, read as UVM
    assert [(a.tier, a.count, a.access_bytes) for a in t.fwd] == [("ddr5-host", lookups, 32)]
    distinct = cold.dist.expected_distinct(lookups)  # rowwise adagrad: row + 4 B state, read + write
    assert [(a.tier, a.count, a.access_bytes, a.write) for a in t.bwd] == [
        ("ddr5-host", distinct, 36, False),
        ("ddr5-host", distinct, 36, True),
    ]
    ddr = model.tiers["ddr5-host"]
    assert ddr.bytes_moved(32) == 64  # one cache line per row read
    result = run(scenario_from_dict(data))
    per_iter = result.metrics["slow_tier_accesses_per_iteration"]
    assert per_iter == pytest.approx(lookups + 2 * distinct, rel=0.1)  # Poisson-sampled lookups


def test_dedup_divides_lookups_and_index_bytes():
    one = plan_of(scenario([SMALL], planner="manual", sharding={"tables": {"small": {"ranks": [0]}}}))
    two = plan_of(scenario([SMALL], planner="manual", sharding={"tables": {"small": {"ranks": [0]}}}, dedup=2.0))
    assert two[2].shards[0].lookups == one[2].shards[0].lookups / 2
    (i1, p1), (i2, p2) = comm_matrices(one[2].shards, one[1]), comm_matrices(two[2].shards, two[1])
    # per sender: B x (pooling x 8 B + 4 B lengths); dedup: B x (pooling / 2 x 8 + 4 + 4 B inverse index)
    assert i1[1, 0] == B * (3 * 8 + 4) and i2[1, 0] == B * (1.5 * 8 + 4 + 4)
    assert p2[0, 1] == p1[0, 1] / 2


def test_all_to_all_bytes_match_hand_counts():
    data = scenario(
        [SMALL, {**SMALL, "name": "rw"}],
        planner="manual",
        sharding={"tables": {"small": {"ranks": [3]}, "rw": {"scheme": "row_wise"}}},
    )
    _, model, plan = plan_of(data)
    index, pooled = comm_matrices(plan.shards, model)
    row = 16 * 4  # pooled embeddings exchanged in fp32
    tw_out = (W - 1) * B * row  # table-wise: owner -> every other GPU
    rw_out = W * (W - 1) * B * row  # row-wise: every shard's partial sums to every GPU
    assert pooled.sum() == tw_out + rw_out
    assert index.sum() == (W - 1) * B * (3 * 8 + 4) + W * (W - 1) * B * (3 / W * 8 + 4)
    result = run(scenario_from_dict(data))
    assert result.metrics["all_to_all_bytes_per_iteration"]["pooled_fwd"] == tw_out + rw_out
    # PXN keeps every byte: rail flows carry all cross-host bytes, NVLink flows all intra-host bytes + forwarding
    flows = a2a_flows(pooled, [f"h{r // 2}/g{r % 2}" for r in range(W)], 2, "pxn")
    rail = sum(b for s, d, b, *_ in flows if s.split("/")[0] != d.split("/")[0])
    hosts = np.arange(W) // 2
    assert rail == pytest.approx(pooled[hosts[:, None] != hosts[None, :]].sum())


@pytest.mark.parametrize(
    "scheme, shards, pooled_rows",
    [
        ("table_wise", 1, W - 1),  # owner -> each other GPU: B pooled rows
        ("column_wise", 2, W - 1),  # two 8-column halves, each like a table
        ("row_wise", W, W * (W - 1)),  # every shard's partial sums to every other GPU
        ("table_row_wise", 2, 2 * 2 + (W - 1)),  # reduce-scatter inside the host (B x W/2 rows to the peer),
        # then each shard sends B/2 rows to every other GPU
        ("data_parallel", 1, 0),  # replicas: no all-to-all, gradients all-reduced
    ],
)
def test_each_scheme_exchanges_its_hand_counted_bytes(scheme, shards, pooled_rows):
    data = scenario([SMALL], sharding={"scheme": scheme, "column_shard_dim": 8})
    result = run(scenario_from_dict(data))
    m = result.metrics
    assert m["plan"]["small"]["scheme"] == scheme and m["plan"]["small"]["shards"] == shards
    assert m["all_to_all_bytes_per_iteration"]["pooled_fwd"] == pytest.approx(pooled_rows * B * 16 * 4)
    dense_grads = m["allreduce_bytes_per_iteration"]
    assert dense_grads - run(scenario_from_dict(scenario([SMALL]))).metrics["allreduce_bytes_per_iteration"] == (
        1000 * 16 * 4 if scheme == "data_parallel" else 0
    )


# ---- placement and capacities --------------------------------------------------------------------


def test_a_table_that_fits_in_hbm_never_touches_a_slower_tier():
    for planner in ("recshard", "size_greedy"):
        data = scenario([SMALL, BIG, {**BIG, "name": "big2"}], planner=planner)
        _, model, plan = plan_of(data)
        small = next(s for s in plan.shards if s.table.name == "small")
        assert small.hbm_rows == small.rows and not small.tier_rows
        assert all(a.tier == "hbm" for a in model.traffic(small).fwd + model.traffic(small).bwd)
    result = run(scenario_from_dict(scenario([SMALL, {**SMALL, "name": "s2"}], planner="size_greedy")))
    assert result.metrics["slow_tier_accesses_per_iteration"] == 0
    links = result.links
    assert links.loc[links["kind"] == "memory", "bytes"].sum() == 0


def _check_capacities(model, plan):
    """Independent of planner.check_capacity: sum bytes per GPU and per host tier."""
    hbm = np.zeros(model.num_gpus)
    tiers = {}
    for s in plan.shards:
        assert s.hbm_rows + sum(s.tier_rows.values()) == s.rows or s.cache_rows
        for r in range(model.num_gpus) if s.rank < 0 else [s.rank]:
            hbm[r] += (s.hbm_rows + s.cache_rows) * model.stored_row_bytes(s)
        for t, n in s.tier_rows.items():
            key = (t, s.rank // model.gpus_per_node)
            tiers[key] = tiers.get(key, 0.0) + n * model.stored_row_bytes(s)
    assert hbm.max() <= plan.capacities.hbm_bytes_per_gpu * (1 + 1e-12)
    for (t, _), used in tiers.items():
        assert used <= model.tiers[t].capacity * (1 + 1e-12)


SHIPPED = sorted(glob.glob("scenarios/emb-*.yaml"))


@pytest.mark.parametrize("path", SHIPPED)
@pytest.mark.parametrize("planner", ["recshard", "size_greedy"])
def test_shipped_plans_respect_every_capacity(path, planner):
    sc = load_scenario(path, [f"workload.sharding.planner={planner}"])
    _, model, plan = prepare(Simulation(sc.seed), sc.hardware, sc.workload)
    _check_capacities(model, plan)


def test_capacity_errors_say_by_how_much():
    tables = {"count": 40, "rows": 400_000_000, "dim": 128, "pooling": 5}  # ~24 TB
    with pytest.raises(ScenarioError, match=r"short by \d"):
        plan_of(scenario(tables))
    with pytest.raises(ScenarioError, match=r"short by \d"):
        plan_of(scenario(tables, planner="size_greedy"))
    with pytest.raises(ScenarioError, match=r"short by \d"):  # HBM only
        plan_of(
            scenario(
                [BIG, {**BIG, "name": "b2"}, {**BIG, "name": "b3"}, {**BIG, "name": "b4"}, {**BIG, "name": "b5"}],
                placements=["hbm"],
            )
        )


def test_bad_input_is_a_one_line_error_with_its_key_path():
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(scenario([SMALL], placements=["hbm", "ssd"]))
    assert err.value.path == "workload.placements.1" and "kind ssd" in str(err.value)
    with pytest.raises(ScenarioError) as err:  # a DRAM cache larger than the host's DDR
        scenario_from_dict(scenario([SMALL], placements=["hbm", "scm"], dram_cache={"capacity": "2 TiB"}))
    assert err.value.path == "workload.dram_cache.capacity" and "at most" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(scenario([{**SMALL, "rows": "many"}]))
    assert err.value.path.startswith("workload.tables") and "\n" not in str(err.value)


# ---- planners on the shipped scenarios -----------------------------------------------------------


def _samples_per_s(path, planner, iterations=2):
    sc = load_scenario(path, [f"workload.sharding.planner={planner}", f"workload.iterations={iterations}"])
    return run(sc).metrics


@pytest.mark.parametrize("path", [p for p in SHIPPED if "16x8" not in p and "size-greedy" not in p])
def test_recshard_never_worse_than_size_greedy(path):
    rec, size = _samples_per_s(path, "recshard"), _samples_per_s(path, "size_greedy")
    assert rec["samples_per_s"] >= size["samples_per_s"]
    assert rec["slow_tier_accesses_per_iteration"] <= size["slow_tier_accesses_per_iteration"]


@pytest.mark.slow
def test_recshard_never_worse_than_size_greedy_on_16_hosts():
    path = next(p for p in SHIPPED if "16x8" in p)
    assert (
        _samples_per_s(path, "recshard", 1)["samples_per_s"] >= _samples_per_s(path, "size_greedy", 1)["samples_per_s"]
    )


def test_recshard_gap_is_against_a_valid_lower_bound_and_runs_are_deterministic():
    data = scenario(
        {"count": 12, "rows": {"min": 1e7, "max": 1e8}, "dim": 64, "pooling": {"min": 2, "max": 40}},
        dense={"bottom_mlp": [13, 64], "top_mlp": [64, 1], "interaction": "dot"},
    )
    a, b = run(scenario_from_dict(data)).metrics, run(scenario_from_dict(copy.deepcopy(data))).metrics
    assert a == b
    assert 0 <= a["planner_gap"] < 1 and a["planner_lower_bound_s"] > 0
    assert math.isclose(sum(a["breakdown_s"].values()), a["iteration_s"], rel_tol=1e-9)


def test_reduced_milp_certifies_the_greedy_assignment():
    """scipy.optimize.milp on the reduced problem: a dual bound below its own solution, never a worse plan."""
    tables = {"count": 12, "rows": {"min": 1e7, "max": 1e8}, "dim": 64, "pooling": {"min": 2, "max": 40}}
    _, _, greedy = plan_of(scenario(tables))
    _, _, both = plan_of(scenario(tables, sharding={"milp_max_binaries": 1000, "milp_node_limit": 200}))
    assert both.milp is not None and both.milp.ranks is not None
    assert both.milp.dual_bound <= both.milp.objective * (1 + 1e-9) and 0 <= both.milp.gap < 1
    assert both.max_load_s <= greedy.max_load_s * (1 + 1e-9)
