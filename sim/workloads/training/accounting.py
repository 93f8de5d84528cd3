"""Where a training run's time went, per simulated driver GPU: a disjoint split into kernels, the
optimizer step, exposed communication and idle time (the bubble).

- kernels: the ops' kernel time (`kernel_s`), the optimizer step (`optimizer_s`);
- exposed TP/CP: blocking collectives inside ops (the part not hidden under a GEMM with
  `tp_comm_overlap`);
- exposed EP (mixture-of-experts models only, `exposed_ep_s`): the blocking dispatch and combine
  all-to-alls inside ops, split out of the TP/CP share;
- exposed DP/p2p: DP collectives and incoming pipeline transfers while the compute stream is idle,
  plus ops waiting for an FSDP unit's weights;
- bubble: the rest - pipeline fill and drain, waiting for slower stages.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class DriverStats:
    """What one simulated stage group did (its driver GPU's view)."""

    ops: list = field(default_factory=list)  # (start, end) of compute-stream work (ops, optimizer)
    comm: list = field(default_factory=list)  # (start, end) of DP collectives and incoming p2p
    kernel_s: float = 0.0
    optimizer_s: float = 0.0
    comm_in_ops_s: float = 0.0  # blocking TP/CP/EP collectives inside ops
    comm_in_ops_by_group: dict = field(default_factory=dict)  # the same by collective group (tp, cp, ep)
    waits_in_ops_s: float = 0.0  # ops waiting for a DP unit's weights
    flop: float = 0.0
    executed_flop: float = 0.0
    mirror_open: list | None = None  # [start, end] of the busy period not yet mirrored


def union_length(intervals: list[tuple[float, float]]) -> float:
    if not intervals:
        return 0.0
    total, cur_s, cur_e = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return total + cur_e - cur_s


def exposed_outside(comm: list, busy: list) -> float:
    """Length of the union of `comm` intervals not covered by the `busy` intervals."""
    return union_length(comm + busy) - union_length(busy)


def driver_breakdown(stats: DriverStats, total_s: float) -> dict[str, float]:
    """Disjoint split of the run on one driver GPU: the ops' kernels, the optimizer step, exposed
    communication, idle (bubble)."""
    exposed_dp_pp = exposed_outside(stats.comm, stats.ops) + stats.waits_in_ops_s
    busy = stats.kernel_s + stats.optimizer_s + stats.comm_in_ops_s + exposed_dp_pp
    out = {
        "compute_s": stats.kernel_s,
        "optimizer_s": stats.optimizer_s,
        "exposed_tp_cp_s": stats.comm_in_ops_s,
        "exposed_dp_pp_s": exposed_dp_pp,
        "bubble_s": max(total_s - busy, 0.0),
    }
    if "ep" in stats.comm_in_ops_by_group:
        out["exposed_ep_s"] = stats.comm_in_ops_by_group["ep"]
        out["exposed_tp_cp_s"] = max(stats.comm_in_ops_s - out["exposed_ep_s"], 0.0)
    return out


def weighted_mean(rows: list[tuple[float, dict]]) -> dict[str, float]:
    total = sum(w for w, _ in rows)
    out: dict[str, float] = defaultdict(float)
    for w, row in rows:
        for k, v in row.items():
            out[k] += w * v / total
    return dict(out)
