"""Host-DRAM cache in front of SCM/SSD (MTrainS), per-table RecD dedup, `dot` with mixed table dims.

Small clusters (2 hosts x 2 GPUs, tests/workloads/embedding/test_embedding.py's scenario) keep these
fast; closed forms are the cache policy's own steady state, hand-counted lookups and GEMM FLOPs.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from sim.errors import ScenarioError
from sim.memory.tiers import LRUPlacement, ZipfRows
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.cost import ZipfRegion, comm_matrices, dram_cache_hit_rate
from sim.workloads.embedding.estimate import estimate
from tests.workloads.embedding.test_embedding import B, W, plan_of, scenario

COLD = {"name": "cold", "rows": 2_000_000, "dim": 64, "pooling": 40, "zipf_alpha": 1.05}
STORED = 64 * 2 + 4  # fp16 row + rowwise-adagrad state


def cached(capacity, policy="lru", hbm_fraction=0.25, iterations=2):
    return scenario(
        [COLD],
        placements=["hbm", "scm"],
        planner="manual",
        sharding={"tables": {"cold": {"ranks": [1], "placement": "scm", "hbm_fraction": hbm_fraction}}},
        dram_cache={"capacity": capacity, "policy": policy},
        iterations=iterations,
        batch_size_per_gpu=4096,  # lookups enough for the embedding kernels to set the pace
    )


# ---- the DRAM cache ------------------------------------------------------------------------------


def test_region_law_is_the_conditioned_zipf_and_its_lru_hit_rate_matches_a_replay():
    base = ZipfRows(50_000, 1.0)
    lo, hi = 5_000, 50_000
    region = ZipfRegion(base, lo, hi)
    assert region.rows == hi - lo and region.cdf(region.rows) == pytest.approx(1.0)
    assert region.rank_sum(region.pmf) == pytest.approx(1.0, rel=1e-6)
    whole = ZipfRegion(base, 0, base.rows)  # the whole range is the law itself
    assert LRUPlacement().hit_rate(whole, 2_000) == pytest.approx(LRUPlacement().hit_rate(base, 2_000), rel=1e-9)
    stream = base.sample(np.random.default_rng(0), 400_000)  # exact LRU over the region's accesses
    stream = stream[(stream > lo) & (stream <= hi)].tolist()
    cache: OrderedDict[int, None] = OrderedDict()
    hits, warm = 0, len(stream) // 2
    for i, row in enumerate(stream):
        if row in cache:
            cache.move_to_end(row)
            hits += i >= warm
        else:
            cache[row] = None
            if len(cache) > 2_000:
                cache.popitem(last=False)
    replay = hits / (len(stream) - warm)
    assert LRUPlacement().hit_rate(region, 2_000) == pytest.approx(replay, abs=0.02)


def test_hit_rate_comes_from_the_cache_policy_on_the_tier_region():
    _, model, plan = plan_of(cached("64 MiB"))
    s = plan.shards[0]
    lo, hi = s.hbm_rows, s.rows
    rows = s.dram_cache_rows["pmem-scm"]
    assert rows == int(64 * 2**20 / STORED)  # the whole host cache goes to the one cached region
    expected = LRUPlacement().hit_rate(ZipfRegion(s.dist, lo, hi), rows)
    assert model.dram_hit_rate(s, "pmem-scm", lo, hi)[0] == expected
    assert 0 < expected < 1 and dram_cache_hit_rate(plan.shards, model) == pytest.approx(expected)
    n = s.lookups * (s.dist.cdf(hi) - s.dist.cdf(lo))
    fwd = {(a.tier, a.write, a.access_bytes): a.count for a in model.traffic(s).fwd}
    assert fwd[("ddr5-host", False, 128)] == pytest.approx(n * expected)  # hits: DRAM row reads
    assert fwd[("pmem-scm", False, STORED)] == pytest.approx(n * (1 - expected))  # LRU fills every miss


def test_cache_zero_is_no_cache_and_a_cache_holding_the_region_serves_everything():
    none_data = cached(0)
    none_data["workload"].pop("dram_cache")
    _, m0, p0 = plan_of(none_data)
    _, mz, pz = plan_of(cached(0))
    assert [(a.tier, a.count) for a in mz.traffic(pz.shards[0]).fwd] == [
        (a.tier, a.count) for a in m0.traffic(p0.shards[0]).fwd
    ]
    s = pz.shards[0]
    assert LRUPlacement().hit_rate(ZipfRegion(s.dist, s.hbm_rows, s.rows), 0) == 0.0  # all misses
    _, model, plan = plan_of(cached("1 GiB"))  # > 1.5M rows x 132 B
    s = plan.shards[0]
    assert s.dram_cache_rows["pmem-scm"] == s.tier_rows["pmem-scm"]
    tr = model.traffic(s)
    assert all(a.tier != "pmem-scm" or a.count == 0 for a in tr.fwd + tr.bwd)  # all hits, no fills
    assert dram_cache_hit_rate(plan.shards, model) == 1.0


@pytest.mark.parametrize("policy", ["lru", "static_hot_rows"])
def test_iteration_time_falls_as_the_cache_grows(policy):
    sizes = [0, "4 MiB", "32 MiB", "128 MiB", "1 GiB"]
    runs = [run(scenario_from_dict(cached(c, policy))).metrics for c in sizes]
    simulated = [m["iteration_s"] for m in runs]
    estimated = [m["planner_estimate_s"] for m in runs]
    hits = [m.get("dram_cache_hit_rate", 0.0) for m in runs]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(simulated, simulated[1:])), simulated
    assert all(b <= a * (1 + 1e-9) for a, b in zip(estimated, estimated[1:])), estimated
    assert all(b >= a for a, b in zip(hits, hits[1:])) and hits[-1] == 1.0
    assert simulated[-1] < simulated[0]


def test_dram_cache_takes_its_bytes_from_the_ddr_placements():
    _, model, _ = plan_of(cached("64 GiB"))
    assert model.host_tier_capacity("ddr5-host") == model.tiers["ddr5-host"].capacity - 64 * 2**30
    assert model.host_tier_capacity("pmem-scm") == model.tiers["pmem-scm"].capacity


def test_dram_cache_input_errors_name_key_value_and_what_is_allowed():
    with pytest.raises(ScenarioError) as err:  # nothing to cache
        scenario_from_dict(scenario([COLD], placements=["hbm", "uvm"], dram_cache={"capacity": "1 GiB"}))
    assert err.value.path == "workload.dram_cache.capacity" and "scm, ssd" in str(err.value)
    data = cached("1 GiB")
    data["hardware"]["memory_tiers"] = data["hardware"]["memory_tiers"][1:]  # no DDR tier
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(data)
    assert err.value.path == "workload.dram_cache.capacity" and "kind ddr" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(cached("1 GiB", policy="fifo"))
    assert "workload.dram_cache.policy" in str(err.value) and "lru" in str(err.value)
    assert "\n" not in str(err.value)


# ---- per-table dedup -----------------------------------------------------------------------------


SMALL = {"name": "a", "rows": 1000, "dim": 16, "pooling": 3, "zipf_alpha": 1.0}


def _two(dedup_a=None, dedup_b=None, **workload):
    a = {**SMALL, **({"dedup": dedup_a} if dedup_a else {})}
    b = {**SMALL, "name": "b", "pooling": 6, **({"dedup": dedup_b} if dedup_b else {})}
    return plan_of(
        scenario([a, b], planner="manual", sharding={"tables": {"a": {"ranks": [0]}, "b": {"ranks": [1]}}}, **workload)
    )


def test_per_table_dedup_divides_only_its_own_table():
    _, m1, p1 = _two()
    _, m2, p2 = _two(dedup_a=1.0, dedup_b=3.0)
    assert p2.shards[0].lookups == p1.shards[0].lookups == B * W * 3  # factor 1: unchanged
    assert p2.shards[1].lookups == B * W * 6 / 3.0
    (i1, o1), (i2, o2) = comm_matrices(p1.shards, m1), comm_matrices(p2.shards, m2)
    assert i2[2, 0] == i1[2, 0] == B * (3 * 8 + 4)  # table a: indices and lengths as without RecD
    assert i2[2, 1] == B * (6 / 3 * 8 + 4 + 4)  # table b: 1/3 the indices, one inverse index per sample
    assert o2[0, 2] == o1[0, 2] and o2[1, 2] == o1[1, 2] / 3  # deduplicated pooled embeddings of b only
    assert model_traffic_equal(m1, p1.shards[0], m2, p2.shards[0])


def model_traffic_equal(m1, s1, m2, s2) -> bool:
    t1, t2 = m1.traffic(s1), m2.traffic(s2)
    return [(a.tier, a.count) for a in t1.fwd + t1.bwd] == [(a.tier, a.count) for a in t2.fwd + t2.bwd] and (
        t1.fwd_hbm_extra_bytes == t2.fwd_hbm_extra_bytes
    )


def test_table_without_its_own_factor_takes_the_workloads():
    _, _, pw = _two(dedup=2.0)
    _, _, pt = _two(dedup_a=2.0, dedup_b=2.0)
    assert [s.lookups for s in pw.shards] == [s.lookups for s in pt.shards] == [B * W * 3 / 2, B * W * 6 / 2]
    _, _, pm = _two(dedup_b=1.0, dedup=2.0)  # a table may opt out of the workload's factor
    assert [s.lookups for s in pm.shards] == [B * W * 3 / 2, B * W * 6]


def test_bad_table_dedup_is_a_one_line_error():
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(scenario([{**SMALL, "dedup": 0.5}]))
    assert "workload.tables" in str(err.value) and "dedup" in str(err.value) and "\n" not in str(err.value)


# ---- dot with mixed dims -------------------------------------------------------------------------


DOT = {"bottom_mlp": [13, 64, 16], "top_mlp": [64, 1], "interaction": "dot"}


def _dot(dims):
    tables = [{**SMALL, "name": f"t{i}", "dim": d} for i, d in enumerate(dims)]
    return scenario(tables, dense=DOT)


def test_mixed_dim_dot_projects_each_odd_table_with_closed_form_flops_and_weights():
    same = scenario_from_dict(_dot([16, 16, 16])).workload.dense
    dense = scenario_from_dict(_dot([16, 32, 32, 8])).workload.dense
    gemms = dense.projection_gemms(B, [16, 32, 32, 8])
    assert gemms == [("proj.d8", B, 16, 8, 1), ("proj.d32", B, 16, 32, 2)]
    flop = sum(2 * m * n * k * b for _, m, n, k, b in gemms)
    assert flop == 2 * B * 16 * (32 + 32 + 8)  # one (dim x 16) projection per table of another dim
    assert dense.dense_params([16, 32, 32, 8]) - same.dense_params([16, 16, 16, 16]) == 16 * (32 + 32 + 8)
    assert same.projection_gemms(B, [16, 16, 16]) == []  # same dims: no projection, graph unchanged
    assert same.dense_gemms(B, [16, 16, 16]) == [g for g in same.dense_gemms(B, [16, 16, 16]) if "proj" not in g[0]]


def test_mixed_dim_dot_runs_and_pays_the_projection_gemms_on_the_device_model():
    from sim.models.dlrm import backward_gemms

    data_same, data_mixed = _dot([16, 16]), _dot([16, 48])
    res = run(scenario_from_dict(data_mixed))
    assert res.metrics["iteration_s"] > 0
    est = {}
    for key, data in (("same", data_same), ("mixed", data_mixed)):
        sc = scenario_from_dict(data)
        tables, model, plan = plan_of(data)
        from sim.cluster.cluster import Cluster
        from sim.engine.simulation import Simulation

        cluster = Cluster.build(Simulation(sc.seed), sc.hardware, sc.network_model)
        est[key] = estimate(plan, model, cluster.network, sc.workload, tables)["breakdown_s"]["dense_top"]
    gpu = scenario_from_dict(data_mixed).hardware.gpu
    proj = [("proj.d48", B, 16, 48, 1)]
    extra = sum(gpu.gemm_time_s(m, n, k, "bf16", b) for _, m, n, k, b in proj + backward_gemms(proj))
    assert est["mixed"] - est["same"] == pytest.approx(extra, rel=1e-9)
