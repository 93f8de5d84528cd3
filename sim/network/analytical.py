"""The analytical network backend (scenario `network_model: analytical`): alpha-beta transfers
without contention between transfer calls, for very large scale.

A transfer takes path latency + bytes / bandwidth. Within one call (a collective step) the flows
that share a link are serialised on it: a flow takes latency + max over its links of (the call's
bytes on that link / capacity). Each call is costed once, when it starts (`_alpha_beta`, or
`_alpha_beta_few` - the same arithmetic in plain Python - for calls of a few link entries), and its
link bytes and busy time are added then (a call of one flow of a few entries: `_transfer_one`, no
arrays or group at all); traffic observers see each sub-flow's bytes over its
[start + latency, start + latency + bandwidth time].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.replay import StepKey
from sim.network.base import ROUTES_MAX_PAIRS, Network, Routed, TransferGroup

_FEW_ENTRIES = 16  # transfers of at most this many link entries: plain Python


class AnalyticalNetwork(Network):
    """Alpha-beta transfers without contention between transfers: latency + bytes / bandwidth.

    Within one transfer call (a collective step) the flows that share a link are serialised on it:
    a flow takes latency + max over its links of (the call's bytes on that link / capacity). For a
    ring step (one flow per link) that is bytes / bottleneck; for an all-to-all step it is the
    classic (n-1)/n * S / B of the sender's NIC."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # (src, dst) -> (links, latency, smallest capacity, first link's kind: the trace track) of a
        # pair routed over one path, or None
        self._one_path: dict[tuple[str, str], tuple[tuple[int, ...], float, float, str] | None] = {}

    def _start(self, group: TransferGroup, routed: Routed, key: StepKey | None) -> None:
        capacity = self.topology.capacity
        if len(routed.flat) <= _FEW_ENTRIES:  # a few entries: plain Python, same arithmetic
            t_bw, finish = _alpha_beta_few(routed, capacity, len(group.srcs))
            flat, position = routed.flat.tolist(), 0
            for n, nbytes, busy in zip(routed.lengths.tolist(), routed.nbytes.tolist(), t_bw.tolist()):
                for link in flat[position : position + n]:
                    self._link_bytes[link] += nbytes
                    self._link_busy_s[link] += busy
                position += n
        else:
            t_bw, finish = _alpha_beta(routed, capacity, len(group.srcs))
            entry_bytes = np.repeat(routed.nbytes, routed.lengths)
            for total, values in (
                (self._link_bytes, entry_bytes),
                (self._link_busy_s, np.repeat(t_bw, routed.lengths)),
            ):
                if 8 * len(routed.flat) < len(capacity):  # few entries: in place
                    np.add.at(total, routed.flat, values)
                else:  # many: one pass over the links
                    total += np.bincount(routed.flat, values, minlength=len(capacity))
        for observer in self.traffic_observers:
            t0 = group.start_s + routed.latency
            observer.on_subflows(t0, t0 + t_bw, routed.flat, routed.lengths, routed.nbytes)
        group.finish_s = group.start_s + finish
        if group.on_flow_done is not None:
            offsets, which = np.unique(finish, return_inverse=True)
            for k, offset in enumerate(offsets.tolist()):
                self._notify_at(offset, group.on_flow_done, np.flatnonzero(which.ravel() == k))
        done = self.sim.timeout(float(finish.max()))
        done.callbacks.append(lambda _e: self._complete(group))

    def _transfer_one(self, src: str, dst: str, nbytes: float, name: str, track: str | None):
        """One flow of a few link entries (a batch, a read): `_start` with `_alpha_beta_few` in
        plain Python, no arrays or `TransferGroup` (the same operations in the same order, so the
        same times, link totals, observer calls and spans to the last bit; tests/network). A flow
        over one path (`_one_path_of`) takes bytes / the path's smallest capacity: the largest of
        bytes / capacity over its links, to the bit (division rounds monotonically)."""
        pair = (src, dst)
        one = self._one_path[pair] if pair in self._one_path else self._one_path_of(pair)
        if one is not None:
            return self._transfer_on_path(src, dst, float(nbytes), name, track, *one)
        paths, latency = self._pair_paths(src, dst)
        if sum(len(p) for p in paths) > _FEW_ENTRIES:
            return None
        capacity = self.topology.capacity
        now, cause = self.sim.now, self.sim.cause
        b = float(nbytes)
        self.flows_started += 1
        self.bytes_sent += b
        share = b / len(paths)
        load: dict[int, float] = {}
        for p in paths:
            for link in p:
                load[link] = load.get(link, 0.0) + share
        t_bw, finish = [], 0.0
        for p, lat in zip(paths, latency):
            t = max(load[link] / float(capacity[link]) for link in p) if p else 0.0
            t_bw.append(t)
            finish = max(finish, lat + t)
        link_bytes, link_busy = self._link_bytes, self._link_busy_s
        for p, busy in zip(paths, t_bw):
            for link in p:
                link_bytes[link] += share
                link_busy[link] += busy
        if self.traffic_observers:  # fresh lists, one value per sub-flow (observers may keep them)
            t0 = [now + lat for lat in latency]
            t1 = [a + t for a, t in zip(t0, t_bw)]
            flat = [link for p in paths for link in p]
            lengths = [len(p) for p in paths]
            shares = [share] * len(paths)
            for observer in self.traffic_observers:
                observer.on_subflows(t0, t1, flat, lengths, shares)
        return self._delivered_after(finish, src, dst, b, name, track, now, cause)

    def _one_path_of(self, pair: tuple[str, str]) -> tuple[tuple[int, ...], float, float, str] | None:
        """(links, latency, smallest capacity, first link's kind) of a pair routed over one path of
        distinct links (None: several paths, or none), remembered."""
        paths, latency = self._pair_paths(*pair, keep=False)  # kept here (a pair of several paths: there)
        one = None
        if len(paths) == 1 and paths[0] and len(set(paths[0])) == len(paths[0]) <= _FEW_ENTRIES:
            capacity = self.topology.capacity
            kind = self.topology.link_kind[paths[0][0]]  # `first_link_kind`'s track
            one = (paths[0], latency[0], min(float(capacity[link]) for link in paths[0]), kind)
        if len(self._one_path) >= ROUTES_MAX_PAIRS:
            self._one_path.clear()  # bounded memory; a later flow looks again
        self._one_path[pair] = one
        if one is None:
            self._pair_paths(*pair)  # several paths (or none): `_transfer_one` routes it from the pair cache
        return one

    def _transfer_on_path(
        self,
        src: str,
        dst: str,
        b: float,
        name: str,
        track: str | None,
        path: tuple[int, ...],
        latency: float,
        smallest: float,
        kind: str,
    ) -> simpy.Event:
        """`_transfer_one` of a flow over one path: its bandwidth time is b / the smallest capacity;
        its span goes on `track`, else on the track of its first link's `kind`."""
        now, cause = self.sim.now, self.sim.cause
        self.flows_started += 1
        self.bytes_sent += b
        share = b / 1  # as `_transfer_one`'s b / len(paths)
        t = share / smallest
        finish = max(0.0, latency + t)
        link_bytes, link_busy = self._link_bytes, self._link_busy_s
        for link in path:
            link_bytes[link] += share
            link_busy[link] += t
        if self.traffic_observers:  # fresh lists, one value per sub-flow (observers may keep them)
            t0 = now + latency
            for observer in self.traffic_observers:
                one = getattr(observer, "on_subflow", None)  # optional: one sub-flow, no lists
                if one is not None:
                    one(t0, t0 + t, path, share)
                else:
                    observer.on_subflows([t0], [t0 + t], list(path), [len(path)], [share])
        return self._delivered_after(finish, src, dst, b, name, track or kind, now, cause)

    def _delivered_after(
        self, finish: float, src: str, dst: str, b: float, name: str, track: str | None, now: float, cause: int
    ) -> simpy.Event:
        """The event of a one-flow transfer started `now`: completed (`_complete_one`) `finish` later."""
        event = self.sim.env.event()
        done = self.sim.timeout(finish)
        done.callbacks.append(lambda _e: self._complete_one(event, src, dst, b, name, track, now, now + finish, cause))
        return event

    def _notify_at(self, delay: float, on_flow_done: Callable[[np.ndarray], None], indices: np.ndarray) -> None:
        self.sim.timeout(delay).callbacks.append(lambda _e: on_flow_done(indices))


