"""The memory layer: row-access distributions, caches over slower tiers, and tier traffic at run time.

Access distributions
- `ZipfRows(rows, alpha)`: the k-th hottest of `rows` rows is accessed with probability
  p_k = k^-alpha / H(rows, alpha) (H: generalised harmonic number). Hashing places hot rows at random
  ids, so a row-wise shard of a table sees the same law over its own rows. Sums over ranks
  (`rank_sum`) are exact over the first `HEAD` ranks and Euler–Maclaurin (integral + end
  corrections) beyond, so tables of billions of rows cost microseconds.
  `cdf(k)` is the share of accesses to the k hottest rows, `hot_rows(rate)` the rows whose share is at
  least `rate`, `expected_distinct(n, lo, hi)` the distinct rows among n accesses falling in ranks
  (lo, hi] (sum of 1 - exp(-n p_k)), `sample(rng, n)` draws ranks (exact inverse CDF).

Caches (policy objects; issue 9/14's placement policies plug in behind the same interface)
- `CachePolicy.hit_rate(dist, cache_rows)`: steady-state share of accesses served by an HBM cache of
  `cache_rows` rows over a slower tier. `StaticHotRows` pins the hottest rows (an oracle LFU, what a
  frequency-aware planner does); `LRUCache` uses Che's approximation (characteristic time T with
  sum_k (1 - exp(-p_k T)) = C, hit = sum_k p_k (1 - exp(-p_k T))). `sampled_hit_rate` replays a real
  access stream drawn from the distribution through the policy; tests hold the approximation to it.

Tier traffic at run time
- `hbm_tier(gpu)`: a device's HBM as a `MemoryTierSpec` (32 B sector granularity, assumption).
- `TieredMemory.kernel(device, name, accesses)`: one kernel that holds a device stream while it moves
  its `Access`es: HBM bytes through the device's roofline memory model (`DeviceSpec.memory_time_s`),
  host tiers (DDR reached as UVM, CXL, SCM, SSD) as network flows from/to the host's tier node
  `h{i}/{tier}` over the host link, so the GPUs of one host share the tier max-min fairly. It counts
  accesses and bytes per tier.
"""
from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
from scipy.optimize import brentq

from hardware_models.gpu import DeviceSpec
from hardware_models.memory import MemoryTierSpec

HEAD = 4096                 # ranks summed exactly; beyond: Euler–Maclaurin
_TAIL_POINTS = 257          # Simpson nodes in log-rank for tail integrals (odd)
HBM_SECTOR_BYTES = 32       # assumption: A100/H100 DRAM access sector (L2 sector size)


