"""recshard's proposals and the choice between them, all scored by the iteration estimate.

A proposal is a scheme rule and a host-pinning rule. Scheme rules (only under `sharding.scheme:
auto`): the configured `max_shard_fraction` (a table is table-wise up to that share of a GPU's
embedding budget, table-row-wise up to a host's, row-wise beyond), and the alternatives in
SCHEME_FRACTIONS: 1.0 keeps whole tables on one GPU while they fit (fewer all-to-all partners,
no partial sums), 0.25 spreads mid-sized tables over a host (their slow-tier traffic over
several host links). Pinning rules are recshard's three (`cost`, `hbm`, `bytes`: how
table-row-wise tables pick hosts).

Each proposal is balanced by recshard (relaxation, greedy, refinement, optional MILP:
sim/workloads/embedding/recshard.py) with the relaxation's hot-row splits (tiered per GPU where
those overfill one); per scheme rule the pinning rule with the lowest estimate is kept. The
SEARCHED_VARIANTS scheme rules with the lowest estimates are then improved by local search on the
estimate (sim/workloads/embedding/search.py) with the hot-row splits fixed, re-tiered (each GPU
refills its HBM with its shards' most valuable rows) and searched again, keeping whichever state
scores best. The lowest estimate is the plan; ties go to the earlier rule (configured first), so
a run is deterministic. Plan.max_load_s and gap stay in recshard's additive cost, against its lower bound.
"""

from __future__ import annotations

import numpy as np

from sim.errors import ScenarioError
from sim.workloads.embedding.cost import CostModel, Shard
from sim.workloads.embedding.iteration_score import IterationScore
from sim.workloads.embedding.planner import Capacities, Plan, labels, make_shards
from sim.workloads.embedding.recshard import assign, proxy_s, relax, restore, snapshot, tier
from sim.workloads.embedding.search import Assignment, improve

SCHEME_FRACTIONS = (1.0, 0.25)
PIN_RULES = ("cost", "hbm", "bytes")
SEARCH_ROUNDS = 200  # steepest-descent steps per search (each one move or swap)
RETIER_PASSES = 1  # search, re-tier (and search again: more passes)
SEARCHED_VARIANTS = 2  # scheme rules whose balanced plans estimate best get the local search
SEARCH_MAX_GPUS = 64  # beyond: the configured scheme rule, pinning rule by the additive cost, no search


def planning_network(model: CostModel):
    """The cluster's network as the estimate sees it (routes and capacities; nothing is simulated)."""
    from sim.cluster.cluster import Cluster
    from sim.engine.simulation import Simulation

    return Cluster.build(Simulation(0), model.hw, "flow").network


def best_plan(shards: list[Shard], model: CostModel, caps: Capacities) -> Plan:
    if model.num_gpus > SEARCH_MAX_GPUS:
        return _proxy_plan(shards, model, caps)
    tables = list({id(s.table): s.table for s in shards}.values())
    dp = [s for s in shards if s.scheme == "data_parallel"]
    score = IterationScore(model, planning_network(model), model.cfg, tables, dp)
    variants = [shards]
    sh = model.cfg.sharding
    if sh.scheme == "auto":
        budget = caps.hbm_bytes_per_gpu + sum(s.rows * model.stored_row_bytes(s) for s in dp)
        seen = {tuple(s.scheme for s in shards)}
        for frac in SCHEME_FRACTIONS:
            alt = make_shards(tables, model, budget, frac)
            key = tuple(s.scheme for s in alt)
            if key not in seen:
                seen.add(key)
                variants.append(alt)
    starts = []  # per scheme rule: its balanced plan's estimate before the search
    for k, variant in enumerate(variants):
        try:
            starts.append((*_start(variant, model, caps, score), k))
        except ScenarioError:
            if k == 0:
                raise
    best = None
    for value, start, lower_bound, milp, k in sorted(starts, key=lambda x: (x[0], x[-1]))[:SEARCHED_VARIANTS]:
        items = [s for s in variants[k] if s.scheme != "data_parallel"]
        restore(items, start)
        value, state = _search(items, model, caps, score, caps.host_tier_bytes)
        if best is None or value < best[0] * (1 - 1e-9) or (value <= best[0] * (1 + 1e-9) and k < best[-1]):
            best = (value, state, lower_bound, milp, k)
    value, state, lower_bound, milp, k = best
    return _plan(variants[k], model, caps, state, lower_bound, milp, value)


