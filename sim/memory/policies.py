"""Placement policies for a fast tier over a slow one: one interface, two faces.

A policy decides which pages (host memory on DRAM + CXL) or rows (embedding tables in HBM over DDR)
live on the fast tier. Every policy offers
- `rules(fast_pages)`: the `Rules` that drive the epoch engine (sim/memory/placement.py), used by
  `kind: tiered_memory` to replay an access stream as the simulation runs;
- `hit_rate(dist, capacity)`: the steady-state share of accesses served by the fast tier under an
  independent reference stream drawn from a `ZipfRows` law (and `promotion_rate`: rows moved to
  the fast tier per access), used where per-row state would be too large (embedding tables of
  10^8 rows: the planner's cost model and the embedding kernels' traffic, sim/workloads/embedding/cost.py).

The policies
- `static` (`initial="first_touch"`, default Linux without tiering): pages stay where first touch put
  them (fast while it has room). `initial="hottest"` pins the hottest rows (an oracle LFU, what a
  frequency-aware embedding planner does; the embedding's `static_hot_rows`).
- `lru`: the fast tier is a cache: every access to a slow page promotes it and the least recently
  used page is demoted synchronously (the embedding's software HBM cache).
- `numa_balancing` (Linux NUMA balancing with demotion in reclaim): hint faults on a sampled fraction
  of accesses on all pages; a fault on a slow page promotes it, rate-limited, if the fast tier keeps
  its `high` watermark free (promotion and reclaim share the watermarks: coupled); reclaim is
  reactive - kswapd wakes below `low` and demotes back to `high`; an allocation that finds the
  fast tier at `low` falls back to the slow tier without waking kswapd (the page allocator's fast
  path tries the next node of the zonelist; kswapd is woken only in its slow path, when every
  node is below `low`), so new pages land on the slow tier until promotions make room; in tiering mode (Linux 5.18+,
  the mode with the promotion rate limit; default) a failed promotion also wakes kswapd to make
  room for it, so the page is promoted at its next fault; classic NUMA balancing
  (`failed_promotion_wakes_kswapd: false`) drops it, and once the fast tier is full promotion stalls.
- `tpp` (Maruf et al., ASPLOS'23, arXiv 2206.02878): faults only on slow-tier pages; a fault on an
  inactive page activates it, a fault on an active page promotes it (hysteresis); promotion and
  allocation need only the `low` watermark free, while kswapd proactively demotes whenever fewer
  than `demote` are free (decoupled watermarks: headroom for allocations and promotions), and
  runs while allocations eat into that headroom; with `file_pages_on_slow_tier` (page-type-aware
  allocation) page-cache pages are allocated on the slow tier.

Steady state (Che's approximation, extended): a characteristic time T (in accesses) solves
sum_k h(p_k, T) = C and the hit rate is sum_k p_k h(p_k, T), with the probability h that a page of
access probability p is on the fast tier:
- `lru` and first-touch `static`: h = 1 - exp(-pT) (the first C distinct pages touched: same law);
- sampled promotion after k faults (a renewal argument: a page stays on the fast tier until it goes
  unaccessed for T, (e^{pT} - 1)/p on average, and on the slow tier for k faults, k/(qp)):
  h = (e^{pT} - 1) / (e^{pT} - 1 + k/q), which for k = 1 is q-LRU (Martina, Garetto, Leonardi,
  INFOCOM'14), i.e. q-LRU with admission q/k, q = hint_fault_fraction. `numa_balancing`: k = 2
  (the fault that finds the full tier fails and wakes kswapd, the next one promotes; classic mode
  never promotes once full: first-touch static); `tpp`: k = 2 (activate, then promote into the
  headroom), 3 without headroom;
- pinned `static`: the cdf of the C hottest rows.
Watermark headroom shrinks C; rate limits and allocation order are not in the steady state
(tests compare both faces on stationary Zipf streams).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from sim.memory.placement import Rules
from sim.memory.zipf import ZipfRows

HIT = Callable[[np.ndarray, float], np.ndarray]  # h(p, T)


def che_time(dist: ZipfRows, capacity: float, h: HIT) -> float:
    """The characteristic time T (accesses) with sum_k h(p_k, T) = capacity (Che's approximation)."""
    from scipy.optimize import brentq  # lazy: start-up

    def occupancy(log_t: float) -> float:
        t = math.exp(log_t)
        return dist.rank_sum(lambda k: h(dist.pmf(k), t)) - capacity

    lo = math.log(max(capacity, 1.0)) - 1e-9
    while occupancy(lo) > 0:
        lo -= 2.0
    hi = lo + 2.0
    while occupancy(hi) < 0:
        hi += 2.0
    return math.exp(brentq(occupancy, lo, hi, xtol=1e-10, rtol=1e-10))


def che_hit_rate(dist: ZipfRows, capacity: float, h: HIT) -> float:
    """sum_k p_k h(p_k, T) at the characteristic time of `capacity`."""
    if capacity <= 0:
        return 0.0
    if capacity >= dist.rows:
        return 1.0
    t = che_time(dist, capacity, h)
    return dist.rank_sum(lambda k: dist.pmf(k) * h(dist.pmf(k), t))


def che_promotion_rate(dist: ZipfRows, capacity: float, h: HIT, q: Callable[[np.ndarray, float], np.ndarray]) -> float:
    """Promotions per access in steady state: sum_k p_k (1 - h_k) q_k (misses that are admitted)."""
    if capacity <= 0 or capacity >= dist.rows:
        return 0.0
    t = che_time(dist, capacity, h)
    return dist.rank_sum(lambda k: dist.pmf(k) * (1.0 - h(dist.pmf(k), t)) * q(dist.pmf(k), t))


def _lru_h(p: np.ndarray, t: float) -> np.ndarray:
    return -np.expm1(-p * t)


def _q_lru_h(q: Callable[[np.ndarray, float], np.ndarray]) -> HIT:
    def h(p: np.ndarray, t: float) -> np.ndarray:
        seen, qq = -np.expm1(-p * t), q(p, t)
        return qq * seen / (np.exp(-p * t) + qq * seen)

    return h


@dataclass(frozen=True)
class Tuning:
    """Kernel knobs of the sampled policies (fractions of the fast tier's capacity for watermarks)."""

    hint_fault_fraction: float = 1e-4  # assumption: NUMA balancing scans ~256 MB/s of pages; ~1e-4 of accesses fault
    rate_limit_bytes_per_s: float = 65536 * 2**20  # Linux numa_balancing_promote_rate_limit_MBps default
    watermark_low: float = 0.001  # Linux watermark_scale_factor 10: 0.1% of the node between marks
    watermark_high: float = 0.002
    demote_watermark: float = 0.02  # assumption: TPP's demote_scale_factor 2% of the node
    reclaim_batch_pages: int = 32  # Linux SWAP_CLUSTER_MAX
    failed_promotion_wakes_kswapd: bool = True  # numa_balancing: tiering mode (Linux >= 5.18); False: classic
    file_pages_on_slow_tier: bool = False  # tpp: page-type-aware allocation (page cache on the slow tier)

    def pages(self, fraction: float, fast_pages: int) -> int:
        return math.floor(fraction * fast_pages)


class PlacementPolicy(Protocol):
    name: str

    def rules(self, fast_pages: int) -> Rules: ...

    def hit_rate(self, dist: ZipfRows, capacity: float) -> float: ...

    def promotion_rate(self, dist: ZipfRows, capacity: float) -> float: ...


@dataclass(frozen=True)
class StaticPlacement:
    """No migration: first touch (or, `hottest`, the hottest rows pinned) decides the tier."""

    initial: Literal["first_touch", "hottest"] = "first_touch"

    @property
    def name(self) -> str:
        return "static" if self.initial == "first_touch" else "static_hot_rows"

    def rules(self, fast_pages: int) -> Rules:
        if self.initial == "hottest":
            raise ValueError("static_hot_rows is an oracle placement: it has no online rules")
        return Rules()

    def hit_rate(self, dist: ZipfRows, capacity: float) -> float:
        if self.initial == "hottest":
            return float(dist.cdf(min(capacity, dist.rows)))
        return che_hit_rate(dist, capacity, _lru_h)

    def promotion_rate(self, dist: ZipfRows, capacity: float) -> float:
        return 0.0

    def share(self, dist: ZipfRows, lo: float, hi: float) -> float:
        """Share of accesses to ranks (lo, hi] (pinned hottest-first regions over several tiers)."""
        return float(dist.cdf(hi) - dist.cdf(lo))


@dataclass(frozen=True)
class LRUPlacement:
    """The fast tier as an LRU cache: promote on every slow access, demote the least recently used."""

    name: str = "lru"

    def rules(self, fast_pages: int) -> Rules:
        return Rules(promote="on_access", direct_reclaim=True)

    def hit_rate(self, dist: ZipfRows, capacity: float) -> float:
        return che_hit_rate(dist, capacity, _lru_h)

    def promotion_rate(self, dist: ZipfRows, capacity: float) -> float:
        return 1.0 - self.hit_rate(dist, capacity) if capacity < dist.rows else 0.0


@dataclass(frozen=True)
class NumaBalancing:
    """Sampled hint faults on all pages; promote on fault; coupled watermarks, reactive reclaim."""

    tuning: Tuning = Tuning()
    name: str = "numa_balancing"

    def rules(self, fast_pages: int) -> Rules:
        t = self.tuning
        low, high = t.pages(t.watermark_low, fast_pages), t.pages(t.watermark_high, fast_pages)
        return Rules(
            promote="on_fault",
            alloc_free_min=low,
            promote_free_min=high,
            hint_fault_fraction=t.hint_fault_fraction,
            sample_fast=True,
            rate_limit_bytes_per_s=t.rate_limit_bytes_per_s,
            reclaims=True,
            reclaim_below=low,
            reclaim_to=high,
            reclaim_batch=t.reclaim_batch_pages,
            failed_promotions_wake=t.failed_promotion_wakes_kswapd,
            alloc_fallback_wakes=False,  # the allocator's fast path falls back without waking kswapd
        )

    def _admit(self, p: np.ndarray, t: float) -> np.ndarray:
        # tiering mode: the fault that finds the tier full fails and wakes kswapd; the next one promotes
        return np.full_like(p, self.tuning.hint_fault_fraction / 2)

    def _usable(self, capacity: float) -> float:
        return capacity * (1.0 - self.tuning.watermark_high)

    def hit_rate(self, dist: ZipfRows, capacity: float) -> float:
        if not self.tuning.failed_promotion_wakes_kswapd:  # promotion stalls once the tier is full
            return che_hit_rate(dist, capacity, _lru_h)
        return che_hit_rate(dist, self._usable(capacity), _q_lru_h(self._admit))

    def promotion_rate(self, dist: ZipfRows, capacity: float) -> float:
        if not self.tuning.failed_promotion_wakes_kswapd:
            return 0.0
        return che_promotion_rate(dist, self._usable(capacity), _q_lru_h(self._admit), self._admit)


@dataclass(frozen=True)
class TPP:
    """Transparent Page Placement: faults on slow pages only, active-list hysteresis, proactive demotion."""

    tuning: Tuning = Tuning()
    name: str = "tpp"

    def rules(self, fast_pages: int) -> Rules:
        t = self.tuning
        low = t.pages(t.watermark_low, fast_pages)
        demote = max(t.pages(t.demote_watermark, fast_pages), t.pages(t.watermark_high, fast_pages))
        return Rules(
            promote="on_fault",
            alloc_free_min=low,
            promote_free_min=low,
            hint_fault_fraction=t.hint_fault_fraction,
            sample_fast=False,
            hysteresis=True,
            rate_limit_bytes_per_s=t.rate_limit_bytes_per_s,
            reclaims=True,
            reclaim_below=demote,
            reclaim_to=demote,
            reclaim_batch=t.reclaim_batch_pages,
            file_alloc_slow=t.file_pages_on_slow_tier,
        )

    def _faults(self, capacity: float) -> int:
        """Faults a slow page takes to be promoted: one to activate, one to promote (+1 without headroom)."""
        t = self.tuning
        return 2 if t.pages(max(t.demote_watermark, t.watermark_high), int(capacity)) > 0 else 3

    def _usable(self, capacity: float) -> float:
        return capacity * (1.0 - max(self.tuning.demote_watermark, self.tuning.watermark_high))

    def hit_rate(self, dist: ZipfRows, capacity: float) -> float:
        q = self.tuning.hint_fault_fraction / self._faults(capacity)
        return che_hit_rate(dist, self._usable(capacity), _q_lru_h(lambda p, t: np.full_like(p, q)))

    def promotion_rate(self, dist: ZipfRows, capacity: float) -> float:
        q = self.tuning.hint_fault_fraction / self._faults(capacity)

        def admit(p, t):
            return np.full_like(p, q)

        return che_promotion_rate(dist, self._usable(capacity), _q_lru_h(admit), admit)


def placement_policy(name: str, tuning: Tuning | None = None) -> PlacementPolicy:
    """The policy called `name` (static, lru, numa_balancing, tpp, static_hot_rows)."""
    tuning = tuning or Tuning()
    policies = {
        "static": StaticPlacement(),
        "static_hot_rows": StaticPlacement("hottest"),
        "lru": LRUPlacement(),
        "numa_balancing": NumaBalancing(tuning),
        "tpp": TPP(tuning),
    }
    if name not in policies:
        raise ValueError(f"unknown placement policy {name!r}; allowed: {', '.join(policies)}")
    return policies[name]


def sampled_hit_rate(
    policy: str, dist: ZipfRows, cache_rows: int, rng: np.random.Generator, accesses: int, warmup: int | None = None
) -> float:
    """Reference replay: `accesses` ranks drawn from `dist` through an exact per-access LRU or the
    pinned hottest rows (after `warmup` accesses); the oracle the engine and Che's form are held to."""
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
