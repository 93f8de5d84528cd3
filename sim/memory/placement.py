"""The page-placement engine: pages (or embedding rows) moving between a fast and a slow tier.

One mechanism, parameterised by `Rules` (sim/memory/policies.py turns each policy into rules), is
advanced one epoch (a batch of accesses) at a time with numpy over per-page arrays:

- `PageState`: per page its tier (unallocated / fast / slow), its recency key (epoch of its last
  access + a fraction that grows with that epoch's access count: the LRU order, with frequency as a
  tie-break) and, for TPP, whether it is on the active list; the fast tier's capacity and the
  promotion rate-limit window.
- `advance(state, rules, counts, rng, now_s)` replays one epoch given the accesses per page:
  1. first touch allocates new pages on the fast tier while it keeps `alloc_free_min` pages free
     (the epoch's new pages in address order, as a program initialises its memory), else on the
     slow tier; with `direct_reclaim` (an LRU cache) the fast tier
     makes room synchronously by demoting its least recently used pages;
  2. accesses are served where their page is at the start of the epoch (local or remote);
  3. promotion: `on_access` (LRU: every access to a slow page promotes it - the access that missed
     is remote, the rest of the epoch's accesses to it are local) or `on_fault` (NUMA hint faults:
     each access faults with probability `hint_fault_fraction`, so a page with c accesses faults
     with 1-(1-f)^c, drawn from `rng`; with `sample_fast` the fast tier's pages are sampled too,
     which costs faults but promotes nothing; pages first touched in the epoch are not sampled
     yet (the scanner has not unmapped them); with `hysteresis` (TPP's active-list check) a
     fault on an inactive page only activates it and a fault on an active page promotes it; a
     page leaves the active list when it migrates - the slow tier is not under memory pressure,
     so nothing ages its LRU lists). Promotions go hottest first while the fast tier
     keeps `promote_free_min` pages free and within `rate_limit_bytes_per_s` (Linux's 1-second
     window); with `failed_promotions_wake`, promotions refused for lack of room wake kswapd
     and ask it for that room (kswapd keeps reclaiming while promotions fail, so the pages can
     be promoted at their next fault); without it (classic NUMA balancing) they are just dropped;
  4. reclaim (kswapd): woken when the fast tier has fewer than `reclaim_below` free pages, when
     first-touch allocations fell back to the slow tier, or by failed promotions, it demotes the
     least recently used fast pages until `reclaim_to` pages (+ the room failed promotions asked
     for) are free, in batches of `reclaim_batch` pages.
  With an epoch of one access this is exact per-access replay (tests hold LRU to an exact LRU).
  With longer epochs, recency has the resolution of one epoch and pages promoted by a fault count
  all of that epoch's accesses as remote.

Returns an `EpochOutcome`: local and remote accesses, pages promoted and demoted, hint faults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

UNALLOCATED, FAST, SLOW = -1, 0, 1


@dataclass(frozen=True)
class Rules:
    """How a policy allocates, promotes and reclaims (free-page thresholds in pages of the fast tier)."""

    promote: Literal["none", "on_access", "on_fault"] = "none"
    alloc_free_min: int = 0  # first-touch allocation on fast keeps this many pages free
    direct_reclaim: bool = False  # make room synchronously (a cache) instead of failing
    promote_free_min: int = 0  # promotions keep this many fast pages free
    hint_fault_fraction: float = 0.0  # per access
    sample_fast: bool = False  # hint faults on fast-tier pages too (overhead only)
    hysteresis: bool = False  # promote only pages on the active list (faulted before)
    rate_limit_bytes_per_s: float = math.inf
    reclaim_below: int = 0  # kswapd wakes when fewer pages are free (0: never)
    reclaim_to: int = 0  # ... and demotes until this many are free
    reclaim_batch: int = 1  # kswapd demotes in batches of this many pages
    reclaims: bool = False  # whether there is a reclaimer at all
    failed_promotions_wake: bool = True  # a promotion refused for room wakes kswapd to make that room


@dataclass
class EpochOutcome:
    local: float = 0.0
    remote: float = 0.0
    promoted: int = 0
    demoted: int = 0
    hint_faults: int = 0
    allocated_fast: int = 0
    allocated_slow: int = 0


@dataclass
class PageState:
    pages: int
    fast_pages: int
    page_bytes: float = 4096.0
    tier: np.ndarray = field(init=False)
    key: np.ndarray = field(init=False)  # recency: last epoch + c/(c+1) of that epoch
    active: np.ndarray = field(init=False)
    epoch: int = 0
    fast_used: int = 0
    window_start_s: float = 0.0
    window_promoted_bytes: float = 0.0

    def __post_init__(self) -> None:
        self.tier = np.full(self.pages, UNALLOCATED, dtype=np.int8)
        self.key = np.full(self.pages, -1.0)
        self.active = np.zeros(self.pages, dtype=bool)

    @property
    def free(self) -> int:
        return self.fast_pages - self.fast_used

    def place(self, pages: np.ndarray, tier: int) -> None:
        """Put pages (currently not on the fast tier) on `tier`."""
        self.tier[pages] = tier
        if tier == FAST:
            self.fast_used += len(pages)

    def demote(self, n: int) -> int:
        """Move the `n` least recently used fast pages to the slow tier; returns how many moved."""
        if n <= 0 or self.fast_used == 0:
            return 0
        fast = np.flatnonzero(self.tier == FAST)
        n = min(n, len(fast))
        victims = fast[np.argpartition(self.key[fast], n - 1)[:n]] if n < len(fast) else fast
        self.tier[victims] = SLOW
        self.active[victims] = False
        self.fast_used -= n
        return n

    def promote_budget(self, rules: Rules, now_s: float) -> int:
        """Pages the promotion rate limit still allows in the current 1-second window."""
        if math.isinf(rules.rate_limit_bytes_per_s):
            return self.pages
        if now_s - self.window_start_s >= 1.0:
            self.window_start_s += math.floor(now_s - self.window_start_s)
            self.window_promoted_bytes = 0.0
        left = rules.rate_limit_bytes_per_s * 1.0 - self.window_promoted_bytes
        return max(0, int(left // self.page_bytes))


def _hottest_first(pages: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pages ordered by accesses this epoch, descending (ties: lower page id first)."""
    return pages[np.lexsort((pages, -counts))] if len(pages) > 1 else pages