class ZipfRows:
    """Zipf row-access law over `rows` rows (rank 1 = hottest)."""

    def __init__(self, rows: float, alpha: float) -> None:
        self.rows = max(1, int(rows))
        self.alpha = float(alpha)
        head = min(self.rows, HEAD)
        self._head_pow = np.arange(1, head + 1, dtype=float) ** -self.alpha
        self._head_cum = np.concatenate([[0.0], np.cumsum(self._head_pow)])
        self.norm = float(self._harmonic(np.asarray(float(self.rows))))

    # ---- harmonic numbers and sums over ranks -------------------------------------------------
    def _power_integral(self, a, b):
        """Integral of x^-alpha from a to b (vectorised)."""
        s = 1.0 - self.alpha
        if abs(s) < 1e-12:
            return np.log(b) - np.log(a)
        return (np.power(b, s) - np.power(a, s)) / s

    def _harmonic(self, n: np.ndarray) -> np.ndarray:
        """H(n, alpha) = sum_{k=1}^{floor(n)} k^-alpha, vectorised over n >= 0."""
        shape = np.shape(n)
        n = np.floor(np.clip(np.atleast_1d(np.asarray(n, dtype=float)), 0, self.rows))
        head = len(self._head_pow)
        out = self._head_cum[np.minimum(n, head).astype(np.int64)].astype(float)
        tail = n > head
        if np.any(tail):
            m, x, a = float(head), n[tail], self.alpha
            out[tail] += (self._power_integral(m, x) + (x ** -a - m ** -a) / 2
                          + a * (m ** (-a - 1) - x ** (-a - 1)) / 12)
        return out.reshape(shape)

    def rank_sum(self, f: Callable[[np.ndarray], np.ndarray], lo: float = 0, hi: float | None = None) -> float:
        """sum_{k=lo+1}^{hi} f(k) for a smooth vectorised f of the rank."""
        lo = int(max(0, lo))
        hi = self.rows if hi is None else int(min(self.rows, hi))
        if hi <= lo:
            return 0.0
        total = 0.0
        head_end = min(hi, max(lo, HEAD))
        if head_end > lo:
            total += float(np.sum(f(np.arange(lo + 1, head_end + 1, dtype=float))))
        start = max(lo, HEAD)
        if hi > start:        # sum_{k=start+1}^{hi} f(k) ~ int_start^hi f + (f(hi) - f(start)) / 2
            t = np.linspace(math.log(start), math.log(hi), _TAIL_POINTS)
            x = np.exp(t)
            g = f(x) * x
            h = t[1] - t[0]
            integral = h / 3 * (g[0] + g[-1] + 4 * g[1:-1:2].sum() + 2 * g[2:-1:2].sum())
            ends = f(np.array([float(start), float(hi)]))
            total += float(integral + (ends[1] - ends[0]) / 2)
        return total

    # ---- the law -------------------------------------------------------------------------------
    def pmf(self, k) -> np.ndarray:
        return np.asarray(k, dtype=float) ** -self.alpha / self.norm

    def cdf(self, k) -> float | np.ndarray:
        """Share of accesses that go to the `k` hottest rows."""
        out = self._harmonic(np.asarray(k, dtype=float)) / self.norm
        return float(out) if np.ndim(out) == 0 else out

    def hot_rows(self, rate: float) -> int:
        """How many rows are accessed with probability >= `rate` per access."""
        if rate <= 0:
            return self.rows
        k = (rate * self.norm) ** (-1.0 / self.alpha) if self.alpha > 0 else (self.rows if rate * self.rows <= 1 else 0)
        return int(min(self.rows, math.floor(k + 1e-9)))

    def expected_distinct(self, accesses: float, lo: float = 0, hi: float | None = None) -> float:
        """Expected distinct rows with rank in (lo, hi] among `accesses` independent accesses."""
        if accesses <= 0:
            return 0.0
        return self.rank_sum(lambda k: -np.expm1(-accesses * self.pmf(k)), lo, hi)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` ranks (1-based) drawn from the law by inverting the CDF."""
        u = rng.random(n) * self.norm
        head = len(self._head_pow)
        out = np.searchsorted(self._head_cum, u, side="left").astype(float)
        tail = u > self._head_cum[-1]
        if np.any(tail):       # invert H on the tail by bisection on the rank (vectorised)
            lo = np.full(tail.sum(), float(head))
            hi = np.full(tail.sum(), float(self.rows))
            target = u[tail]
            for _ in range(64):
                mid = np.floor((lo + hi) / 2)
                below = self._harmonic(mid) < target
                lo = np.where(below, mid, lo)
                hi = np.where(below, hi, mid)
                if np.all(hi - lo <= 1):
                    break
            out[tail] = hi
        return np.clip(out, 1, self.rows).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# cache policies

class CachePolicy(Protocol):
    name: str

    def hit_rate(self, dist: ZipfRows, cache_rows: float) -> float:
        """Steady-state share of accesses served by a cache of `cache_rows` rows."""


@dataclass(frozen=True)
class StaticHotRows:
    """The hottest rows pinned in the cache (oracle LFU; frequency-aware placement)."""
    name: str = "static_hot_rows"

    def hit_rate(self, dist: ZipfRows, cache_rows: float) -> float:
        return float(dist.cdf(min(cache_rows, dist.rows)))


@dataclass(frozen=True)
class LRUCache:
    """Least-recently-used replacement; hit rate by Che's approximation (independent references)."""
    name: str = "lru"

    def characteristic_time(self, dist: ZipfRows, cache_rows: float) -> float:
        def occupancy(log_t: float) -> float:
            return dist.expected_distinct(math.exp(log_t)) - cache_rows
        hi = math.log(max(cache_rows, 1.0)) + 1.0
        while occupancy(hi) < 0:
            hi += 2.0
        return math.exp(brentq(occupancy, math.log(max(cache_rows, 1.0)) - 1e-9, hi, xtol=1e-10, rtol=1e-10))

    def hit_rate(self, dist: ZipfRows, cache_rows: float) -> float:
        if cache_rows <= 0:
            return 0.0
        if cache_rows >= dist.rows:
            return 1.0
        t = self.characteristic_time(dist, cache_rows)
        return dist.rank_sum(lambda k: dist.pmf(k) * -np.expm1(-t * dist.pmf(k)))


def cache_policy(name: str) -> CachePolicy:
    policies = {"lru": LRUCache(), "static_hot_rows": StaticHotRows()}
    if name not in policies:
        raise ValueError(f"unknown cache policy {name!r}; allowed: {', '.join(policies)}")
    return policies[name]


def sampled_hit_rate(policy: str, dist: ZipfRows, cache_rows: int, rng: np.random.Generator,
                     accesses: int, warmup: int | None = None) -> float:
    """Replay `accesses` ranks drawn from `dist` through a cache (after `warmup` accesses)."""
    warmup = accesses if warmup is None else warmup
    stream = dist.sample(rng, warmup + accesses)
    if policy == "static_hot_rows":
        return float(np.mean(stream[warmup:] <= cache_rows))
    if policy != "lru":
        raise ValueError(f"sampling implements lru and static_hot_rows, not {policy!r}")
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for i, row in enumerate(stream.tolist()):
        if row in cache:
            cache.move_to_end(row)
            hits += i >= warmup
        else:
            cache[row] = None
            if len(cache) > cache_rows:
                cache.popitem(last=False)
    return hits / accesses


# ------------------------------------------------------------------------------------------------
# tier traffic at run time

def hbm_tier(gpu: DeviceSpec) -> MemoryTierSpec:
    """A device's HBM as a tier (per device)."""
    return MemoryTierSpec(name="hbm", kind="hbm", capacity=gpu.memory, bandwidth=gpu.memory_bandwidth,
                          latency=0.0, granularity=HBM_SECTOR_BYTES, source=gpu.source)


@dataclass(frozen=True)
class Access:
    """`count` random accesses of `access_bytes` each to tier `tier` ('hbm' or a host tier name)."""
    tier: str
    count: float
    access_bytes: float
    write: bool = False


class TieredMemory:
    """Serves a cluster's tier traffic and counts it per tier."""

    def __init__(self, sim, cluster) -> None:
        self.sim = sim
        self.cluster = cluster
        self.tiers = {t.name: t for t in cluster.hardware.memory_tiers}
        self.hbm = hbm_tier(cluster.hardware.gpu)
        self.accesses: dict[str, float] = defaultdict(float)
        self.bytes: dict[str, float] = defaultdict(float)

    def spec(self, tier: str) -> MemoryTierSpec:
        return self.hbm if tier == "hbm" else self.tiers[tier]

    def kernel(self, device, name: str, accesses: list[Access], stream: str = "compute",
               category: str = "memory", extra_hbm_bytes: float = 0.0):
        """A SimPy process: hold `stream`, move all accesses concurrently, record a span.

        Its value is the kernel's duration (from getting the stream to the last byte)."""
        return self.sim.process(self._kernel(device, name, accesses, stream, category, extra_hbm_bytes))

    def _kernel(self, device, name, accesses, stream, category, extra_hbm_bytes):
        with device.stream(stream).request() as req:
            yield req
            start = self.sim.now
            hbm_bytes = extra_hbm_bytes
            host_bytes: dict[tuple[str, bool], float] = defaultdict(float)
            for a in accesses:
                if a.count <= 0:
                    continue
                moved = a.count * self.spec(a.tier).bytes_moved(a.access_bytes)
                self.accesses[a.tier] += a.count
                self.bytes[a.tier] += moved
                if a.tier == "hbm":
                    hbm_bytes += moved
                else:
                    host_bytes[(a.tier, a.write)] += moved
            events = [self.sim.timeout(device.spec.memory_time_s(hbm_bytes))]
            for (tier, write), moved in sorted(host_bytes.items()):
                node = self.cluster.tier_node(device.host, tier)
                src, dst = (device.node, node) if write else (node, device.node)
                events.append(self.cluster.network.transfer_many([(src, dst, moved)],
                                                                 name=f"{name}:{tier}{'.write' if write else ''}"))
            yield self.sim.all_of(events)
            duration = self.sim.now - start
            device.busy_s[stream] += duration
            self.sim.span(device.node, stream, name, start, nbytes=hbm_bytes, category=category)
        return duration
