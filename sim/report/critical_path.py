"""The critical path of a run, walked backwards through the recorded causes of its spans.

Every span carries its id and what released it (sim/engine/simulation.py, "Causes"): `until`, what
its end waited for, and `after`, what its start waited for. The walk starts at the span that ended
last (the latest recorded among equal ends) and steps back:
- a span whose `until` ended inside it (a stream holding a collective, a stall waiting for a batch,
  a step waiting for the last of its flows) ended because that span ended: the path goes into it,
  and the span itself is charged only what it ran after that (usually nothing);
- any other span ran for its own duration (a kernel, a flow at its max-min share, a replayed
  layer): it is charged its duration and the path goes on to `after`, what released its start.
  Time between that cause's end and the span's start, where nothing recorded ran (message latency,
  a launch, a timeout), is charged to `latency`;
- a span released by nothing recorded (the start of the run, an arrival) ends the walk; the time
  before it is `idle`.
So the path's charges add up to the end of the run exactly. Where a cause was not kept (the
recorder's `trace_limit` dropped it) the walk stops there: the path is partial, the time before it
is charged to `unrecorded`, and `exact` is False with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.engine.codes import factorize_rows
from sim.report.columns import Columns, columns_of
from sim.report.resources import with_resources

GAP = "latency"  # time between a cause's end and the span it released, with nothing recorded in between
START = "idle"  # time before the first span of the path (nothing recorded released it)
UNRECORDED = "unrecorded"  # time before a cause the recorder dropped (trace_limit)


@dataclass
class CriticalPath:
    """The spans of the critical path in time order (rows of the span table) with `charged_s` (the
    seconds of the path charged to the span, the interval [charged_until_s - charged_s,
    charged_until_s]) and `gap_before_s` (latency just before that interval), the time
    before the path (`idle_s`, or `unrecorded_s` when it stopped at a dropped cause) and whether it
    was walked to its start (`exact`, else `reason`)."""

    spans: Columns
    idle_s: float
    unrecorded_s: float
    exact: bool
    reason: str = ""

    @property
    def total_s(self) -> float:
        return float(self.spans["charged_s"].sum() + self.spans["gap_before_s"].sum()) + self.idle_s + self.unrecorded_s


def walk(spans, component: str | None = None) -> CriticalPath:
    """The critical path through `spans` (the recorder's columns or a DataFrame: id, after, until,
    start_s, end_s ...) to the span that ended last (of `component`, if given); see the module
    docstring."""
    spans = columns_of(spans)
    if spans.empty:
        return CriticalPath(
            spans.assign(charged_s=np.zeros(0), gap_before_s=np.zeros(0), charged_until_s=np.zeros(0)), 0.0, 0.0, True
        )
    ids = spans["id"].astype(np.int64)
    after = _positions(ids, spans["after"].astype(np.int64))
    until = _positions(ids, spans["until"].astype(np.int64))
    missing_after = (after < 0) & (spans["after"] >= 0)
    missing_until = (until < 0) & (spans["until"] >= 0)
    starts = spans["start_s"].astype(float)
    ends = spans["end_s"].astype(float)
    mask = np.asarray(spans["component"] == component, dtype=bool) if component is not None else None
    if mask is not None and mask.any():
        cur = int(np.flatnonzero(mask)[np.lexsort((ids[mask], ends[mask]))[-1]])
    else:
        cur = int(np.lexsort((ids, ends))[-1])  # ended last; among equal ends, recorded last
    rows: list[int] = []
    marks: list[float] = []  # t when the row was charged: its charge is [t - charged, t]
    charged: list[float] = []
    gaps: list[float] = []
    t = float(ends[cur])  # the path is accounted for from t to the end
    idle = unrecorded = 0.0
    exact, reason = True, ""
    for _ in range(len(ids) + 1):
        s = float(starts[cur])
        inner = int(until[cur])
        marks.append(t)
        if inner >= 0 and inner != cur and s < ends[inner] <= ends[cur]:  # it ended when `inner` did
            rows.append(cur)
            charged.append(max(t - float(ends[inner]), 0.0))
            gaps.append(0.0)
            t = min(t, float(ends[inner]))
            cur = inner
            continue
        rows.append(cur)
        charged.append(max(t - s, 0.0))
        t = min(t, s)
        prev = int(after[cur]) if after[cur] >= 0 or missing_after[cur] else int(until[cur])
        if missing_after[cur] or (after[cur] < 0 and missing_until[cur]):
            gaps.append(0.0)
            unrecorded, exact = t, False
            reason = "a cause on the path was dropped by the recorder (trace_limit): the path before it is unknown"
            break
        if prev < 0 or prev == cur:
            gaps.append(0.0)
            idle = t
            break
        gap = max(t - float(ends[prev]), 0.0)
        gaps.append(gap)
        t -= gap
        cur = prev
    else:  # a cycle of causes cannot happen (a cause is recorded before what it releases)
        raise RuntimeError("the causes of the recorded spans form a cycle")
    order = np.array(rows[::-1], dtype=np.int64)
    path = spans.take(order).assign(
        charged_s=np.array(charged[::-1]), gap_before_s=np.array(gaps[::-1]), charged_until_s=np.array(marks[::-1])
    )
    return CriticalPath(path, idle, unrecorded, exact, reason)


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The row of each id in `wanted` among the distinct `ids` (-1 where none has it)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    at = np.minimum(np.searchsorted(sorted_ids, wanted), len(ids) - 1)
    return np.where(sorted_ids[at] == wanted, order[at], -1)


def as_seen_by(
    path: Columns,
    spans: Columns,
    component: str,
    waiting_for,
    since_s: float = 0.0,
    track: str | None = None,
) -> Columns:
    """The run as one component lived it: each instant it was busy is charged to the resource of what
    it ran (a kernel before the communication it overlaps: `_busy_pieces`), each instant it was idle to what the critical path did
    then, renamed by `waiting_for(path_row_resource, path_row_component)` (a GPU of another pipeline
    stage: the bubble). Returns pieces with the path's columns (component, resource, charged_s,
    gap_before_s, link), ready for the report's sums; the time before the path, and before `since_s`
    (a warm-up the kind's metrics leave out), is not included. `track`: only the component's spans on
    that track are its own (a trainer host whose cores also preprocess)."""
    mine = np.asarray(spans["component"] == component, dtype=bool) & (spans["end_s"] > spans["start_s"])
    if track is not None:
        mine &= np.asarray(spans["track"] == track, dtype=bool)
    own = with_resources(spans.take(mine))
    pieces_own = _busy_pieces(own)
    busy = _Coverage([a for a, _, _ in pieces_own], [b for _, b, _ in pieces_own])
    busy_res = [r for _, _, r in pieces_own]
    own_resources = sorted(set(busy_res))
    per_resource = [
        _Coverage(*zip(*[(a, b) for a, b, r in pieces_own if r == res], strict=True)) for res in own_resources
    ]
    # each path row charges [until - charged, until] to what it waited for and the gap before it to
    # latency; the component's own busy parts of both go to what it ran
    until = path["charged_until_s"].astype(float)
    charged = path["charged_s"].astype(float)
    gap = path["gap_before_s"].astype(float)
    n = path.rows
    a = np.empty(2 * n)
    b = np.empty(2 * n)
    a[0::2], b[0::2] = until - charged, until
    a[1::2], b[1::2] = until - charged - gap, until - charged
    a = np.maximum(a, since_s)
    length = np.where(b > a, b - a, 0.0)
    b = np.maximum(a, b)
    comps = path["component"].astype(object)
    links = path["link"].astype(object) if "link" in path else np.full(n, None, dtype=object)
    seen: dict[tuple, str] = {}
    waited = [
        seen[key] if key in seen else seen.setdefault(key, waiting_for(*key))
        for key in zip(path["resource"].astype(object).tolist(), comps.tolist())
    ]
    key_comp = np.repeat(comps, 2)
    key_res = np.empty(2 * n, dtype=object)
    key_res[0::2], key_res[1::2] = waited, GAP
    key_link = np.empty(2 * n, dtype=object)
    key_link[0::2] = links
    columns: list[tuple] = [(key_comp, key_res, key_link, length - (busy.upto(b) - busy.upto(a)))]
    for res, cover in zip(own_resources, per_resource):
        columns.append(
            (
                np.full(2 * n, component, dtype=object),
                np.full(2 * n, res, dtype=object),
                np.full(2 * n, None, dtype=object),
                cover.upto(b) - cover.upto(a),
            )
        )
    piece_component = np.concatenate([c[0] for c in columns])
    piece_resource = np.concatenate([c[1] for c in columns])
    piece_link = np.concatenate([c[2] for c in columns])
    seconds = np.concatenate([c[3] for c in columns])
    keep = seconds > _NOISE_S * np.maximum(1.0, np.tile(length, len(columns)))
    codes, keys = factorize_rows([piece_component[keep], piece_resource[keep], piece_link[keep]])
    summed = np.bincount(codes, seconds[keep], minlength=len(keys))
    out = Columns(
        {
            "component": np.array([k[0] for k in keys], dtype=object),
            "resource": np.array([k[1] for k in keys], dtype=object),
            "link": np.array([k[2] for k in keys], dtype=object),
            "charged_s": summed,
        }
    )
    return out.assign(gap_before_s=0.0, name="", category="", end_s=float(path["end_s"].max()) if n else 0.0)


_NOISE_S = 1e-12  # pieces shorter than this (relative to their interval) are rounding, not time


class _Coverage:
    """Disjoint sorted intervals and `upto(t)`: their total length before each t (vectorised)."""

    def __init__(self, starts, ends) -> None:
        self.starts, self.ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
        self.cum = np.r_[0.0, np.cumsum(self.ends - self.starts)]

    def upto(self, t: np.ndarray) -> np.ndarray:
        if not len(self.starts):
            return np.zeros(len(t))
        k = np.searchsorted(self.ends, t, side="right")  # intervals wholly before t
        inside = k < len(self.starts)
        partial = np.zeros(len(t))
        kk = k[inside]
        partial[inside] = np.clip(t[inside] - self.starts[kk], 0.0, self.ends[kk] - self.starts[kk])
        return self.cum[k] + partial


COMMUNICATION = ("scale_up", "nic", "fabric", "host", "gpu:")


def _busy_pieces(own: Columns) -> list[tuple[float, float, str]]:
    """Disjoint (start, end, resource) pieces of a component's spans, in time order: its kernels and
    other work first, communication only where none of them ran (exposed communication, as the kinds'
    breakdowns count it); among spans of one rank, the first to start."""
    pieces: list[tuple[float, float, str]] = []
    for rank in (False, True):
        communication = np.array([str(r).startswith(COMMUNICATION) for r in own["resource"].tolist()], dtype=bool)
        part = own.take(np.flatnonzero(communication == rank))
        part = part.take(np.argsort(part["start_s"], kind="quicksort"))  # as pandas' sort_values
        taken = sorted(pieces)
        k, reach = 0, -np.inf
        for s, e, r in zip(part["start_s"].tolist(), part["end_s"].tolist(), part["resource"].tolist()):
            s = max(s, reach)
            while s < e:  # the parts of [s, e) not taken by a piece of the rank before
                while k < len(taken) and taken[k][1] <= s:
                    k += 1
                if k < len(taken) and taken[k][0] <= s:
                    s = taken[k][1]
                    continue
                stop = min(e, taken[k][0]) if k < len(taken) else e
                pieces.append((s, stop, r))
                s = stop
            reach = max(reach, e)
    return sorted(pieces)
