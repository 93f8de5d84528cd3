"""Local search for recshard on the planner's estimate of an iteration, not an additive proxy.

recshard's greedy balances one additive cost per GPU, but the iteration is a sum of per-phase
maxima (sim/workloads/embedding/iteration_score.py): a GPU heavy in lookups but light in
all-to-all bytes and one the other way round weigh the same additively and very differently in
the iteration.

`Assignment` holds shards on ranks (hot-row splits fixed) with the per-rank sums of
`IterationScore`. `improve` is a descent on the estimate over
- moves of a table- or column-wise shard to any rank and swaps of two such shards,
- moves of a table-row-wise table to another host (its shard k to GPU k there) and swaps of two
  such tables' hosts,
restricted to shards on the critical ranks: the GPUs whose lookup or update is the slowest (or,
where a host's shared tier bounds it, that host's GPUs with most tier traffic) and the largest
contributors to each all-to-all's bottleneck link; their runners-up only when none of those
improves. Candidates must fit (HBM per GPU, each host tier per host). A move or swap changes
two ranks and their hosts, so all candidates are scored in one vectorised pass from the current
sums (the other ranks enter through the top three values of each term). Each step takes the best
candidate of the first batch that holds an improving one (most critical ranks first); the search
stops when none improves or after `rounds` steps. Deterministic: no time limits, ties by order.
"""

from __future__ import annotations

import numpy as np

from sim.workloads.embedding.cost import Shard
from sim.workloads.embedding.iteration_score import IterationScore

FIRST = True  # take the best of the first improving batch (False: of all candidates)


