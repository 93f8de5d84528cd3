"""Planning shortcuts give what the direct computations give, to the last bit.

- The cost model keeps each shard's mean traffic, region shares and recshard's additive cost per
  shard key (CostModel.per_shard): a kept value must equal a fresh model's, follow the shard when
  its rows move, and never stand in for a sampled iteration's traffic.
- make_shards gives shards of equal rows one access law (ZipfRows): the one each would build.

Small clusters (tests/workloads/embedding/test_embedding.py's 2 hosts x 2 GPUs) keep these fast.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sim.memory.tiers import ZipfRows
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.cost import CostModel, Shard
from sim.workloads.embedding.recshard import _proxy_s, proxy_s
from tests.workloads.embedding.test_embedding import BIG, SMALL, W, plan_of, scenario

MID = {"name": "mid", "rows": 3_000_000, "dim": 64, "pooling": 20, "zipf_alpha": 1.1}


def plans():
    """(config, model, plan) of plans whose shards cover the traffic paths: HBM only, HBM + SCM
    behind a DRAM cache (recshard), a uvm_cache shard, and a replicated table."""
    tiered = scenario(  # 10% of HBM for tables: most rows on SCM, behind the DRAM cache
        [SMALL, BIG, MID, {**BIG, "name": "big2"}],
        placements=["hbm", "scm"],
        dram_cache={"capacity": "1 GiB"},
        sharding={"data_parallel_max_bytes": 100_000, "hbm_reserved_fraction": 0.9},
    )
    cached = scenario(
        [SMALL, MID],
        planner="manual",
        placements=["hbm", "uvm_cache", "scm"],
        sharding={
            "tables": {
                "small": {"ranks": [1], "placement": "uvm_cache"},
                "mid": {"ranks": [2], "placement": "scm", "hbm_fraction": 0.3},
            }
        },
    )
    out = []
    for data in (tiered, cached):
        sc = scenario_from_dict(data)
        _, model, plan = plan_of(data)
        out.append((sc, model, plan))
    return out


@pytest.fixture(scope="module")
def planned():
    return plans()


def test_kept_values_equal_a_fresh_models(planned):
    schemes = set()
    for sc, model, plan in planned:
        fresh = CostModel(sc.hardware, sc.workload)  # nothing kept yet: computes directly
        for s in plan.shards:
            schemes.add(s.scheme)
            assert model.traffic(s) == fresh._compute_traffic(s, s.lookups, None)
            assert model.region_shares(s) == fresh._compute_region_shares(s)
            assert proxy_s(model, s) == _proxy_s(fresh, s)
            assert model.traffic(s) is model.traffic(s)  # kept, not recomputed
    assert {"data_parallel", "table_wise"} <= schemes
    assert any(s.cache_rows for _, _, p in planned for s in p.shards)  # the uvm_cache path
    assert any(s.dram_cache_rows for _, _, p in planned for s in p.shards)  # the DRAM-cache path


def test_kept_values_follow_the_shards_rows(planned):
    """Moving rows between tiers changes the key: the model answers for the new split."""
    sc, model, plan = planned[0]
    s = copy.deepcopy(next(s for s in plan.shards if s.table.name == "mid"))
    before, cost_before = model.traffic(s), proxy_s(model, s)
    tier = next(iter(model.tiers))
    s.hbm_rows = s.rows // 3
    s.tier_rows, s.dram_cache_rows = {tier: s.rows - s.hbm_rows}, {}
    fresh = CostModel(sc.hardware, sc.workload)
    assert model.traffic(s) != before and model.traffic(s) == fresh.traffic(s)
    assert proxy_s(model, s) != cost_before and proxy_s(model, s) == proxy_s(fresh, s)


def test_shards_alike_but_for_their_rank_share_one_value(planned):
    _, model, plan = planned[0]
    s = next(s for s in plan.shards if s.rank >= 0)
    moved = copy.copy(s)
    moved.rank = (s.rank + 1) % W
    assert model.traffic(moved) is model.traffic(s)


def test_a_sampled_iterations_traffic_is_not_kept(planned):
    _, model, plan = planned[0]
    s = next(s for s in plan.shards if len(model.regions(s)) > 1)
    counts = [float(7 + i) for i in range(len(model.regions(s)))]
    one, two = model.traffic(s, 123.0, counts), model.traffic(s, 123.0, counts)
    assert one == two and one is not two
    assert model.traffic(s, 123.0, counts) != model.traffic(s)
    assert model.traffic(s, s.lookups) is not model.traffic(s) and model.traffic(s, s.lookups) == model.traffic(s)


def test_shards_of_equal_rows_share_their_access_law(planned):
    """make_shards gives shards of equal rows and skew one ZipfRows: the law they would each build."""
    _, _, plan = planned[0]
    big = [s for s in plan.shards if s.table.name == "big"]
    assert big[1].rows == big[2].rows and big[1].dist is big[2].dist
    for s in plan.shards:
        own = ZipfRows(s.rows, s.table.zipf_alpha)
        assert (s.dist.rows, s.dist.alpha, s.dist.norm) == (own.rows, own.alpha, own.norm)
        assert np.array_equal(s.dist._head_cum, own._head_cum)
    with pytest.raises(ValueError, match="law"):
        Shard(big[0].table, "row_wise", 0, 4, big[0].rows + 1, 128, 1.0, law=big[0].dist)