def _plan(variant, model: CostModel, caps: Capacities, state, lower_bound: float, milp, value) -> Plan:
    items = [s for s in variant if s.scheme != "data_parallel"]
    restore(items, state)
    load = np.zeros(model.num_gpus)
    for s in items:
        load[s.rank] += proxy_s(model, s)
    final_max = float(load.max())
    gap = float(max(0.0, 1 - lower_bound / final_max)) if final_max > 0 else 0.0
    plan = Plan("recshard", variant, caps, labels(model), lower_bound, final_max, gap)
    plan.milp = milp
    plan.estimate_s = value
    return plan


def _proxy_plan(shards: list[Shard], model: CostModel, caps: Capacities) -> Plan:
    """Large clusters: recshard's balancing alone, the pinning rule with the lowest additive cost."""
    items = [s for s in shards if s.scheme != "data_parallel"]
    cost = relax(items, model, caps)
    lower_bound = float(cost.sum() / model.num_gpus)
    relaxed = snapshot(items)
    best = None
    for rule in PIN_RULES:
        restore(items, relaxed)
        milp = assign(items, cost.copy(), caps, model, rule)
        load = np.zeros(model.num_gpus)
        for s in items:
            load[s.rank] += proxy_s(model, s)
        if best is None or load.max() < best[0] * (1 - 1e-12):
            best = (float(load.max()), snapshot(items), milp)
    return _plan(shards, model, caps, best[1], lower_bound, best[2], None)


def _start(shards: list[Shard], model: CostModel, caps: Capacities, score: IterationScore):
    """(estimate, state, lower bound, MILP result) of the best pinning rule for one scheme rule,
    balanced with the relaxation's hot-row splits or, where those overfill a GPU, tiered exactly."""
    items = [s for s in shards if s.scheme != "data_parallel"]
    cost = relax(items, model, caps)
    lower_bound = float(cost.sum() / model.num_gpus)
    relaxed = snapshot(items)
    host_cap = caps.host_tier_bytes
    best = None
    for rule in PIN_RULES:
        restore(items, relaxed)
        milp = assign(items, cost.copy(), caps, model, rule, exact_tiers=False)
        assignment = Assignment(items, score, caps.hbm_bytes_per_gpu, host_cap)
        if not assignment.fits():
            tier(items, model, caps)
            assignment = Assignment(items, score, caps.hbm_bytes_per_gpu, host_cap)
        value = assignment.value()
        if best is None or value < best[0] * (1 - 1e-9):
            best = (value, snapshot(items), lower_bound, milp)
    return best


def _search(items: list[Shard], model: CostModel, caps: Capacities, score: IterationScore, host_cap: dict):
    """Local search with fixed splits, re-tier, again; the best (estimate, state) seen (the exact
    tiering always fits, the relaxed splits it starts from may not)."""
    best = None
    for k in range(RETIER_PASSES + 1):
        if k:
            tier(items, model, caps)
        assignment = Assignment(items, score, caps.hbm_bytes_per_gpu, host_cap)
        if not assignment.fits():  # relaxed splits of table-row-wise tables pinned past a GPU's HBM
            continue
        value = assignment.value()
        if best is None or value < best[0] * (1 - 1e-9):
            best = (value, snapshot(items))
        if k == RETIER_PASSES:
            break
        value = improve(assignment, SEARCH_ROUNDS)
        if value < best[0] * (1 - 1e-9):
            best = (value, snapshot(items))
    return best