def _alpha_beta(routed: Routed, capacity: np.ndarray, n_flows: int) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth time per sub-flow, finish offset per flow) of one analytical transfer: a sub-flow
    takes the slowest of its links at the call's bytes on that link (plus its path latency)."""
    starts = np.concatenate([[0], np.cumsum(routed.lengths)])
    entry_bytes = np.repeat(routed.nbytes, routed.lengths)
    slowest = np.zeros(len(routed.lengths))
    nonempty = routed.lengths > 0
    if nonempty.any():
        if 8 * len(routed.flat) < len(capacity):  # few entries: the links used only
            used, inverse = np.unique(routed.flat, return_inverse=True)
            load = np.bincount(inverse.ravel(), entry_bytes, minlength=len(used))[inverse.ravel()]
        else:
            load = np.bincount(routed.flat, entry_bytes, minlength=len(capacity))[routed.flat]
        per_entry = load / capacity[routed.flat]
        slowest[nonempty] = np.maximum.reduceat(per_entry, starts[:-1][nonempty])
    t_bw = np.where(nonempty, slowest, 0.0)
    finish = np.zeros(n_flows)
    np.maximum.at(finish, routed.flow, routed.latency + t_bw)
    return t_bw, finish


def _alpha_beta_few(routed: Routed, capacity: np.ndarray, n_flows: int) -> tuple[np.ndarray, np.ndarray]:
    """`_alpha_beta` of a transfer with a few link entries, in plain Python (numpy's cost per call
    would dominate): the same operations in the same order, so the same times to the last bit."""
    flat, lengths = routed.flat.tolist(), routed.lengths.tolist()
    load: dict[int, float] = {}
    position = 0
    for n, nbytes in zip(lengths, routed.nbytes.tolist()):
        for link in flat[position : position + n]:
            load[link] = load.get(link, 0.0) + nbytes
        position += n
    t_bw, finish, position = [], [0.0] * n_flows, 0
    for n, latency, flow in zip(lengths, routed.latency.tolist(), routed.flow.tolist()):
        links = flat[position : position + n]
        position += n
        t = max(load[link] / float(capacity[link]) for link in links) if links else 0.0
        t_bw.append(t)
        finish[flow] = max(finish[flow], latency + t)
    return np.array(t_bw, dtype=float), np.array(finish, dtype=float)
