"""recshard's plan quality on its own cost model: the search's score is the estimate, HBM fills first,
and recshard is not beaten by size_greedy (estimated and simulated) on small table sets.

Small clusters (2 hosts x 2 GPUs, the scenario of test_embedding.py) keep these fast;
benchmarks/planner_quality.py runs the 16-GPU sets (and TorchRec's planner where installed).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from sim.cluster.cluster import Cluster
from sim.engine.simulation import Simulation
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.estimate import estimate
from sim.workloads.embedding.iteration_score import IterationScore
from sim.workloads.embedding.recshard import fill
from sim.workloads.embedding.search import Assignment
from sim.workloads.embedding.workload import prepare
from tests.workloads.embedding.test_embedding import scenario

# three small sets: all in HBM; 3x the HBM (rest in DDR); the same with uniform access
FITS = {"count": 12, "rows": {"min": 1e6, "max": 3e7}, "dim": 64, "pooling": {"min": 2, "max": 40}}
SPILLS = {"count": 10, "rows": {"min": 2e8, "max": 6e8}, "dim": 128, "pooling": {"min": 2, "max": 40}}
UNIFORM = {**SPILLS, "zipf_alpha": 0.0}
SETS = {"fits": FITS, "spills": SPILLS, "uniform": UNIFORM}


def planned(tables, planner="recshard", **workload):
    sc = scenario_from_dict(scenario(tables, placements=("hbm", "uvm"), planner=planner, **workload))
    sim = Simulation(sc.seed)
    cluster = Cluster.build(sim, sc.hardware, sc.network_model)
    tables, model, plan = prepare(sim, cluster.hardware, sc.workload)
    return sc, cluster, tables, model, plan


def assignment_of(sc, cluster, tables, model, plan) -> Assignment:
    dp = [s for s in plan.shards if s.scheme == "data_parallel"]
    score = IterationScore(model, cluster.network, sc.workload, tables, dp)
    items = [s for s in plan.shards if s.scheme != "data_parallel"]
    return Assignment(items, score, plan.capacities.hbm_bytes_per_gpu, plan.capacities.host_tier_bytes)


@pytest.mark.parametrize("name", list(SETS))
@pytest.mark.parametrize("planner", ["recshard", "size_greedy"])
def test_the_search_scores_plans_with_the_estimate_itself(name, planner):
    """IterationScore (per-rank sums, link loads linear in the traffic) = estimate.estimate."""
    sc, cluster, tables, model, plan = planned(SETS[name], planner)
    expected = estimate(plan, model, cluster.network, sc.workload, tables)["iteration_s"]
    assert math.isclose(assignment_of(sc, cluster, tables, model, plan).value(), expected, rel_tol=1e-9)
    if planner == "recshard":
        assert math.isclose(plan.estimate_s, expected, rel_tol=1e-9)


@pytest.mark.parametrize("name", ["fits", "spills"])
def test_a_scored_move_or_swap_is_what_the_plan_scores_after_it(name):
    """The vectorised candidate scores (two ranks changed, the rest through their top values)
    equal a full re-evaluation after applying the candidate."""
    a = assignment_of(*planned(SETS[name]))
    (ra, rb, i, j), (g, h, u) = a.candidates(a.critical_ranks(2))
    assert len(ra) > 0
    picks = np.linspace(0, len(ra) - 1, 12).round().astype(int)
    vals = a.evaluate_pairs(ra[picks], rb[picks], i[picks], j[picks])
    ranks = a.ranks.copy()
    for k, v in zip(picks, vals):
        if not np.isfinite(v):
            continue
        a.apply([(int(i[k]), int(rb[k]))] + ([(int(j[k]), int(ra[k]))] if j[k] >= 0 else []))
        assert math.isclose(a.value(), v, rel_tol=1e-9)
        a.apply([(n, int(r)) for n, r in enumerate(ranks)])
    for k in range(len(g)):
        v = a.evaluate_groups(g[k : k + 1], h[k : k + 1], u[k : k + 1])[0]
        a.apply(a.group_moves(int(g[k]), int(h[k]), int(u[k])))
        if np.isfinite(v):
            assert math.isclose(a.value(), v, rel_tol=1e-9)
        a.apply([(n, int(r)) for n, r in enumerate(ranks)])


@pytest.mark.parametrize("name", list(SETS))
def test_recshard_is_not_worse_than_size_greedy_estimated_or_simulated(name):
    rec, size = planned(SETS[name], "recshard"), planned(SETS[name], "size_greedy")
    est = [estimate(p[4], p[3], p[1].network, p[0].workload, p[2])["iteration_s"] for p in (rec, size)]
    assert est[0] <= est[1]
    sim_rec, sim_size = (run(p[0]).metrics["iteration_s"] for p in (rec, size))
    assert sim_rec <= sim_size


@pytest.mark.parametrize("name", ["spills", "uniform"])
def test_hbm_is_full_wherever_a_slower_tier_holds_rows(name):
    """A GPU whose shards keep rows in DDR has no HBM left but for less than one row per shard."""
    _, _, _, model, plan = planned(SETS[name])
    budget = plan.capacities.hbm_bytes_per_gpu
    spilled = False
    for g in range(model.num_gpus):
        mine = [s for s in plan.shards if s.rank == g]
        used = sum(model.hbm_bytes(s) for s in mine) + sum(
            model.hbm_bytes(s) for s in plan.shards if s.scheme == "data_parallel"
        )
        if any(s.tier_rows for s in mine):
            spilled = True
            assert budget - used < sum(model.stored_row_bytes(s) for s in mine)
    assert spilled


def test_fill_shares_capacity_among_rows_tied_at_the_threshold():
    """Uniform access: every row of a shard is worth the same, so bisection alone keeps a shard
    whole or not at all; what is left goes to the tied shards, up to one row short."""
    _, _, _, model, plan = planned(UNIFORM)
    shards = [s for s in plan.shards if s.scheme != "data_parallel"][:3]
    b = np.array([model.stored_row_bytes(s) for s in shards])
    capacity = 0.4 * float(sum(s.rows * bi for s, bi in zip(shards, b)))
    kept = np.array(fill(shards, [0] * len(shards), capacity, model, "ddr5-host"))
    used = float((kept * b).sum())
    assert used <= capacity and capacity - used < b.max()
    assert (kept > 0).sum() >= 2  # shared, not one shard whole


def test_planning_time_is_bounded_and_the_plan_deterministic():
    tables = {**SPILLS, "count": 20}
    start = time.perf_counter()
    a = planned(tables)[4]
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0  # loose: the 16-GPU sets of benchmarks/planner_quality.py plan in ~0.2-2 s
    b = planned(tables)[4]
    assert [(s.name, s.rank, s.hbm_rows, s.tier_rows) for s in a.shards] == [
        (s.name, s.rank, s.hbm_rows, s.tier_rows) for s in b.shards
    ]


def test_each_host_tier_holds_no_more_than_its_capacity_when_the_first_one_binds():
    """Two slow tiers (DDR then SCM) with DDR short: the search checks each tier, not their sum."""
    data = scenario(SPILLS, placements=("hbm", "uvm", "scm"))
    data["hardware"]["memory_tiers"][0]["capacity"] = "100 GiB"
    sc = scenario_from_dict(data)
    _, model, plan = prepare(Simulation(sc.seed), sc.hardware, sc.workload)
    used: dict[tuple[int, str], float] = {}
    for s in plan.shards:
        for tier, nbytes in model.tier_bytes(s).items():
            key = (s.rank // model.gpus_per_node, tier)
            used[key] = used.get(key, 0.0) + nbytes
    assert any(t == "pmem-scm" for _, t in used)  # DDR is full: rows reach SCM
    for (_, tier), nbytes in used.items():
        assert nbytes <= model.tiers[tier].capacity + 1.0


def test_one_gpu_has_no_all_to_all_and_scores_as_the_estimate():
    data = scenario(FITS)
    data["hardware"].update(nodes=1, gpus_per_node=1)
    sc = scenario_from_dict(data)
    sim = Simulation(sc.seed)
    cluster = Cluster.build(sim, sc.hardware, sc.network_model)
    tables, model, plan = prepare(sim, cluster.hardware, sc.workload)
    expected = estimate(plan, model, cluster.network, sc.workload, tables)
    assert expected["breakdown_s"]["pooled_a2a_fwd"] == 0.0
    assert math.isclose(plan.estimate_s, expected["iteration_s"], rel_tol=1e-9)
