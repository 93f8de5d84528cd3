"""Local search for recshard on the planner's estimate of an iteration (estimate.py), not a proxy.

recshard's greedy balances one additive cost per GPU, but the iteration that the estimate (and the
simulation) composes is a sum of per-phase maxima:

    max(index a2a, bottom fwd) + max_r lookup_r + pooled a2a + top + max(grad a2a, bottom bwd)
    + max_r update_r + max(0, all-reduce - grad phase - max_r update_r)

with each embedding kernel = max(HBM roofline, host-link reads, host-link writes, its host's traffic
on each shared tier) and each all-to-all = its most loaded link (load / capacity) + path latency.
A GPU heavy in lookups but light in all-to-all bytes and one the other way round weigh the same
additively and very differently here.

`IterationScore` evaluates that formula exactly for shards with fixed hot-row splits on given
ranks, from per-rank sums:
- kernel bytes per rank and phase (`F`, shape [..., ranks, features]): HBM streamed bytes, HBM
  gathered bytes, and bytes read and written on each host tier (the host's share is their sum
  over its GPUs);
- all-to-all coefficients per rank (`C`, [..., ranks, 3]): a shard on rank o adds `index` bytes
  from every other rank to o, `pooled` bytes from o to every other rank (the gradients back: the
  transpose) and, table-row-wise, `local` bytes to o's host peers (cost.comm_matrices). With fixed
  routes a link's load is linear in the traffic matrix, so every link's load is C @ (unit loads of
  "everything into o", "out of o", "to/from o's host peers"), routed once per plan on the real
  topology (PXN or direct flows, even ECMP split, as cost.a2a_estimate_s).
Both add over shards, so a candidate move or swap changes two ranks' rows and is scored in one
vectorised pass over all candidates ([candidates, ranks, ...] arrays).

`improve` is steepest descent over moves of a table-/column-wise shard to any rank and swaps of two
such shards, and moves of a table-row-wise table to another host (its shard k to GPU k there) or
swaps of two such tables' hosts, restricted to shards on the critical ranks (the GPUs whose
lookup or update is the slowest, and the largest contributors to each all-to-all's bottleneck
link) and to what fits (HBM per GPU, host tiers per host). It stops when no candidate lowers the
estimate or after `rounds` steps; everything is deterministic (no time limits, ties by index).
"""

from __future__ import annotations

import numpy as np

from hardware_models.topology import tier_read_capacity
from sim.workloads.embedding.cost import LENGTH_BYTES, CostModel, Shard, a2a_flows

PHASES = ("fwd", "bwd")


