"""Network backends: how bytes move between endpoints of a Topology.

Both backends offer the same interface (`transfer`, `transfer_many`, `link_table`):

- `FlowNetwork` (scenario `network_model: flow`, the default): every transfer is a flow routed over
  the topology's directed links. Flow rates are max-min fair over all active flows on all links
  (exact progressive filling, `max_min_rates`), recomputed whenever flows start or finish; flows
  that start or end at the same instant are handled in one recomputation. A flow first waits the
  latency of its path (sum of per-hop and NIC latencies), then sends. ECMP: `even` splits a flow
  into equal sub-flows over all equal-cost paths; `hash` picks one path per flow from a seeded
  random substream (what real switches do).
- `AnalyticalNetwork` (`network_model: analytical`): alpha-beta, no contention: a transfer takes
  path latency + bytes / bottleneck capacity. For very large scale.

Per-link accounting (bytes carried, busy time) is kept by both and returned by `link_table()`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from hardware_models.topology import Topology
from sim.engine import Simulation

_DONE_BYTES = 1e-3        # a sub-flow with fewer bytes left than this is complete
_REL_TOL = 1e-9


def incidence(paths: list[np.ndarray]) -> tuple[np.ndarray, sp.csr_matrix]:
    """The links the flows use (sorted ids) and the (used links x flows) 0/1 incidence matrix."""
    n = len(paths)
    lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=n)
    flat = np.concatenate(paths).astype(np.int64) if lengths.sum() else np.zeros(0, dtype=np.int64)
    used, rows = np.unique(flat, return_inverse=True)
    matrix = sp.csr_matrix((np.ones(len(flat)), (rows, np.repeat(np.arange(n), lengths))),
                           shape=(len(used), n))
    return used, matrix


def max_min_fair(matrix: sp.csr_matrix, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates by progressive filling (exact).

    `matrix` is the (links x flows) incidence, `capacity` the capacity of those links. Repeatedly,
    the link with the smallest fair share (remaining capacity / unfrozen flows on it) is a
    bottleneck: its unfrozen flows are frozen at that share and their rate leaves their links.
    Flows that cross no link are unconstrained (rate inf).
    """
    n_links, n = matrix.shape
    transpose = matrix.T.tocsr()
    remaining = capacity.astype(float).copy()
    rate = np.full(n, np.inf)
    frozen = np.asarray(transpose.sum(axis=1)).ravel() == 0
    while not frozen.all():
        counts = matrix @ (~frozen).astype(float)
        active = counts > 0.5
        share = np.full(n_links, np.inf)
        share[active] = np.maximum(remaining[active], 0.0) / counts[active]
        level = share.min()
        bottleneck = active & (share <= level * (1 + _REL_TOL) + 1e-12)
        newly = (transpose @ bottleneck.astype(float) > 0.5) & ~frozen
        rate[newly] = level
        frozen |= newly
        remaining -= matrix @ np.where(newly, level, 0.0)
    return rate


