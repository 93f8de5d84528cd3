"""RecShard's balancing step as a mixed-integer program on a reduced problem (scipy.optimize.milp).

Reduced problem: every shard keeps the hot-row split of the pooled relaxation, so it is an item with
a cost (seconds, additive), HBM bytes and slow-tier bytes. Choose one GPU per movable item:

    minimise z
    sum_g x[i,g] = 1                                   every movable item on one GPU
    sum_i cost[i] x[i,g] + fixed_load[g] <= z          every GPU's load below z
    sum_i hbm[i] x[i,g] <= hbm_cap - fixed_hbm[g]      HBM per GPU
    sum_{i, g in h} slow[i] x[i,g] <= host_cap - fixed_slow[h]   host tiers per host

HiGHS stops at `node_limit` branch-and-bound nodes (deterministic, unlike a time limit) and reports
its dual bound, so the result carries its own optimality gap on the reduced problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class MilpResult:
    ranks: np.ndarray | None  # GPU per movable item, None if no feasible point was found
    objective: float  # most loaded GPU (reduced problem)
    dual_bound: float
    status: str

    @property
    def gap(self) -> float | None:
        if self.ranks is None or self.objective <= 0:
            return None
        return max(0.0, 1.0 - self.dual_bound / self.objective)


def milp_assign(
    cost,
    hbm,
    slow,
    fixed_load,
    fixed_hbm,
    fixed_slow,
    hbm_cap: float,
    host_cap: float,
    gpus_per_node: int,
    node_limit: int = 2000,
    time_limit_s: float = 60.0,
) -> MilpResult:
    import scipy.sparse as sp  # lazy: scipy's optimiser only where a plan is searched
    from scipy.optimize import Bounds, LinearConstraint, milp

    n, g = len(cost), len(fixed_load)
    hosts = g // gpus_per_node
    nx = n * g  # x[i, k] at i * g + k, then z
    col = np.arange(nx)
    item, gpu = col // g, col % g
    assign = sp.csr_matrix((np.ones(nx), (item, col)), shape=(n, nx + 1))
    load = sp.hstack([sp.csr_matrix((cost[item], (gpu, col)), shape=(g, nx)), -np.ones((g, 1))]).tocsr()
    hbm_rows = sp.csr_matrix((hbm[item], (gpu, col)), shape=(g, nx + 1))
    host_rows = sp.csr_matrix((slow[item], (gpu // gpus_per_node, col)), shape=(hosts, nx + 1))
    constraints = [
        LinearConstraint(assign, 1, 1),
        LinearConstraint(load, -np.inf, -np.asarray(fixed_load)),
        LinearConstraint(hbm_rows, -np.inf, hbm_cap - np.asarray(fixed_hbm)),
        LinearConstraint(host_rows, -np.inf, host_cap - np.asarray(fixed_slow)),
    ]
    objective = np.zeros(nx + 1)
    objective[-1] = 1.0
    integrality = np.concatenate([np.ones(nx), [0]])
    res = milp(
        objective,
        constraints=constraints,
        integrality=integrality,
        bounds=Bounds(np.zeros(nx + 1), np.concatenate([np.ones(nx), [np.inf]])),
        options={"node_limit": node_limit, "time_limit": time_limit_s, "presolve": True},
    )
    dual = float(getattr(res, "mip_dual_bound", np.nan) or 0.0)
    if res.x is None:
        return MilpResult(None, np.inf, dual, res.message)
    x = res.x[:nx].reshape(n, g)
    return MilpResult(np.argmax(x, axis=1), float(res.x[-1]), dual, res.message)


def movable(items) -> np.ndarray:
    """Shards the balancing may move (table-wise and column-wise; row-wise ones are pinned)."""
    return np.array([s.scheme in ("table_wise", "column_wise") for s in items], dtype=bool)


def try_milp(items, cost, hbm_b, slow_b, load, caps, model):
    """The reduced assignment MILP (sim/workloads/embedding/milp.py), if it has at most `milp_max_binaries` binaries."""
    sh, gpn = model.cfg.sharding, model.gpus_per_node
    move = movable(items)
    w = len(load)
    if not move.any() or move.sum() * w > sh.milp_max_binaries:
        return None
    ranks = np.array([s.rank for s in items])
    fixed = ~move
    fixed_load = np.bincount(ranks[fixed], cost[fixed], minlength=w)
    fixed_hbm = np.bincount(ranks[fixed], hbm_b[fixed], minlength=w)
    fixed_slow = np.bincount(ranks[fixed] // gpn, slow_b[fixed], minlength=w // gpn)
    return milp_assign(
        cost[move],
        hbm_b[move],
        slow_b[move],
        fixed_load,
        fixed_hbm,
        fixed_slow,
        caps.hbm_bytes_per_gpu,
        sum(caps.host_tier_bytes.values()),
        gpn,
        sh.milp_node_limit,
    )


def apply_milp(items, cost, hbm_b, slow_b, load, hbm_used, host_used, gpn, milp) -> None:
    for i, g in zip(np.flatnonzero(movable(items)), milp.ranks):
        items[i].rank = int(g)
    ranks = np.array([s.rank for s in items])
    load[:] = np.bincount(ranks, cost, minlength=len(load))
    hbm_used[:] = np.bincount(ranks, hbm_b, minlength=len(load))
    host_used[:] = np.bincount(ranks // gpn, slow_b, minlength=len(host_used))
