"""Planning shortcuts give what the direct computations give, to the last bit.

- The cost model keeps each shard's mean traffic, region shares and recshard's additive cost per
  shard key (CostModel.per_shard): a kept value must equal a fresh model's, follow the shard when
  its rows move, and never stand in for a sampled iteration's traffic.
- make_shards gives shards of equal rows one access law (ZipfRows): the one each would build.
- A ZipfRows keeps the nodes of its recent rank ranges and the pmf of each (`rank_sum` skips the
  powers), and its cdf at recent scalar ranks: every value equals the one computed afresh (kept below as the reference), the kept arrays
  are read-only, and what it keeps is bounded.
- `comm_matrices` sums per owner and `a2a_flows` picks flows with numpy: both must equal the
  shard-by-shard and pair-by-pair forms they replace (kept below as the reference).

Small clusters (tests/workloads/embedding/test_embedding.py's 2 hosts x 2 GPUs) keep these fast.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from sim.memory.tiers import ZipfRows
from sim.models.dlrm import Table
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.cost import LENGTH_BYTES, CostModel, Shard, a2a_flows, comm_matrices
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


def rank_sum_reference(law, f, lo, hi):
    """ZipfRows.rank_sum computed afresh: ranks, Simpson nodes and pmf made for the call (the form the
    kept nodes replace)."""
    from sim.memory.zipf import _TAIL_POINTS, HEAD

    lo, hi = int(max(0, lo)), law.rows if hi is None else int(min(law.rows, hi))
    total = 0.0
    if min(hi, max(lo, HEAD)) > lo:
        total += float(np.sum(f(np.arange(lo + 1, min(hi, max(lo, HEAD)) + 1, dtype=float))))
    start = max(lo, HEAD)
    if hi > start:
        t = np.linspace(math.log(start), math.log(hi), _TAIL_POINTS)
        x = np.exp(t)
        g, h = f(x) * x, t[1] - t[0]
        ends = f(np.array([float(start), float(hi)]))
        total += float(h / 3 * (g[0] + g[-1] + 4 * g[1:-1:2].sum() + 2 * g[2:-1:2].sum()) + (ends[1] - ends[0]) / 2)
    return total


def test_rank_sums_over_kept_nodes_equal_fresh_computations():
    """Sums over kept nodes (the head's ranks and pmf sliced, the tail's nodes kept per range) equal
    the sums computed afresh to the bit, head only, tail only and both, first and again; the shared
    arrays cannot be written; at most `_NODES_KEPT` ranges are kept."""
    from sim.memory.zipf import _NODES_KEPT

    law = ZipfRows(200_000_000, 1.05)
    direct = lambda k: np.asarray(k, dtype=float) ** -law.alpha / law.norm  # noqa: E731 - pmf afresh
    ranges = [(0, None), (0, 3_000), (10, 4_096), (4_096, 5_000_000), (2_000, 80_000), (7, 8)]
    for _ in range(2):  # first computed, then from the kept nodes
        for n in (1e3, 4.2e5):
            for lo, hi in ranges:
                assert law.expected_distinct(n, lo, hi) == rank_sum_reference(
                    law, lambda k: -np.expm1(-n * direct(k)), lo, hi
                )
                kept = law.rank_sum(lambda k: law.pmf(k) * np.exp(-n * law.pmf(k)), lo, hi)
                assert kept == rank_sum_reference(law, lambda k: direct(k) * np.exp(-n * direct(k)), lo, hi)
    for k in [0, 1, 3_000, 4_096, 4_097, 123_456.0, 200_000_000] * 2:  # cdf at scalar ranks: kept
        assert law.cdf(k) == float(law._harmonic(np.asarray(k, dtype=float)) / law.norm)
    head = law._nodes_of(0, 3_000).head
    assert law.pmf(head) is law.pmf(head) and np.array_equal(law.pmf(head), direct(head))
    with pytest.raises(ValueError, match="read-only"):
        law.pmf(head)[0] = 1.0
    for lo in range(2 * _NODES_KEPT):
        law.rank_sum(law.pmf, lo, lo + 10)
    assert len(law._nodes) <= _NODES_KEPT and len(law._pmf_of) <= 3 * _NODES_KEPT


# ---- all-to-all matrices and flows against their loop forms ------------------------------------------


def comm_matrices_reference(shards, model):
    """cost.comm_matrices shard by shard, each into its owner's column and row (the form it replaced)."""
    cfg, w, gpn = model.cfg, model.num_gpus, model.gpus_per_node
    b = cfg.batch_size_per_gpu
    index, pooled = np.zeros((w, w)), np.zeros((w, w))
    for s in shards:
        if s.scheme == "data_parallel":
            continue
        d = model.dedup(s.table)
        pe = model.pooled_bytes / model.pooled_dedup(s.table)
        inverse = b * LENGTH_BYTES if d > 1 else 0.0
        o = s.rank
        share = 1.0 / s.count if s.scheme in ("row_wise", "table_row_wise") else 1.0
        index[:, o] += b * (s.table.pooling / d * share * model.index_bytes + LENGTH_BYTES) + inverse
        if s.scheme in ("table_wise", "column_wise", "row_wise"):
            pooled[o, :] += b * s.dim * pe
        else:
            host = o // gpn
            local = np.arange(host * gpn, (host + 1) * gpn)
            pooled[o, local] += b * w / gpn * s.dim * pe
            pooled[o, :] += b / gpn * s.dim * pe
    np.fill_diagonal(index, 0.0)
    np.fill_diagonal(pooled, 0.0)
    return index, pooled


