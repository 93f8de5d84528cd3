"""RecShard-style planning (arXiv 2201.10095): hot rows in HBM by access frequency, GPUs balanced.

Each shard's rows are ranked by how often they are accessed (its Zipf law), and what a row is worth
in HBM is its accesses x the time an access saves there / the bytes it occupies. `fill` keeps, for
a set of shards and a capacity, every row above a common threshold of that worth (bisection on the
threshold), which is the optimal split of that capacity for the additive cost; `place_rest` then
fills a host's slower tiers, fastest first, the same way.

The balancing of one proposal (a scheme rule and a host-pinning rule):
  1. Relaxation (`relax`): HBM of all GPUs pooled, rows ranked by accesses x time saved per byte
     (a common threshold, found by bisection; rows tied at it share what is left) -> hot rows per
     shard; sum of shard costs / GPUs is a lower bound on the most loaded GPU's cost.
  2. Greedy (`assign`): shards by cost, largest first, to the least-loaded GPU with room (HBM and
     host tiers).
  3. Refinement: moves and swaps off the most loaded GPU while they lower it. Where the reduced
     problem (fixed hot-row splits, one binary per shard and GPU) has at most `milp_max_binaries`
     binaries, scipy.optimize.milp (HiGHS, deterministic node limit) solves it too (sim/workloads/embedding/milp.py);
     the better assignment is kept and refined again.
  4. (`tier`) Each GPU re-ranks its own rows into its HBM and each host fills its tiers hottest first.
  The reported `gap` = (most loaded GPU - lower bound) / most loaded GPU, in the additive cost.
`recshard` makes several proposals, improves them by local search on the iteration estimate and
keeps the best (sim/workloads/embedding/proposals.py, search.py).

`proxy_s` is the additive cost a shard adds to its GPU: its accesses at uncontended per-access times
(sim/workloads/embedding/cost.py) plus its share of the pooled all-to-all; the balancing works on it, the
search then on the iteration estimate, and the simulation measures the real, contended result.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import ScenarioError
from sim.workloads.embedding.cost import LENGTH_BYTES, CostModel, Shard
from sim.workloads.embedding.milp import apply_milp, movable, try_milp
from sim.workloads.embedding.planner import Capacities, Plan, gb


def comm_proxy_s(model: CostModel, s: Shard) -> float:
    """Owner-side all-to-all bytes over NIC / scale-up: indices in, pooled embeddings out (forward),
    their gradients in (backward)."""
    cfg, w, gpn = model.cfg, model.num_gpus, model.gpus_per_node
    if s.scheme == "data_parallel" or w == 1:
        return 0.0
    b = cfg.batch_size_per_gpu
    share = 1.0 / s.count if s.scheme in ("row_wise", "table_row_wise") else 1.0
    index = (
        b
        * (w - 1)
        * (
            s.table.pooling / model.dedup(s.table) * share * model.index_bytes
            + LENGTH_BYTES
            + (LENGTH_BYTES if model.dedup(s.table) > 1 else 0.0)
        )
    )
    pooled = b * (w - 1) * s.dim * model.pooled_bytes / model.pooled_dedup(s.table)
    cross = (w - gpn) / (w - 1)
    per_byte = cross / model.hw.nic.achieved_bytes_per_s + (1 - cross) / model.hw.scale_up.achieved_bytes_per_s
    return (index + 2 * pooled) * per_byte


def proxy_s(model: CostModel, s: Shard) -> float:
    """Additive cost of a shard: its accesses at uncontended per-access times, plus its all-to-all
    (kept per shard by the model: the balancing asks for the same shards again and again)."""
    return model.per_shard("proxy_s", s, lambda s: _proxy_s(model, s))


def _proxy_s(model: CostModel, s: Shard) -> float:
    """proxy_s, computed."""
    tr = model.traffic(s)
    t = (tr.fwd_hbm_extra_bytes + tr.bwd_hbm_extra_bytes) / (
        model.hw.gpu.memory_bandwidth * model.hw.gpu.efficiency.memory
    )
    t += sum(a.count * model.access_time_s(a.tier, a.access_bytes) for a in tr.fwd + tr.bwd)
    return t + comm_proxy_s(model, s)


def fill(shards: list[Shard], start: list[int], capacity: float, model: CostModel, slow_tier: str | None) -> list[int]:
    """New boundaries >= start: each shard's next-hottest rows, by a common threshold on
    lookups x p(row) x time saved per access / bytes per row, using at most `capacity` bytes."""
    if not shards:
        return []
    b = np.array([model.stored_row_bytes(s) for s in shards])
    rows = np.array([s.rows for s in shards])
    st = np.asarray(start)
    if float(((rows - st) * b).sum()) <= capacity:
        return rows.tolist()
    if slow_tier is None:
        weight = np.array([s.lookups / bi for s, bi in zip(shards, b)])
    else:
        weight = np.array(
            [
                s.lookups
                * max(
                    model.access_time_s(slow_tier, model.row_bytes(s)) - model.access_time_s("hbm", model.row_bytes(s)),
                    1e-15,
                )
                / bi
                for s, bi in zip(shards, b)
            ]
        )

    norm = np.array([s.dist.norm for s in shards])
    alpha = np.array([s.dist.alpha for s in shards])
    flat = alpha <= 0
    inv = -1.0 / np.where(flat, 1.0, alpha)

    def ends(lam: float) -> np.ndarray:
        """Rows accessed with probability >= lam / weight (ZipfRows.hot_rows, for all shards at once)."""
        rate = lam / weight
        k = np.where(flat, np.where(rate * rows <= 1, rows, 0), (rate * norm) ** inv)
        return np.maximum(st, np.minimum(rows, np.floor(k + 1e-9))).astype(np.int64)

    top = max(wi * s.dist.pmf(1) for s, wi in zip(shards, weight)) * 2
    low = min(wi * s.dist.pmf(s.rows) for s, wi in zip(shards, weight)) / 2
    lo, hi = math.log(low), math.log(top)  # lo: everything fits the threshold, hi: nothing
    for _ in range(80):
        mid = (lo + hi) / 2
        if float(((ends(math.exp(mid)) - st) * b).sum()) > capacity:
            lo = mid
        else:
            hi = mid
    # rows tied at the threshold (a flat law: all or none of a shard) share what is left, worth first
    inside, over = ends(math.exp(hi)), ends(math.exp(lo))
    left = capacity - float(((inside - st) * b).sum())
    for k in sorted(np.flatnonzero(over > inside), key=lambda k: (-weight[k], k)):
        extra = min(int(over[k] - inside[k]), int(max(left, 0.0) // b[k]))
        inside[k] += extra
        left -= extra * b[k]
    return inside.astype(int).tolist()


def place_rest(shards: list[Shard], hbm_rows: list[int], model: CostModel, caps: Capacities, host: int) -> None:
    """Set HBM rows and fill the host's slow tiers, fastest first, with the rest (hottest first)."""
    bound = list(hbm_rows)
    for s, h in zip(shards, bound):
        s.hbm_rows, s.tier_rows, s.cache_rows = int(h), {}, 0
    tiers = list(caps.host_tier_bytes.items())
    for k, (tier, cap) in enumerate(tiers):
        last = k == len(tiers) - 1
        new = [s.rows for s in shards] if last else fill(shards, bound, cap, model, tier)
        for s, a, e in zip(shards, bound, new):
            if e > a:
                s.tier_rows[tier] = int(e - a)
        bound = new
    short = sum((s.rows - e) * model.stored_row_bytes(s) for s, e in zip(shards, bound))
    if short > 0:
        where = f"host {host}" if host >= 0 else "the cluster"
        raise ScenarioError(
            f"{where}: the HBM and {', '.join(caps.host_tier_bytes) or 'no host tier'} left for "
            f"its shards hold too little, short by {gb(short)}",
            path="workload.placements",
        )


