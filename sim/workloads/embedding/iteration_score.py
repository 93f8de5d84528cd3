"""The planner's estimate of an iteration (estimate.py) as a function of per-rank sums.

The iteration the estimate (and the simulation) composes is a sum of per-phase maxima:

    max(index a2a, bottom fwd) + max_r lookup_r + pooled a2a + top + max(grad a2a, bottom bwd)
    + max_r update_r + max(0, all-reduce - grad phase - max_r update_r)

with each embedding kernel = max(HBM roofline, host-link reads, host-link writes, its host's traffic
on each shared tier) and each all-to-all = its most loaded link (load / capacity) + path latency.

`IterationScore` evaluates that formula for shards with fixed hot-row splits on given ranks, from
per-rank sums:
- kernel bytes per rank and phase (`F`, shape [..., ranks, features]): HBM streamed bytes, HBM
  gathered bytes, and bytes read and written on each host tier (a host's share is their sum over
  its GPUs);
- all-to-all coefficients per rank (`C`, [..., ranks, 3]): a shard on rank o adds `index` bytes
  from every other rank to o, `pooled` bytes from o to every other rank (the gradients back: the
  transpose) and, table-row-wise, `local` bytes to o's host peers (cost.comm_matrices). With fixed
  routes a link's load is linear in the traffic matrix, so every link's load is C @ (unit loads
  of "everything into o", "out of o", "to/from o's host peers"), routed once on the real topology
  (PXN or direct flows, even ECMP split, as cost.a2a_estimate_s). The path latency is the longest
  of all pairs' (the estimate takes the longest of the pairs that exchange bytes: the same
  whenever every pair does).
Both add over shards, so a candidate move is scored without rebuilding the plan
(sim/workloads/embedding/search.py); tests/workloads/embedding/test_planner_quality.py checks the
result equals estimate.estimate's.
"""

from __future__ import annotations

import numpy as np

from hardware_models.topology import tier_read_capacity
from sim.workloads.embedding.cost import LENGTH_BYTES, CostModel, Shard, a2a_flows


class IterationScore:
    """The estimate of one iteration as a function of per-rank sums (see the module docstring)."""

    def __init__(self, model: CostModel, network, config, tables, dp_shards: list[Shard]) -> None:
        from sim.network.collectives import choose, estimate_s
        from sim.workloads.embedding.estimate import dense_times_s

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
        self.bottom_fwd, self.top, self.bottom_bwd = dense_times_s(gpu, config, tables)
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
        self._features: dict[tuple, np.ndarray] = {}  # per model.shard_key: table, shard shape and split
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
        key = self.model.shard_key(s)
        if key not in self._features:
            self._features[key] = self._compute_features(s)
        return self._features[key]

    def _compute_features(self, s: Shard) -> np.ndarray:
        model, k = self.model, len(self.tiers)
        tr = model.traffic(s)  # kept by the model per shard key
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
        b, d = cfg.batch_size_per_gpu, model.dedup(s.table)
        pe = model.pooled_bytes / model.pooled_dedup(s.table)
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
        active = loads.any(axis=0)  # links some all-to-all byte crosses (one GPU: none, one zero column)
        loads = loads[:, active] if active.any() else np.zeros((4 * w, 1))
        self.IN, self.OUT, self.LOUT, self.LIN = loads.reshape(4, w, -1)
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