def a2a_flows_reference(matrix, devices, gpn, algorithm):
    """cost.a2a_flows pair by pair (the form it replaced)."""
    w, flows = len(devices), []
    if algorithm == "direct" or w <= gpn:
        return [(devices[i], devices[j], float(matrix[i, j]), int(i), int(j)) for i, j in zip(*np.nonzero(matrix))]
    hosts = w // gpn
    m = matrix.reshape(hosts, gpn, hosts, gpn)
    for a in range(hosts):
        intra = m[a, :, a, :] + m[a, :, :, :].sum(axis=1) - m[a, :, a, :]
        for i in range(gpn):
            for j in range(gpn):
                if i != j and intra[i, j] > 0:
                    flows.append(
                        (devices[a * gpn + i], devices[a * gpn + j], float(intra[i, j]), a * gpn + i, a * gpn + j)
                    )
        rail = m[a].sum(axis=0)
        for bh in range(hosts):
            for j in range(gpn):
                if bh != a and rail[bh, j] > 0:
                    flows.append(
                        (devices[a * gpn + j], devices[bh * gpn + j], float(rail[bh, j]), -1 - a, bh * gpn + j)
                    )
    return flows


def random_shards(rng, w, gpn, n=60):
    """Shards of every scheme on random ranks, tables with and without dedup, odd sizes."""
    out = []
    for k in range(n):
        scheme = ["table_wise", "column_wise", "row_wise", "table_row_wise", "data_parallel"][k % 5]
        table = Table(
            name=f"t{k}",
            rows=int(rng.integers(100, 10_000)),
            dim=int(rng.choice([16, 48, 128])),
            pooling=float(rng.uniform(1, 80)),
            zipf_alpha=1.05,
            dtype="fp16",
            dedup=None if k % 3 else float(rng.uniform(1, 4)),
        )
        count = {"row_wise": w, "table_row_wise": gpn, "column_wise": 3}.get(scheme, 1)
        rank = -1 if scheme == "data_parallel" else int(rng.integers(w))
        for i in range(count):
            r = i if scheme == "row_wise" else (rank // gpn * gpn + i if scheme == "table_row_wise" else rank)
            out.append(Shard(table, scheme, i, count, table.rows, table.dim, 1.0, rank=r))
    return out


@pytest.mark.parametrize("dedup_pooled", [True, False])
def test_comm_matrices_equal_the_shard_by_shard_sums(dedup_pooled):
    sc = scenario_from_dict(scenario([SMALL], dedup=1.5, dedup_pooled=dedup_pooled))
    model = CostModel(sc.hardware, sc.workload)
    shards = random_shards(np.random.default_rng(3), W, model.gpus_per_node)
    index, pooled = comm_matrices(shards, model)
    ref_index, ref_pooled = comm_matrices_reference(shards, model)
    assert np.array_equal(index, ref_index) and np.array_equal(pooled, ref_pooled)
    assert index.sum() > 0 and pooled.sum() > 0


@pytest.mark.parametrize("algorithm", ["pxn", "direct"])
@pytest.mark.parametrize("hosts, gpn", [(1, 4), (3, 2), (4, 4)])
def test_a2a_flows_equal_the_pair_by_pair_flows(algorithm, hosts, gpn):
    rng = np.random.default_rng(hosts * 10 + gpn)
    w = hosts * gpn
    devices = [f"h{r // gpn}/g{r % gpn}" for r in range(w)]
    for density in (0.0, 0.1, 0.5, 1.0):
        m = rng.random((w, w)) * (rng.random((w, w)) < density) * 1e6
        flows = a2a_flows(m, devices, gpn, algorithm)
        assert flows == a2a_flows_reference(m, devices, gpn, algorithm)
        assert all(type(f[2]) is float and type(f[3]) is int and type(f[4]) is int for f in flows)
