"""Which cluster device plays each rank of a parallel job: the rank grid shared by training and CP inference.

Rank order (Megatron's default, TP innermost): rank = t + tp x (c + cp x (s + pp x d)) for tensor-
parallel index t, context-parallel index c, pipeline stage s and data-parallel replica d; rank r is
the cluster's r-th device. A *stage group* (s, d) is the tp x cp consecutive ranks of one stage of
one replica, ordered (c, t); a *TP group* the tp consecutive ranks of one CP index. TP groups are
neighbours on the scale-up fabric (whole hosts when tp = gpus_per_node), CP groups the next ranks out,
pipeline stages next, replicas outermost. CP inference is the pp = dp = 1 case of the same grid; its
layout adds the representative mode (sim/workloads/cp_inference/layers.py).
"""

from __future__ import annotations


class ParallelLayout:
    """The tp x cp x pp x dp rank grid of a job on a cluster (see module docstring)."""

    def __init__(self, cluster, tp: int, cp: int, pp: int = 1, dp: int = 1) -> None:
        self.cluster, self.tp, self.cp, self.pp, self.dp = cluster, tp, cp, pp, dp

    @property
    def group_size(self) -> int:
        """Ranks in a stage group: tp x cp."""
        return self.tp * self.cp

    def rank(self, t: int, c: int, s: int = 0, d: int = 0) -> int:
        return t + self.tp * (c + self.cp * (s + self.pp * d))

    def device(self, t: int, c: int, s: int = 0, d: int = 0):
        """The device playing TP index t, CP index c of stage s of replica d."""
        return self.cluster.devices[self.rank(t, c, s, d)]

    def group(self, s: int = 0, d: int = 0) -> list:
        """The stage group's devices, ordered (c, t); devices[0] drives it."""
        base = self.rank(0, 0, s, d)
        return self.cluster.devices[base : base + self.group_size]

    def tp_group(self, c: int, s: int = 0, d: int = 0) -> list:
        """The TP group of CP index c (of stage s of replica d), ordered by TP index."""
        base = self.rank(0, c, s, d)
        return self.cluster.devices[base : base + self.tp]

    def dp_ring(self, s: int, t: int) -> list:
        """The ranks holding the same weights (one TP index of one stage): every CP rank of every replica."""
        devices, first, replica = self.cluster.devices, self.rank(t, 0, s, 0), self.rank(0, 0, 0, 1)
        return [devices[first + replica * d + self.tp * c] for d in range(self.dp) for c in range(self.cp)]

    def whole_hosts(self) -> bool:
        """Whether every stage group is made of whole hosts."""
        gpn = len(self.cluster.hosts[0]) if self.cluster.hosts else 1
        return self.group_size % gpn == 0
