"""Replay of repeated collective steps on the flow network, exact by construction.

A ring collective repeats one step (the same flows) 2(n-1) times; a 16K-GPU ring all-reduce would
recompute max-min rates for 16K flows 32K times. When a step runs on an otherwise idle network,
the flow network records its *trajectory*: at every rate change (breakpoint) the offset from the
step's start, each flow's remaining bytes and the cumulative bytes and busy time per link. Rates
are constant between breakpoints, so the state at any offset is a linear interpolation.

When the same step starts again on an idle network it is *replayed*: it finishes after the
recorded duration and adds the recorded link totals. If any other transfer starts during a replay,
the replay is *materialised* first: the step's flows are put back into the network with exactly
the bytes they would have left at that instant (flows still in their latency phase re-enter at
their arrival time), and the simulation continues as if the step had never been replayed. Hence
replay never changes a result; it only skips work (tested against the plain path).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Trajectory:
    key: object                      # the step object (kept alive so its id stays unique)
    gid: int                         # flow group being recorded
    start_s: float
    nbytes: np.ndarray               # bytes per flow (merged ECMP rows, in routed order)
    arrival_offset: np.ndarray       # path latency per flow: when it enters the network
    routed: object                   # the merged _Routed rows of the step
    base_link_bytes: np.ndarray
    base_busy_s: np.ndarray
    offsets: list = field(default_factory=list)
    remaining: list = field(default_factory=list)
    link_bytes: list = field(default_factory=list)
    busy_s: list = field(default_factory=list)
    finish_offsets: np.ndarray | None = None
    duration_s: float = 0.0
    valid: bool = True
    row_of_flow: np.ndarray = field(init=False)
    seen: np.ndarray = field(init=False)   # per flow: was active at some snapshot (so gone = finished)

    def __post_init__(self) -> None:
        self.row_of_flow = np.zeros(int(self.routed.flow.max()) + 1 if len(self.routed.flow) else 0, dtype=np.int64)
        self.row_of_flow[self.routed.flow] = np.arange(len(self.routed.flow))
        self.seen = np.zeros(len(self.nbytes), dtype=bool)

    def snapshot(self, now: float, rows_flow: np.ndarray, rows_remaining: np.ndarray,
                 link_bytes: np.ndarray, busy_s: np.ndarray) -> None:
        """Record the state at `now`; rows_* are this group's active rows (flow index, bytes left)."""
        offset = now - self.start_s
        rows = self.row_of_flow[rows_flow]
        self.seen[rows] = True
        # not active: finished if it was active before, else still to be admitted (arriving now or later)
        remaining = np.where(self.seen, 0.0, self.nbytes)
        remaining[rows] = rows_remaining
        self.offsets.append(offset)
        self.remaining.append(remaining)
        changed = np.flatnonzero((link_bytes != self.base_link_bytes) | (busy_s != self.base_busy_s))
        self.link_bytes.append((changed, link_bytes[changed] - self.base_link_bytes[changed]))
        self.busy_s.append((changed, busy_s[changed] - self.base_busy_s[changed]))

    def finish(self, now: float, finish_s: np.ndarray) -> None:
        self.duration_s = now - self.start_s
        self.finish_offsets = finish_s - self.start_s
        self.base_link_bytes = self.base_busy_s = None  # free the full-size copies

    def state_at(self, offset: float, num_links: int):
        """(remaining bytes per flow, link bytes delta, busy delta) at `offset` into the step."""
        offsets = self.offsets
        i = max(0, int(np.searchsorted(offsets, offset, side="right")) - 1)
        j = min(i + 1, len(offsets) - 1)
        span = offsets[j] - offsets[i]
        w = 0.0 if span <= 0 else min(max((offset - offsets[i]) / span, 0.0), 1.0)
        remaining = self.remaining[i] + w * (self.remaining[j] - self.remaining[i])
        remaining = np.where(self.arrival_offset > offset, self.nbytes, remaining)
        return remaining, _lerp(self.link_bytes[i], self.link_bytes[j], w, num_links), \
            _lerp(self.busy_s[i], self.busy_s[j], w, num_links)

    def totals(self, num_links: int):
        return _dense(self.link_bytes[-1], num_links), _dense(self.busy_s[-1], num_links)


def _dense(sparse_vec, n: int) -> np.ndarray:
    idx, val = sparse_vec
    out = np.zeros(n)
    out[idx] = val
    return out


def _lerp(a, b, w: float, n: int) -> np.ndarray:
    return _dense(a, n) * (1 - w) + _dense(b, n) * w