def advance(
    state: PageState, rules: Rules, counts: np.ndarray, rng: np.random.Generator, now_s: float = 0.0
) -> EpochOutcome:
    """Replay one epoch of accesses (`counts[page]`); see the module docstring."""
    st, out = state, EpochOutcome()
    st.epoch += 1
    touched = np.flatnonzero(counts)
    c = counts[touched]
    st.key[touched] = st.epoch + c / (c + 1.0)
    alloc_failed = promote_failed = 0

    # 1. first touch
    new_mask = st.tier[touched] == UNALLOCATED
    if new_mask.any():
        new = touched[new_mask]  # in address order
        room = max(0, st.free - rules.alloc_free_min)
        if rules.direct_reclaim:
            room = min(len(new), st.fast_pages)
            out.demoted += st.demote(room - st.free)
        n_fast = min(len(new), room)
        st.place(new[:n_fast], FAST)
        st.place(new[n_fast:], SLOW)
        out.allocated_fast, out.allocated_slow = n_fast, len(new) - n_fast
        alloc_failed = len(new) - n_fast

    # 2. service where the pages are
    tier = st.tier[touched]
    slow = tier == SLOW
    out.local = float(c[~slow].sum())
    out.remote = float(c[slow].sum())

    # 3. promotion
    candidates = np.zeros(0, dtype=np.int64)
    if rules.promote == "on_access":
        candidates = touched[slow]
    elif rules.promote == "on_fault" and rules.hint_fault_fraction > 0:
        sampled = (np.ones(len(touched), dtype=bool) if rules.sample_fast else slow) & ~new_mask
        p = -np.expm1(c[sampled] * math.log1p(-min(rules.hint_fault_fraction, 1.0 - 1e-16)))
        faulted = np.zeros(len(touched), dtype=bool)
        faulted[sampled] = rng.random(int(sampled.sum())) < p
        out.hint_faults = int(faulted.sum())
        hit = faulted & slow
        if rules.hysteresis:
            ready = hit & st.active[touched]
            st.active[touched[hit & ~ready]] = True
            hit = ready
        candidates = touched[hit]
    if len(candidates):
        order = _hottest_first(candidates, counts[candidates])
        budget = min(len(order), st.promote_budget(rules, now_s))
        if rules.direct_reclaim:
            n = min(budget, st.fast_pages)
            out.demoted += st.demote(n - st.free)
        else:
            n = min(budget, max(0, st.free - rules.promote_free_min))
            promote_failed = budget - n if rules.failed_promotions_wake else 0
        promoted = order[:n]
        st.place(promoted, FAST)
        st.active[promoted] = False
        st.window_promoted_bytes += n * st.page_bytes
        out.promoted = n
        if rules.promote == "on_access":  # the access that missed was remote, the rest local
            moved = float(counts[promoted].sum()) - n
            out.local += moved
            out.remote -= moved

    # 4. reclaim
    if rules.reclaims and (st.free < rules.reclaim_below or alloc_failed or promote_failed):
        need = max(0, rules.reclaim_to - st.free) + promote_failed
        need = math.ceil(need / rules.reclaim_batch) * rules.reclaim_batch
        out.demoted += st.demote(need)
    return out