def max_min_rates(paths: list[np.ndarray], capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows given as link-id arrays over links of `capacity`."""
    if not paths:
        return np.zeros(0)
    used, matrix = incidence(paths)
    return max_min_fair(matrix, capacity[used])


class Network:
    """Shared parts of both backends: routing choice, link accounting, transfer helpers."""

    def __init__(self, sim: Simulation, topology: Topology, ecmp: str = "even") -> None:
        self.sim = sim
        self.topology = topology
        self.ecmp = ecmp
        self.link_bytes = np.zeros(topology.num_links)
        self.link_busy_s = np.zeros(topology.num_links)
        self.bytes_sent = 0.0
        self.bytes_delivered = 0.0
        self.flows_started = 0

    def paths_for(self, src: str, dst: str) -> list[tuple[int, ...]]:
        paths = self.topology.routes(src, dst)
        if self.ecmp == "hash" and len(paths) > 1:
            return [paths[int(self.sim.rng("ecmp").integers(len(paths)))]]
        return paths

    def estimate_time_s(self, src: str, dst: str, nbytes: float) -> float:
        """Uncontended time of one transfer (alpha-beta on the path), for planners and heuristics."""
        paths = self.topology.routes(src, dst)
        if not paths or paths == [()]:
            return 0.0
        share = nbytes / len(paths)
        return max(self.topology.path_latency_s(p) + share / self.topology.capacity[list(p)].min()
                   for p in paths)

    def transfer(self, src: str, dst: str, nbytes: float, name: str = "transfer", track: str | None = None):
        """Move `nbytes` from `src` to `dst`; returns a SimPy process that ends on delivery."""
        self.flows_started += 1
        self.bytes_sent += nbytes
        return self.sim.process(self._transfer(src, dst, float(nbytes), name, track))

    def transfer_many(self, flows, name: str = "transfer"):
        """Start all `(src, dst, nbytes)` flows now; returns an event that fires when all are done."""
        return self.sim.all_of([self.transfer(s, d, b, name) for s, d, b in flows])

    def _transfer(self, src, dst, nbytes, name, track):
        raise NotImplementedError

    def _record(self, src, dst, nbytes, name, track, start, paths):
        kind = self.topology.link_kind[paths[0][0]] if paths and paths[0] else "local"
        self.sim.span(src, track or kind, f"{name} ->{dst}", start, nbytes=nbytes, category="comm")

    def link_table(self, elapsed_s: float | None = None) -> pd.DataFrame:
        """Per-link bytes, busy time and utilisation (bytes / (capacity x elapsed))."""
        topo = self.topology
        elapsed = elapsed_s if elapsed_s is not None else self.sim.now
        df = pd.DataFrame({
            "link": [topo.link_name(i) for i in range(topo.num_links)],
            "kind": topo.link_kind,
            "capacity_bytes_per_s": topo.capacity,
            "bytes": self.link_bytes,
            "busy_s": self.link_busy_s,
        })
        df["utilisation"] = df["bytes"] / (df["capacity_bytes_per_s"] * elapsed) if elapsed > 0 else 0.0
        return df


class AnalyticalNetwork(Network):
    """Alpha-beta transfers without contention."""

    def _transfer(self, src, dst, nbytes, name, track):
        start = self.sim.now
        paths = self.paths_for(src, dst)
        share = nbytes / len(paths)
        duration = 0.0
        for p in paths:
            if not p:
                continue
            idx = list(p)
            t_bw = share / self.topology.capacity[idx].min()
            duration = max(duration, self.topology.path_latency_s(p) + t_bw)
            self.link_bytes[idx] += share
            self.link_busy_s[idx] += t_bw
        yield self.sim.timeout(duration)
        self.bytes_delivered += nbytes
        self._record(src, dst, nbytes, name, track, start, paths)


@dataclass
class _Flow:
    src: str
    dst: str
    nbytes: float
    name: str
    track: str | None
    start_s: float
    paths: list
    open_subflows: int
    done: object          # simpy Event


class FlowNetwork(Network):
    """Max-min fair flows, recomputed on every start/finish (batched per instant)."""

    def __init__(self, sim: Simulation, topology: Topology, ecmp: str = "even") -> None:
        super().__init__(sim, topology, ecmp)
        self._paths: list[np.ndarray] = []     # active sub-flows: link ids
        self._remaining = np.zeros(0)
        self._rate = np.zeros(0)
        self._owner: list[_Flow] = []
        self._pending: list[tuple[_Flow, np.ndarray, float]] = []
        self._matrix = None                    # links x sub-flows incidence of the active set
        self._last_s = 0.0
        self._generation = 0
        self._kick_scheduled = False
        self.recomputations = 0
        self.peak_active_subflows = 0

    # ---- public ---------------------------------------------------------------------------
    @property
    def active_flows(self) -> int:
        return len(self._paths)

    def _transfer(self, src, dst, nbytes, name, track):
        start = self.sim.now
        paths = self.paths_for(src, dst)
        latency = max((self.topology.path_latency_s(p) for p in paths), default=0.0)
        if latency > 0:
            yield self.sim.timeout(latency)
        real_paths = [p for p in paths if p]
        if nbytes > 0 and real_paths:
            flow = _Flow(src, dst, nbytes, name, track, start, paths, len(real_paths), self.sim.env.event())
            share = nbytes / len(real_paths)
            for p in real_paths:
                self._pending.append((flow, np.asarray(p, dtype=np.int64), share))
            self._kick()
            yield flow.done
        self.bytes_delivered += nbytes
        self._record(src, dst, nbytes, name, track, start, paths)

    # ---- event handling ---------------------------------------------------------------------
    def _kick(self) -> None:
        if not self._kick_scheduled:
            self._kick_scheduled = True
            self.sim.timeout(0).callbacks.append(self._on_kick)

    def _on_kick(self, _event) -> None:
        self._kick_scheduled = False
        self._update()

    def _on_timer(self, generation: int) -> None:
        if generation == self._generation:
            self._update()

    def _update(self) -> None:
        self._advance()
        finished = self._remaining <= _DONE_BYTES
        if finished.any():
            keep = ~finished
            for i in np.flatnonzero(finished):
                flow = self._owner[i]
                flow.open_subflows -= 1
                if flow.open_subflows == 0:
                    flow.done.succeed()
            self._paths = [p for p, k in zip(self._paths, keep) if k]
            self._owner = [o for o, k in zip(self._owner, keep) if k]
            self._remaining = self._remaining[keep]
        if self._pending:
            self._paths.extend(p for _, p, _ in self._pending)
            self._owner.extend(f for f, _, _ in self._pending)
            self._remaining = np.concatenate([self._remaining, [b for _, _, b in self._pending]])
            self._pending.clear()
        self._recompute()
        self._schedule()

    def _advance(self) -> None:
        now = self.sim.now
        dt = now - self._last_s
        self._last_s = now
        if dt <= 0 or not self._paths:
            return
        moved = self._rate * dt
        self._remaining = np.maximum(self._remaining - moved, 0.0)
        per_link = self._matrix @ moved
        used = self._used_links
        self.link_bytes[used] += per_link
        self.link_busy_s[used] += dt

    def _recompute(self) -> None:
        self.recomputations += 1
        n = len(self._paths)
        self.peak_active_subflows = max(self.peak_active_subflows, n)
        if n == 0:
            self._rate = np.zeros(0)
            self._matrix = None
            return
        self._used_links, self._matrix = incidence(self._paths)
        self._rate = max_min_fair(self._matrix, self.topology.capacity[self._used_links])

    def _schedule(self) -> None:
        self._generation += 1
        if not self._paths:
            return
        with np.errstate(divide="ignore"):
            times = self._remaining / self._rate
        dt = float(times.min())
        generation = self._generation
        self.sim.timeout(max(dt, 0.0)).callbacks.append(lambda _e: self._on_timer(generation))


def make_network(model: str, sim: Simulation, topology: Topology, ecmp: str = "even") -> Network:
    if model == "flow":
        return FlowNetwork(sim, topology, ecmp)
    if model == "analytical":
        return AnalyticalNetwork(sim, topology, ecmp)
    raise ValueError(f"unknown network_model {model!r}; allowed: flow, analytical")