def recshard(shards: list[Shard], model: CostModel, caps: Capacities) -> Plan:
    """Proposals (scheme rules x host-pinning rules), each balanced, tiered and improved by local
    search on the iteration estimate (sim/workloads/embedding/search.py); the best estimate wins."""
    from sim.workloads.embedding.proposals import best_plan

    return best_plan(shards, model, caps)


def relax(items: list[Shard], model: CostModel, caps: Capacities) -> np.ndarray:
    """Step 1: hot rows with every GPU's HBM and every host's tiers pooled; returns each shard's
    additive cost (their sum / GPUs is a lower bound on the most loaded GPU's)."""
    w, gpn = model.num_gpus, model.gpus_per_node
    first_slow = next(iter(caps.host_tier_bytes), None)
    total_slow = sum(caps.host_tier_bytes.values()) * (w // gpn)
    need = sum(s.rows * model.stored_row_bytes(s) for s in items)
    if need > caps.hbm_bytes_per_gpu * w + total_slow:
        raise ScenarioError(
            f"embedding tables need {gb(need)} but HBM ({gb(caps.hbm_bytes_per_gpu)} x {w} GPUs) and host "
            f"tiers hold {gb(caps.hbm_bytes_per_gpu * w + total_slow)}: short by "
            f"{gb(need - caps.hbm_bytes_per_gpu * w - total_slow)}",
            path="workload.tables",
        )
    hosts = w // gpn
    pooled = Capacities(caps.hbm_bytes_per_gpu * w, {t: c * hosts for t, c in caps.host_tier_bytes.items()})
    place_rest(items, fill(items, [0] * len(items), pooled.hbm_bytes_per_gpu, model, first_slow), model, pooled, -1)
    return np.array([proxy_s(model, s) for s in items])


def snapshot(items) -> list:
    return [(s.rank, s.host, s.hbm_rows, dict(s.tier_rows), s.cache_rows) for s in items]


def restore(items, state) -> None:
    for s, (rank, host, hbm_rows, tier_rows, cache_rows) in zip(items, state):
        s.rank, s.host, s.hbm_rows, s.tier_rows, s.cache_rows = rank, host, hbm_rows, dict(tier_rows), cache_rows


def assign(items, cost, caps: Capacities, model: CostModel, pin_rule: str, exact_tiers: bool = True):
    """Steps 2-4 (greedy, refinement and MILP, exact tiering) for one pinning rule; returns the MILP result."""
    w, gpn = model.num_gpus, model.gpus_per_node
    hosts = w // gpn
    # 2. greedy: pinned shards first, then largest cost to the least loaded GPU with room
    load, hbm_used = np.zeros(w), np.zeros(w)
    host_used = np.zeros(hosts)
    host_cap = sum(caps.host_tier_bytes.values())
    hbm_b = np.array([s.hbm_rows * model.stored_row_bytes(s) for s in items])
    slow_b = np.array([(s.rows - s.hbm_rows) * model.stored_row_bytes(s) for s in items])

    def add(i: int, g: int) -> None:
        items[i].rank = g
        load[g] += cost[i]
        hbm_used[g] += hbm_b[i]
        host_used[g // gpn] += slow_b[i]

    for i in (i for i, s in enumerate(items) if s.scheme == "row_wise"):
        add(i, items[i].rank)
    _pin_groups(items, cost, hbm_b, slow_b, load, hbm_used, host_used, caps, gpn, add, pin_rule)
    for i in sorted((i for i, s in enumerate(items) if s.rank < 0), key=lambda i: -cost[i]):
        fits = (hbm_used + hbm_b[i] <= caps.hbm_bytes_per_gpu) & (np.repeat(host_used, gpn) + slow_b[i] <= host_cap)
        add(
            i,
            int(np.argmin(np.where(fits, load, np.inf)))
            if fits.any()
            else _squeeze(i, items, hbm_b, slow_b, cost, hbm_used, host_used, caps, model),
        )
    # 3. refinement on the additive cost; the MILP of the reduced problem where it is small enough
    _refine(items, cost, hbm_b, slow_b, load, hbm_used, host_used, caps, gpn, model.cfg.sharding.refine_rounds)
    milp = try_milp(items, cost, hbm_b, slow_b, load, caps, model)
    if milp is not None and milp.ranks is not None and milp.objective < load.max() * (1 - 1e-9):
        apply_milp(items, cost, hbm_b, slow_b, load, hbm_used, host_used, gpn, milp)
        _refine(items, cost, hbm_b, slow_b, load, hbm_used, host_used, caps, gpn, model.cfg.sharding.refine_rounds)
    # 4. exact tiering per GPU (HBM) and per host (slow tiers)
    if exact_tiers:
        tier(items, model, caps)
    return milp


def tier(items: list[Shard], model: CostModel, caps: Capacities, hosts: list[int] | None = None) -> None:
    """Each GPU keeps its own shards' most valuable rows in its HBM; each host fills its tiers."""
    gpn = model.gpus_per_node
    first_slow = next(iter(caps.host_tier_bytes), None)
    on_rank: dict[int, list[Shard]] = {}  # in the order of items
    for s in items:
        on_rank.setdefault(s.rank, []).append(s)
    for host in range(model.num_gpus // gpn) if hosts is None else hosts:
        hot = []
        for g in range(host * gpn, (host + 1) * gpn):
            mine = on_rank.get(g, [])
            hot += list(zip(mine, fill(mine, [0] * len(mine), caps.hbm_bytes_per_gpu, model, first_slow)))
        place_rest([s for s, _ in hot], [h for _, h in hot], model, caps, host)


def _pin_groups(items, cost, hbm_b, slow_b, load, hbm_used, host_used, caps, gpn, add, rule: str) -> None:
    """Table-row-wise tables to hosts, shard k on the host's GPU k: costliest first to the least loaded
    host with room (`rule` cost), to the host with most free HBM (`hbm`), or largest first to the host
    holding the fewest such bytes (`bytes`)."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(items):
        if s.scheme == "table_row_wise":
            groups.setdefault(s.table.name, []).append(i)
    host_cap = sum(caps.host_tier_bytes.values())
    table_bytes = np.zeros(len(host_used))  # whole table-row-wise tables per host
    model_bytes = (hbm_b + slow_b) / np.array([s.rows for s in items])
    order = (lambda g: -items[g[0]].table.rows * model_bytes[g[0]]) if rule == "bytes" else (lambda g: -cost[g].sum())
    for idx in sorted(groups.values(), key=order):
        ranks = np.array([items[i].index for i in idx])
        host_load = load.reshape(-1, gpn).sum(axis=1)
        # per host: its GPU k holds shard k's hot rows in HBM, the host's tiers the rest
        hbm_fits = (hbm_used.reshape(-1, gpn)[:, ranks] + hbm_b[idx] <= caps.hbm_bytes_per_gpu).all(axis=1)
        fits = hbm_fits & (host_used + slow_b[idx].sum() <= host_cap)
        if rule == "cost" and fits.any():
            host = int(np.argmin(np.where(fits, host_load, np.inf)))
        else:
            host = (
                int(np.argmin(table_bytes))
                if rule == "bytes"
                else int(np.argmax(caps.hbm_bytes_per_gpu * gpn - hbm_used.reshape(-1, gpn).sum(axis=1)))
            )
        table_bytes[host] += items[idx[0]].table.rows * model_bytes[idx[0]]
        for i, k in zip(idx, ranks):
            items[i].host = host
            add(i, host * gpn + int(k))


def _squeeze(i, items, hbm_b, slow_b, cost, hbm_used, host_used, caps, model) -> int:
    """No GPU has room for shard i's relaxed hot rows: keep fewer of them on the GPU with most free HBM."""
    gpn = model.gpus_per_node
    free = caps.hbm_bytes_per_gpu - hbm_used
    room = free + (sum(caps.host_tier_bytes.values()) - np.repeat(host_used, gpn))
    total = hbm_b[i] + slow_b[i]
    ok = room >= total
    if not ok.any():
        raise ScenarioError(
            f"recshard: shard {items[i].name} ({gb(total)}) fits on no GPU and host, short by {gb(total - room.max())}",
            path="workload.tables",
        )
    g = int(np.argmax(np.where(ok, free, -np.inf)))
    s = items[i]
    keep = min(s.hbm_rows, max(0, int(free[g] // model.stored_row_bytes(s))))
    moved = (s.hbm_rows - keep) * model.stored_row_bytes(s)
    rows = {t: s.tier_rows.get(t, 0) for t in caps.host_tier_bytes}  # fastest tier first
    first = next(iter(rows))
    rows[first] += s.hbm_rows - keep
    s.hbm_rows, s.tier_rows = keep, {t: n for t, n in rows.items() if n}
    hbm_b[i] -= moved
    slow_b[i] += moved
    cost[i] = proxy_s(model, s)
    return g


def _refine(items, cost, hbm_b, slow_b, load, hbm_used, host_used, caps, gpn, rounds) -> None:
    """Moves, then swaps, of free shards off the most loaded GPU while they lower its load."""
    ranks = np.array([s.rank for s in items])
    can_move = movable(items)
    cap, host_cap = caps.hbm_bytes_per_gpu, sum(caps.host_tier_bytes.values())
    host_of = np.arange(len(load)) // gpn
    for _ in range(rounds):
        g = int(np.argmax(load))
        best, best_val = None, load[g] * (1 - 1e-9)
        for i in np.flatnonzero((ranks == g) & can_move):
            other_host = host_of != host_of[g]
            ok = (hbm_used + hbm_b[i] <= cap) & (~other_host | (host_used[host_of] + slow_b[i] <= host_cap))
            ok[g] = False
            val = np.where(ok, np.maximum(load[g] - cost[i], load + cost[i]), np.inf)
            h = int(np.argmin(val))
            if val[h] < best_val:
                best, best_val = ("move", i, h), val[h]
            js = np.flatnonzero((ranks != g) & can_move & (cost < cost[i]))
            if len(js):
                h_j = ranks[js]
                delta = cost[i] - cost[js]
                fits = (hbm_used[g] - hbm_b[i] + hbm_b[js] <= cap) & (hbm_used[h_j] - hbm_b[js] + hbm_b[i] <= cap)
                same = host_of[h_j] == host_of[g]
                fits &= same | (
                    (host_used[host_of[g]] - slow_b[i] + slow_b[js] <= host_cap)
                    & (host_used[host_of[h_j]] - slow_b[js] + slow_b[i] <= host_cap)
                )
                val = np.where(fits, np.maximum(load[g] - delta, load[h_j] + delta), np.inf)
                k = int(np.argmin(val))
                if val[k] < best_val:
                    best, best_val = ("swap", i, int(js[k])), val[k]
        if best is None:
            break
        moves = [(best[1], best[2])] if best[0] == "move" else [(best[1], ranks[best[2]]), (best[2], g)]
        for i, h in moves:
            src = ranks[i]
            load[src] -= cost[i]
            hbm_used[src] -= hbm_b[i]
            host_used[host_of[src]] -= slow_b[i]
            load[h] += cost[i]
            hbm_used[h] += hbm_b[i]
            host_used[host_of[h]] += slow_b[i]
            ranks[i] = h
            items[i].rank = int(h)