class IterationScore:
    """The estimate of one iteration as a function of per-rank sums (see the module docstring)."""

    def __init__(self, model: CostModel, network, config, tables, dp_shards: list[Shard]) -> None:
        from sim.models.dlrm import backward_gemms
        from sim.network.collectives import choose, estimate_s
        from sim.workloads.embedding.estimate import dense_split

        self.model, self.w, self.gpn = model, model.num_gpus, model.gpus_per_node
        self.hosts = self.w // self.gpn
        self.tiers = list(model.tiers)
        hw, gpu = model.hw, model.hw.gpu
        self.link_bw = hw.host_link.achieved_bytes_per_s
        self.read_cap = np.array([tier_read_capacity(model.tiers[t]) for t in self.tiers])
        self.write_bw = np.array([model.tiers[t].write_bandwidth_bytes_per_s for t in self.tiers])
        self.stream_bw = gpu.memory_bandwidth * gpu.efficiency.memory
        self.gather_bw = gpu.memory_bandwidth * (gpu.efficiency.gather or gpu.efficiency.memory)
        self.launch = gpu.launch_overhead
        gemms = config.dense.dense_gemms(config.batch_size_per_gpu, [t.dim for t in tables])
        bottom, top = dense_split(config.dense, gemms)
        dt = config.dense.dtype

        def gemm_s(gs) -> float:
            return float(sum(gpu.gemm_time_s(m, n, k, dt, b) for _, m, n, k, b in gs))

        self.bottom_fwd, self.bottom_bwd = gemm_s(bottom), gemm_s(backward_gemms(bottom))
        self.top = gemm_s(top + backward_gemms(top))
        self.allreduce = 0.0
        nodes = network.topology.devices
        dense = config.dense
        bottom_params = sum(k * n + n for k, n in zip(dense.bottom_mlp, dense.bottom_mlp[1:]))
        dp = sum(s.rows * s.dim for s in dp_shards)
        total = dense.dense_params([t.dim for t in tables])
        for nbytes in (
            (total - bottom_params + dp) * dense.grad_bytes_per_param,
            bottom_params * dense.grad_bytes_per_param,
        ):
            if self.w > 1 and nbytes > 0:
                _, steps = choose(network, "all_reduce", "auto", nodes, nbytes)
                self.allreduce += estimate_s(network, steps)
        self._features: dict[tuple, np.ndarray] = {}  # per shard and split (the shards outlive the plan)
        self.base = np.zeros((self.w, self.num_features))
        for s in dp_shards:
            self.base += self.features(s)
        self._unit_loads(network, config.all_to_all)

    # ---- per-shard vectors ----------------------------------------------------------------------
    @property
    def num_features(self) -> int:
        return 2 * (2 + 2 * len(self.tiers))

    def features(self, s: Shard) -> np.ndarray:
        """Per phase: [HBM streamed, HBM gathered, bytes read per tier..., bytes written per tier...]."""
        key = (id(s), s.hbm_rows, tuple(s.tier_rows.items()), s.cache_rows)
        if key not in self._features:
            self._features[key] = self._compute_features(s)
        return self._features[key]

    def _compute_features(self, s: Shard) -> np.ndarray:
        model, k = self.model, len(self.tiers)
        tr = model.traffic(s)
        out = np.zeros(self.num_features)
        for p, (accesses, extra) in enumerate(((tr.fwd, tr.fwd_hbm_extra_bytes), (tr.bwd, tr.bwd_hbm_extra_bytes))):
            o = p * (2 + 2 * k)
            out[o] += extra
            for a in accesses:
                if a.tier == "hbm":
                    out[o + 1] += a.count * model.hbm.bytes_moved(a.access_bytes)
                else:
                    t = self.tiers.index(a.tier)
                    out[o + 2 + t + (k if a.write else 0)] += a.count * model.tiers[a.tier].bytes_moved(a.access_bytes)
        return out

    def comm(self, s: Shard) -> np.ndarray:
        """[index bytes from each other rank, pooled bytes to each other rank, pooled bytes to each host peer]."""
        model, cfg = self.model, self.model.cfg
        b, d = cfg.batch_size_per_gpu, cfg.dedup
        pe = model.pooled_bytes / model.pooled_dedup()
        share = 1.0 / s.count if s.scheme in ("row_wise", "table_row_wise") else 1.0
        index = b * (s.table.pooling / d * share * model.index_bytes + LENGTH_BYTES) + (
            b * LENGTH_BYTES if d > 1 else 0.0
        )
        if s.scheme == "table_row_wise":
            return np.array([index, b / self.gpn * s.dim * pe, b * self.w / self.gpn * s.dim * pe])
        return np.array([index, b * s.dim * pe, 0.0])

    # ---- all-to-all geometry --------------------------------------------------------------------
    def _unit_loads(self, network, algorithm: str) -> None:
        """Per rank o and link: load of one byte from every other rank into o (IN), out of o to every
        other rank (OUT), out of o to its host peers (LOUT) and into o from them (LIN)."""
        topo, w, gpn = network.topology, self.w, self.gpn
        nodes = topo.devices
        flows, tags = [], []
        host = np.arange(w) // gpn
        for o in range(w):
            for kind in range(4):
                m = np.zeros((w, w))
                peers = (host == host[o]) if kind >= 2 else np.ones(w, dtype=bool)
                if kind in (0, 3):
                    m[peers, o] = 1.0
                else:
                    m[o, peers] = 1.0
                m[o, o] = 0.0
                f = a2a_flows(m, nodes, gpn, algorithm)
                flows += f
                tags += [kind * w + o] * len(f)
        self.capacity = np.asarray(topo.capacity, dtype=float)
        loads = np.zeros((4 * w, topo.num_links))
        latency = 0.0
        srcs, dsts = [f[0] for f in flows], [f[1] for f in flows]
        nbytes = np.array([f[2] for f in flows])
        batch = topo.route_batch(srcs, dsts) if len(flows) > 1 else None
        if batch is not None:
            per_path = nbytes[batch.owner] * np.asarray(batch.share, dtype=float)
            tag_of_link = np.repeat(np.asarray(tags)[batch.owner], batch.lengths)
            np.add.at(loads, (tag_of_link, batch.flat), np.repeat(per_path, batch.lengths))
            latency = float(batch.latency.max()) if len(batch.latency) else 0.0
        else:
            for (src, dst, size, *_), tag in zip(flows, tags):
                paths = [list(p) for p in topo.routes(src, dst) if p]
                for p in paths:
                    loads[tag, p] += size / len(paths)
                if paths:
                    latency = max(latency, topo.path_latency_s(tuple(paths[0])))
        loads /= self.capacity
        active = loads.any(axis=0)  # links some all-to-all byte crosses
        self.IN, self.OUT, self.LOUT, self.LIN = loads[:, active].reshape(4, w, -1)
        self.latency = latency

    # ---- the estimate ---------------------------------------------------------------------------
    def own_times(self, F: np.ndarray) -> list[np.ndarray]:
        """Per phase: a GPU's own kernel time (HBM roofline, host-link reads, writes) from its row(s)."""
        k, out = len(self.tiers), []
        for p in range(2):
            o = p * (2 + 2 * k)
            extra, gather = F[..., o], F[..., o + 1]
            reads, writes = F[..., o + 2 : o + 2 + k].sum(-1), F[..., o + 2 + k : o + 2 + 2 * k].sum(-1)
            mem = np.where(
                (extra > 0) | (gather > 0), extra / self.stream_bw + gather / self.gather_bw + self.launch, 0.0
            )
            out.append(np.maximum(mem, np.maximum(reads, writes) / self.link_bw))
        return out

    def host_times(self, H: np.ndarray) -> list[np.ndarray]:
        """Per phase: a host's time on its shared tiers, from its GPUs' summed row(s)."""
        k, out = len(self.tiers), []
        for p in range(2):
            o = p * (2 + 2 * k)
            if not k:
                out.append(np.zeros(H.shape[:-1]))
                continue
            reads, writes = H[..., o + 2 : o + 2 + k], H[..., o + 2 + k : o + 2 + 2 * k]
            out.append(np.maximum(reads / self.read_cap, writes / self.write_bw).max(-1))
        return out

    def kernel_terms(self, F: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per phase (lookup, update): (each GPU's own time [..., ranks], each host's shared-tier
        time [..., hosts]); a GPU's kernel is the larger of its own and its host's."""
        H = F.reshape(F.shape[:-2] + (self.hosts, self.gpn, F.shape[-1])).sum(-2)
        return list(zip(self.own_times(F), self.host_times(H)))

    def kernels(self, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lookup, update) seconds of the slowest GPU, for F of shape [..., ranks, features]."""
        (fo, fh), (bo, bh) = self.kernel_terms(F)
        return np.maximum(fo.max(-1), fh.max(-1)), np.maximum(bo.max(-1), bh.max(-1))

    def link_loads(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index, pooled, gradient) all-to-all seconds per link, for C of shape [..., ranks, 3]."""
        index = C[..., 0] @ self.IN
        pooled = C[..., 1] @ self.OUT + C[..., 2] @ self.LOUT
        grad = C[..., 1] @ self.IN + C[..., 2] @ self.LIN
        return index, pooled, grad

    def all_to_alls(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index, pooled, gradient) all-to-all seconds, for C of shape [..., ranks, 3]."""
        return tuple(x.max(-1) + self.latency for x in self.link_loads(C))

    def total(self, F: np.ndarray, C: np.ndarray) -> np.ndarray:
        """The estimate of an iteration for per-rank sums F and C (without the data-parallel base)."""
        return self.combine(*self.kernels(F + self.base), *self.all_to_alls(C))

    def combine(self, fwd, bwd, index, pooled, grad):
        """The estimate from its phases' maxima."""
        grad_phase = np.maximum(grad, self.bottom_bwd)
        exposed = np.maximum(0.0, self.allreduce - grad_phase - bwd)
        return np.maximum(index, self.bottom_fwd) + fwd + pooled + self.top + grad_phase + bwd + exposed


# ------------------------------------------------------------------------------------------------
# the search


class Assignment:
    """Shards on ranks with their per-shard vectors and per-rank sums; `caps` bounds HBM per GPU and
    the host tiers (together) per host."""

    def __init__(self, items: list[Shard], score: IterationScore, hbm_cap: float, host_cap: float) -> None:
        model = score.model
        self.items, self.score = items, score
        self.hbm_cap, self.host_cap = hbm_cap, host_cap
        self.feats = np.array([score.features(s) for s in items]).reshape(len(items), score.num_features)
        self.comms = np.array([score.comm(s) for s in items]).reshape(len(items), 3)
        self.hbm_b = np.array([model.hbm_bytes(s) for s in items])
        self.slow_b = np.array([sum(model.tier_bytes(s).values()) for s in items])
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
        self.group_local = np.array([[items[i].index for i in row] for row in self.group_idx], dtype=np.int64)
        if len(order):
            host_ranks = np.arange(score.hosts)[:, None] * score.gpn + self.group_local[:, None, :]  # [g, h, k]
            c = self.comms[self.group_idx]  # [g, k, 3]
            units = ((0, score.IN), (1, score.OUT, 2, score.LOUT), (1, score.IN, 2, score.LIN))
            self.group_links = [
                sum(np.einsum("gk,ghkl->ghl", c[:, :, u[t]], u[t + 1][host_ranks]) for t in range(0, len(u), 2))
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
        self.host_used = np.bincount(self.ranks // sc.gpn, self.slow_b, minlength=sc.hosts)

    def fits(self) -> bool:
        return bool(
            (self.hbm_used <= self.hbm_cap * (1 + 1e-12)).all()
            and (self.host_used <= self.host_cap * (1 + 1e-12)).all()
        )

    def value(self) -> float:
        return float(self.score.total(self.F, self.C))

    def critical_ranks(self) -> list[int]:
        """GPUs on the critical path, most critical first: the slowest lookup and update (where a
        host's shared tier is the bound, its GPUs with most tier traffic) and the largest
        contributors to each all-to-all's bottleneck link; then the runners-up of each."""
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
        for depth in range(2):
            for order in firsts:
                r = int(order[depth]) if depth < len(order) else None
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
        ds = self.slow_b[gi].sum(-1) - np.where(swap, self.slow_b[ui].sum(-1), 0.0)
        cap, host_cap = self.hbm_cap * (1 + 1e-12), self.host_cap * (1 + 1e-12)
        fits = (hbm_h <= cap).all(-1) & (hbm_h2 <= cap).all(-1)
        fits &= (self.host_used[h] - ds <= host_cap) & (self.host_used[h2] + ds <= host_cap)
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
        ds = self.slow_b[i] - np.where(j >= 0, self.slow_b[jj], 0.0)
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
        cap, host_cap = self.hbm_cap * (1 + 1e-12), self.host_cap * (1 + 1e-12)
        fits = (self.hbm_used[a] - dh <= cap) & (self.hbm_used[b] + dh <= cap)
        fits &= (ha == hb) | ((self.host_used[ha] - ds <= host_cap) & (self.host_used[hb] + ds <= host_cap))
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


def improve(assignment: Assignment, rounds: int, batch: int = 2048) -> float:
    """Steepest descent on the estimate (ties: the earliest candidate, most critical ranks first);
    returns the final estimate (s)."""
    current = assignment.value()
    for _ in range(rounds):
        (a, b, i, j), groups = assignment.candidates(assignment.critical_ranks())
        best, best_val = None, current * (1 - 1e-9)
        for lo in range(0, len(a), batch):
            vals = assignment.evaluate_pairs(
                a[lo : lo + batch], b[lo : lo + batch], i[lo : lo + batch], j[lo : lo + batch]
            )
            k = int(np.argmin(vals))
            if vals[k] < best_val:
                m = lo + k
                best, best_val = (
                    [(int(i[m]), int(b[m]))] + ([(int(j[m]), int(a[m]))] if j[m] >= 0 else []),
                    float(vals[k]),
                )
        g, h, u = groups
        for lo in range(0, len(g), batch):
            vals = assignment.evaluate_groups(g[lo : lo + batch], h[lo : lo + batch], u[lo : lo + batch])
            k = int(np.argmin(vals))
            if vals[k] < best_val:
                best, best_val = assignment.group_moves(int(g[lo + k]), int(h[lo + k]), int(u[lo + k])), float(vals[k])
        if best is None:
            break
        assignment.apply(best)
        current = assignment.value()
    return current