class Assignment:
    """Shards on ranks with their per-shard vectors and per-rank sums; `hbm_cap` bounds HBM per GPU,
    `tier_caps` each host tier per host."""

    def __init__(self, items: list[Shard], score: IterationScore, hbm_cap: float, tier_caps: dict[str, float]) -> None:
        model = score.model
        self.items, self.score = items, score
        self.hbm_cap = hbm_cap
        self.host_cap = np.array([tier_caps.get(t, 0.0) for t in score.tiers])  # per host and tier
        self.feats = np.array([score.features(s) for s in items]).reshape(len(items), score.num_features)
        self.comms = np.array([score.comm(s) for s in items]).reshape(len(items), 3)
        self.hbm_b = np.array([model.hbm_bytes(s) for s in items])
        self.slow_b = np.array([[model.tier_bytes(s).get(t, 0.0) for t in score.tiers] for s in items]).reshape(
            len(items), len(score.tiers)
        )
        self.ranks = np.array([s.rank for s in items], dtype=np.int64)
        self.movable = np.array([s.scheme in ("table_wise", "column_wise") for s in items], dtype=bool)
        self.groups: dict[str, np.ndarray] = {}
        for i, s in enumerate(items):
            if s.scheme == "table_row_wise":
                self.groups.setdefault(s.table.name, []).append(i)
        # table-row-wise tables: shard k on GPU k of the table's host; per table its shards' rows by k
        # and, per phase and host, the link loads it would add there
        self.group_names = sorted(self.groups, key=lambda n: self.groups[n][0])
        order = [np.array(sorted(self.groups[n], key=lambda i: items[i].index)) for n in self.group_names]
        self.group_idx = np.array(order, dtype=np.int64).reshape(len(order), score.gpn)
        self.group_local = np.broadcast_to(np.arange(score.gpn), self.group_idx.shape)  # shard k on GPU k
        if len(order):
            c = self.comms[self.group_idx]  # [g, k, 3]
            units = ((0, score.IN), (1, score.OUT, 2, score.LOUT), (1, score.IN, 2, score.LIN))
            by_host = (score.hosts, score.gpn, -1)
            self.group_links = [
                sum(np.einsum("gk,hkl->ghl", c[:, :, u[t]], u[t + 1].reshape(by_host)) for t in range(0, len(u), 2))
                for u in units
            ]
        self._sums()

    def _sums(self) -> None:
        w, sc = self.score.w, self.score
        self.F = np.zeros((w, sc.num_features))
        np.add.at(self.F, self.ranks, self.feats)
        self.C = np.zeros((w, 3))
        np.add.at(self.C, self.ranks, self.comms)
        self.hbm_used = np.bincount(self.ranks, self.hbm_b, minlength=w)
        self.host_used = np.zeros((sc.hosts, len(sc.tiers)))
        np.add.at(self.host_used, self.ranks // sc.gpn, self.slow_b)

    def fits(self) -> bool:
        return bool(
            (self.hbm_used <= self.hbm_cap * (1 + 1e-12)).all()
            and (self.host_used <= self.host_cap * (1 + 1e-12) + 1.0).all()
        )

    def value(self) -> float:
        return float(self.score.total(self.F, self.C))

    def critical_ranks(self, depth: int = 2) -> list[int]:
        """GPUs on the critical path, most critical first: the slowest lookup and update (where a
        host's shared tier is the bound, its GPUs with most tier traffic) and the largest
        contributors to each all-to-all's bottleneck link; with depth 2 the runners-up of each too."""
        sc = self.score
        k = len(sc.tiers)
        firsts: list[np.ndarray] = []
        for p, (own, host) in enumerate(sc.kernel_terms(self.F + sc.base)):
            order = np.argsort(-own, kind="stable")
            if host.max() >= own.max():  # the host's shared tier
                h = int(np.argmax(host))
                o = p * (2 + 2 * k) + 2
                tier_bytes = self.F[h * sc.gpn : (h + 1) * sc.gpn, o : o + 2 * k].sum(-1)
                order = h * sc.gpn + np.argsort(-tier_bytes, kind="stable")
            firsts.append(order)
        units = ((self.C[:, :1], (sc.IN,)), (self.C[:, 1:], (sc.OUT, sc.LOUT)), (self.C[:, 1:], (sc.IN, sc.LIN)))
        for load, (coef, mats) in zip(sc.link_loads(self.C), units):
            link = int(np.argmax(load))
            contrib = sum(coef[:, k] * m[:, link] for k, m in enumerate(mats))
            firsts.append(np.argsort(-contrib, kind="stable"))
        out: list[int] = []
        for d in range(depth):
            for order in firsts:
                r = int(order[d]) if d < len(order) else None
                if r is not None and r not in out:
                    out.append(r)
        return out

    def candidates(self, crit: list[int]):
        """Moves and swaps touching the critical ranks: (a, b, i, j) arrays for shard i from rank a to
        b and shard j (-1: none) back; (g, h, u) arrays for table-row-wise table g to host h and
        table u (-1: none) from there to g's host."""
        sc = self.score
        free = np.flatnonzero(self.movable)
        a, b, i_, j_ = [], [], [], []
        for n, r in enumerate(crit):
            earlier = crit[:n]  # their swaps with r's shards were proposed already
            partners = free[(self.ranks[free] != r) & ~np.isin(self.ranks[free], earlier)]
            for i in free[self.ranks[free] == r]:
                dests = np.delete(np.arange(sc.w), r)
                a += [r] * (len(dests) + len(partners))
                b += dests.tolist() + self.ranks[partners].tolist()
                i_ += [int(i)] * (len(dests) + len(partners))
                j_ += [-1] * len(dests) + partners.tolist()
        pairs = tuple(np.array(x, dtype=np.int64) for x in (a, b, i_, j_))
        # table-row-wise: a table to another host, or two tables on different hosts trade hosts
        g_host = self.ranks[self.group_idx[:, 0]] // sc.gpn if len(self.group_idx) else np.zeros(0, dtype=np.int64)
        crit_hosts = sorted({r // sc.gpn for r in crit})
        gs, hs, us = [], [], []
        for g in np.flatnonzero(np.isin(g_host, crit_hosts)):
            h = g_host[g]
            others = np.flatnonzero((g_host != h) & ~(np.isin(g_host, crit_hosts) & (np.arange(len(g_host)) < g)))
            dest = np.delete(np.arange(sc.hosts), h)
            gs += [g] * (len(dest) + len(others))
            hs += dest.tolist() + g_host[others].tolist()
            us += [-1] * len(dest) + others.tolist()
        groups = tuple(np.array(x, dtype=np.int64) for x in (gs, hs, us))
        return pairs, groups

    def evaluate_groups(self, g: np.ndarray, h2: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Estimated iteration after table-row-wise table g moves to host h2 and, where u >= 0, table u
        moves from h2 to g's host; inf where it does not fit."""
        sc, gpn = self.score, self.score.gpn
        h = self.ranks[self.group_idx[g, 0]] // gpn
        swap = u >= 0
        uu = np.where(swap, u, 0)
        gi, ui = self.group_idx[g], self.group_idx[uu]  # [K, gpn] shards by local GPU
        gl, ul = self.group_local[g], self.group_local[uu]
        F = self.F + sc.base
        rows_h = F.reshape(sc.hosts, gpn, -1)[h].copy()  # [K, gpn, nf]
        rows_h2 = F.reshape(sc.hosts, gpn, -1)[h2].copy()
        hbm_h = self.hbm_used.reshape(sc.hosts, gpn)[h].copy()
        hbm_h2 = self.hbm_used.reshape(sc.hosts, gpn)[h2].copy()
        k_idx = np.arange(len(g))[:, None]
        for rows, hbm, sgn, shards, loc in (
            (rows_h, hbm_h, -1.0, gi, gl),
            (rows_h2, hbm_h2, 1.0, gi, gl),
            (rows_h, hbm_h, np.where(swap, 1.0, 0.0)[:, None], ui, ul),
            (rows_h2, hbm_h2, np.where(swap, -1.0, 0.0)[:, None], ui, ul),
        ):
            rows[k_idx, loc] += np.asarray(sgn)[..., None] * self.feats[shards]
            hbm[k_idx, loc] += np.asarray(sgn) * self.hbm_b[shards]
        kernels = []
        for p, (own_p, host_p) in enumerate(sc.kernel_terms(F)):
            per_host = np.maximum(own_p.reshape(sc.hosts, gpn).max(-1), host_p)
            rest = _max_excluding(per_host, h, h2)
            new = [sc.own_times(r)[p].max(-1) for r in (rows_h, rows_h2)]
            new += [sc.host_times(r.sum(-2))[p] for r in (rows_h, rows_h2)]
            kernels.append(np.maximum.reduce([rest, *new]))
        phases = []
        for base, gl_links in zip(sc.link_loads(self.C), self.group_links):
            delta = gl_links[g, h2] - gl_links[g, h] - np.where(swap[:, None], gl_links[uu, h2] - gl_links[uu, h], 0.0)
            phases.append((base + delta).max(-1) + sc.latency)
        vals = sc.combine(*kernels, *phases)
        ds = self.slow_b[gi].sum(1) - np.where(swap[:, None], self.slow_b[ui].sum(1), 0.0)  # [K, tiers]
        cap, host_cap = self.hbm_cap * (1 + 1e-12), self.host_cap * (1 + 1e-12) + 1.0
        fits = (hbm_h <= cap).all(-1) & (hbm_h2 <= cap).all(-1)
        fits &= (self.host_used[h] - ds <= host_cap).all(-1) & (self.host_used[h2] + ds <= host_cap).all(-1)
        return np.where(fits, vals, np.inf)

    def evaluate_pairs(self, a: np.ndarray, b: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Estimated iteration after moving shard i[k] from rank a[k] to b[k] and, where j[k] >= 0,
        shard j[k] from b[k] to a[k] (a swap); inf where it does not fit. Only ranks a, b and their
        hosts change: the others enter through the three largest values of each term."""
        sc = self.score
        swap = (j >= 0)[:, None]
        jj = np.where(j >= 0, j, 0)
        dF = self.feats[i] - np.where(swap, self.feats[jj], 0.0)
        dC = self.comms[i] - np.where(swap, self.comms[jj], 0.0)
        dh = self.hbm_b[i] - np.where(j >= 0, self.hbm_b[jj], 0.0)
        ds = self.slow_b[i] - np.where(swap, self.slow_b[jj], 0.0)  # [K, tiers]
        ha, hb = a // sc.gpn, b // sc.gpn
        cross = (ha != hb)[:, None]
        F = self.F + sc.base
        H = F.reshape(sc.hosts, sc.gpn, -1).sum(1)
        own_a, own_b = sc.own_times(F[a] - dF), sc.own_times(F[b] + dF)
        host_a, host_b = sc.host_times(H[ha] - dF * cross), sc.host_times(H[hb] + dF * cross)
        own_now, host_now = sc.own_times(F), sc.host_times(H)
        kernels = []
        for p in range(2):
            rest = np.maximum(_max_excluding(own_now[p], a, b), _max_excluding(host_now[p], ha, hb))
            kernels.append(np.maximum.reduce([rest, own_a[p], own_b[p], host_a[p], host_b[p]]))
        # table- and column-wise shards send nothing host-local (comm[2] = 0): IN and OUT only
        into, out_of = sc.IN[b] - sc.IN[a], sc.OUT[b] - sc.OUT[a]
        index, pooled, grad = sc.link_loads(self.C)
        phases = [
            (index + dC[:, :1] * into).max(-1) + sc.latency,
            (pooled + dC[:, 1:2] * out_of).max(-1) + sc.latency,
            (grad + dC[:, 1:2] * into).max(-1) + sc.latency,
        ]
        vals = sc.combine(*kernels, *phases)
        cap, host_cap = self.hbm_cap * (1 + 1e-12), self.host_cap * (1 + 1e-12) + 1.0
        fits = (self.hbm_used[a] - dh <= cap) & (self.hbm_used[b] + dh <= cap)
        fits &= (ha == hb) | (
            (self.host_used[ha] - ds <= host_cap).all(-1) & (self.host_used[hb] + ds <= host_cap).all(-1)
        )
        return np.where(fits, vals, np.inf)

    def group_moves(self, g: int, h2: int, u: int) -> list[tuple[int, int]]:
        gpn = self.score.gpn
        h = int(self.ranks[self.group_idx[g, 0]]) // gpn
        moves = [(int(i), h2 * gpn + int(k)) for i, k in zip(self.group_idx[g], self.group_local[g])]
        if u >= 0:
            moves += [(int(i), h * gpn + int(k)) for i, k in zip(self.group_idx[u], self.group_local[u])]
        return moves

    def apply(self, moves: list[tuple[int, int]]) -> None:
        gpn = self.score.gpn
        for i, d in moves:
            self.ranks[i] = d
            self.items[i].rank = d
            if self.items[i].scheme == "table_row_wise":
                self.items[i].host = d // gpn
        self._sums()


def _max_excluding(values: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per k: the largest of `values` at an index other than a[k] and b[k]."""
    top = np.argsort(-values, kind="stable")[:3]
    out = np.zeros(len(a))
    for t in reversed(top):  # the first top index not excluded wins
        out = np.where((t != a) & (t != b), values[t], out)
    return out


def improve(assignment: Assignment, rounds: int) -> float:
    """Steepest descent on the estimate (ties: the earliest candidate, most critical ranks first);
    returns the final estimate (s)."""
    current = assignment.value()
    for _ in range(rounds):
        best = None
        for depth in (1, 2):  # the slowest GPU of each phase first; their runners-up only if that fails
            best, best_val = _best_candidate(assignment, assignment.critical_ranks(depth), current * (1 - 1e-9))
            if best is not None:
                break
        if best is None:
            break
        assignment.apply(best)
        current = assignment.value()
    return current


def _best_candidate(assignment: Assignment, crit: list[int], bar: float, batch: int = 512, first: bool = FIRST):
    """The best move or swap below `bar` among the candidates of `crit` (None if there is none);
    with `first`, the best of the first batch that holds one (the most critical ranks come first)."""
    (a, b, i, j), (g, h, u) = assignment.candidates(crit)
    best, best_val = None, bar
    for lo in range(0, len(a), batch):
        vals = assignment.evaluate_pairs(a[lo : lo + batch], b[lo : lo + batch], i[lo : lo + batch], j[lo : lo + batch])
        k = int(np.argmin(vals))
        if vals[k] < best_val:
            m = lo + k
            best = [(int(i[m]), int(b[m]))] + ([(int(j[m]), int(a[m]))] if j[m] >= 0 else [])
            best_val = float(vals[k])
            if first:
                return best, best_val
    for lo in range(0, len(g), batch):
        vals = assignment.evaluate_groups(g[lo : lo + batch], h[lo : lo + batch], u[lo : lo + batch])
        k = int(np.argmin(vals))
        if vals[k] < best_val:
            best, best_val = assignment.group_moves(int(g[lo + k]), int(h[lo + k]), int(u[lo + k])), float(vals[k])
    return best, best_val
