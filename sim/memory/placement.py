"""The page-placement engine: pages (or embedding rows) moving between a fast and a slow tier.

One mechanism, parameterised by `Rules` (sim/memory/policies.py turns each policy into rules), is
advanced one epoch (a batch of accesses) at a time with numpy over per-page arrays:

- `PageState`: per page its tier (unallocated / fast / slow), its type (anonymous or file: page
  cache), its recency key (epoch of its last access + a fraction that grows with that epoch's
  access count: the LRU order, with frequency as a tie-break), for TPP whether it is on the active
  list, and the epoch it was last promoted in (ping-pong); the fast tier's capacity and the
  promotion rate-limit window.
- `advance(state, rules, counts, rng, now_s, allocate=, free=, kswapd_pages=)` replays one epoch
  given the accesses per page, the pages the program allocates (`allocate`, in allocation order)
  and frees (`free`) by the epoch's start, and the pages kswapd can demote in the epoch
  (`kswapd_pages`: its per-page migration cost bounds its rate; default unbounded):
  0. frees: freed pages leave their tier (room on the fast tier for the next allocations);
  1. allocation (the page allocator's watermarks, in pages of the fast tier): a new page - one
     of `allocate`, or a page touched for the first time - goes to the fast tier while it keeps
     `alloc_free_min` (the low watermark) pages free, else it falls back to the slow tier (the
     next node of the zonelist; the min watermark binds only when every node is below low, and
     the slow tier here always has room); file pages go to the slow tier from the start with
     `file_alloc_slow` (TPP's page-type-aware allocation). When the allocations take the fast
     tier below `reclaim_below` (TPP: its demotion watermark, above the allocation watermark)
     kswapd wakes while they go on and demotes older fast pages to make room for the rest, within
     `kswapd_pages`; an allocation that falls back wakes kswapd (for after the epoch's
     allocations) only with `alloc_fallback_wakes` (the kernel's fast path falls back to the
     next node without waking the local kswapd: numa_balancing does not set it). With
     `direct_reclaim` (an LRU cache) the fast tier makes room synchronously instead;
  2. accesses are served where their page is at the start of the epoch (local or remote);
  3. promotion: `on_access` (LRU: every access to a slow page promotes it - the access that missed
     is remote, the rest of the epoch's accesses to it are local) or `on_fault` (NUMA hint faults:
     each access faults with probability `hint_fault_fraction`, so a page with c accesses faults
     with 1-(1-f)^c, drawn from `rng`; with `sample_fast` the fast tier's pages are sampled too,
     which costs faults but promotes nothing; pages new in the epoch are not sampled
     yet (the scanner has not unmapped them); with `hysteresis` (TPP's active-list check) a
     fault on an inactive page only activates it and a fault on an active page promotes it; a
     page leaves the active list when it migrates - the slow tier is not under memory pressure,
     so nothing ages its LRU lists). Promotions go hottest first while the fast tier
     keeps `promote_free_min` pages free and within `rate_limit_bytes_per_s` (Linux's 1-second
     window); with `failed_promotions_wake`, promotions refused for lack of room wake kswapd
     and ask it for that room (kswapd keeps reclaiming while promotions fail, so the pages can
     be promoted at their next fault); without it (classic NUMA balancing) they are just dropped;
  4. reclaim (kswapd): woken when the fast tier has fewer than `reclaim_below` free pages, when
     allocations woke it (step 1), or by failed promotions, it demotes until `reclaim_to` pages
     (+ the room failed promotions asked for) are free, in batches of `reclaim_batch` pages,
     within what is left of `kswapd_pages`.
  Victims (kswapd and direct reclaim): file pages not accessed in this epoch first (the kernel's
  reclaim trims the inactive page cache before it scans anonymous pages), coldest first, then
  every other fast page by recency. A demoted page that was promoted and not accessed since the
  epoch of its promotion is a ping-pong (it paid both migrations for nothing); `EpochOutcome`
  counts them.
  With an epoch of one access this is exact per-access replay (tests hold LRU to an exact LRU).
  With longer epochs, recency has the resolution of one epoch and pages promoted by a fault count
  all of that epoch's accesses as remote.

Returns an `EpochOutcome`: local and remote accesses, pages promoted and demoted, hint faults,
pages allocated on each tier (by type), freed, and ping-pongs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

UNALLOCATED, FAST, SLOW = -1, 0, 1
ANON, FILE = 0, 1  # page types


@dataclass(frozen=True)
class Rules:
    """How a policy allocates, promotes and reclaims (free-page thresholds in pages of the fast tier)."""

    promote: Literal["none", "on_access", "on_fault"] = "none"
    alloc_free_min: int = 0  # allocation on fast keeps this many pages free (the low watermark)
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
    alloc_fallback_wakes: bool = True  # an allocation that falls back to the slow tier wakes kswapd
    file_alloc_slow: bool = False  # file (page cache) pages are allocated on the slow tier


@dataclass
class EpochOutcome:
    local: float = 0.0
    remote: float = 0.0
    promoted: int = 0
    demoted: int = 0
    hint_faults: int = 0
    allocated_fast: int = 0
    allocated_slow: int = 0
    allocated_file_fast: int = 0
    allocated_file_slow: int = 0
    freed: int = 0
    ping_pong: int = 0  # demoted pages not accessed since the epoch they were promoted in
    kswapd_demoted: int = 0  # of `demoted`: by kswapd (the rest: direct reclaim of an LRU cache)


@dataclass
class PageState:
    pages: int
    fast_pages: int
    page_bytes: float = 4096.0
    tier: np.ndarray = field(init=False)
    kind: np.ndarray = field(init=False)  # ANON or FILE
    key: np.ndarray = field(init=False)  # recency: last epoch + c/(c+1) of that epoch
    active: np.ndarray = field(init=False)
    promoted_epoch: np.ndarray = field(init=False)  # -1: not promoted since it was last placed
    epoch: int = 0
    fast_used: int = 0
    window_start_s: float = 0.0
    window_promoted_bytes: float = 0.0

    def __post_init__(self) -> None:
        self.tier = np.full(self.pages, UNALLOCATED, dtype=np.int8)
        self.kind = np.full(self.pages, ANON, dtype=np.int8)
        self.key = np.full(self.pages, -1.0)
        self.active = np.zeros(self.pages, dtype=bool)
        self.promoted_epoch = np.full(self.pages, -1, dtype=np.int64)

    @property
    def free(self) -> int:
        return self.fast_pages - self.fast_used

    def resident(self) -> tuple[int, int]:
        """(pages on the fast tier, pages on the slow tier), counted from the page table."""
        return int(np.count_nonzero(self.tier == FAST)), int(np.count_nonzero(self.tier == SLOW))

    def place(self, pages: np.ndarray, tier: int) -> None:
        """Put pages (currently not on the fast tier) on `tier`."""
        self.tier[pages] = tier
        if tier == FAST:
            self.fast_used += len(pages)

    def release(self, pages: np.ndarray) -> int:
        """Free allocated pages (they leave their tier); returns how many were allocated."""
        pages = pages[self.tier[pages] != UNALLOCATED]
        self.fast_used -= int(np.count_nonzero(self.tier[pages] == FAST))
        self.tier[pages] = UNALLOCATED
        self.key[pages] = -1.0
        self.active[pages] = False
        self.promoted_epoch[pages] = -1
        return len(pages)

    def victims(self, n: int) -> np.ndarray:
        """The `n` fast pages reclaim takes first: inactive file pages (not accessed this epoch),
        coldest first, then the others by recency."""
        fast = np.flatnonzero(self.tier == FAST)
        n = min(n, len(fast))
        if n <= 0:
            return fast[:0]
        # file pages not accessed this epoch sort before every page of this epoch or earlier
        inactive_file = (self.kind[fast] == FILE) & (self.key[fast] < self.epoch)
        order_key = np.where(inactive_file, self.key[fast] - (self.epoch + 2.0), self.key[fast])
        return fast[np.argpartition(order_key, n - 1)[:n]] if n < len(fast) else fast

    def demote(self, n: int) -> tuple[int, int]:
        """Move `n` fast pages (reclaim's order, `victims`) to the slow tier: (moved, ping-pongs)."""
        if n <= 0 or self.fast_used == 0:
            return 0, 0
        victims = self.victims(n)
        promoted = self.promoted_epoch[victims]
        ping_pong = int(np.count_nonzero((promoted >= 0) & (np.floor(self.key[victims]) <= promoted)))
        self.tier[victims] = SLOW
        self.active[victims] = False
        self.promoted_epoch[victims] = -1
        self.fast_used -= len(victims)
        return len(victims), ping_pong

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


_NONE = np.zeros(0, dtype=np.int64)


def advance(
    state: PageState,
    rules: Rules,
    counts: np.ndarray,
    rng: np.random.Generator,
    now_s: float = 0.0,
    allocate: np.ndarray = _NONE,
    free: np.ndarray = _NONE,
    kswapd_pages: float = math.inf,
) -> EpochOutcome:
    """Replay one epoch of accesses (`counts[page]`); see the module docstring."""
    st, out = state, EpochOutcome()
    st.epoch += 1
    kswapd_left = kswapd_pages

    def kswapd(n: int) -> None:
        nonlocal kswapd_left
        moved, pp = st.demote(int(min(n, kswapd_left)))
        kswapd_left -= moved
        out.demoted += moved
        out.kswapd_demoted += moved
        out.ping_pong += pp

    # 0. frees
    if len(free):
        out.freed = st.release(np.asarray(free, dtype=np.int64))

    touched = np.flatnonzero(counts != 0)
    c = counts[touched]

    # 1. allocation: the program's allocations, then first touches (address order)
    new = np.asarray(allocate, dtype=np.int64)
    new = new[st.tier[new] == UNALLOCATED]
    first_touch = touched[st.tier[touched] == UNALLOCATED]
    new = np.concatenate([new, first_touch[~np.isin(first_touch, new)]]) if len(new) else first_touch
    new_mask = np.isin(touched, new) if len(new) else np.zeros(len(touched), dtype=bool)
    st.key[new] = st.epoch  # allocated this epoch (before this epoch's accesses raise it)
    st.key[touched] = st.epoch + c / (c + 1.0)
    woken = False
    if len(new):
        is_file = st.kind[new] == FILE
        to_slow = is_file if rules.file_alloc_slow else np.zeros(len(new), dtype=bool)
        candidates = new[~to_slow]
        room = max(0, st.free - rules.alloc_free_min)
        if rules.direct_reclaim:
            room = min(len(candidates), st.fast_pages)
            moved, pp = st.demote(room - st.free)
            out.demoted, out.ping_pong = out.demoted + moved, out.ping_pong + pp
        elif rules.reclaims:
            take = min(len(candidates), room)
            falls_back = len(candidates) > room
            woken = st.free - take < rules.reclaim_below  # woken before the allocations hit low
            if woken and falls_back:  # kswapd demotes older pages while the allocations go on
                kswapd(min(len(candidates) - room, st.fast_used))
                room = max(0, st.free - rules.alloc_free_min)
        n_fast = min(len(candidates), room)
        st.place(candidates[:n_fast], FAST)
        st.place(candidates[n_fast:], SLOW)
        st.place(new[to_slow], SLOW)
        out.allocated_fast, out.allocated_slow = n_fast, len(new) - n_fast
        out.allocated_file_fast = int(np.count_nonzero(st.kind[candidates[:n_fast]] == FILE))
        out.allocated_file_slow = int(is_file.sum()) - out.allocated_file_fast
        if len(candidates) > n_fast and rules.alloc_fallback_wakes:
            woken = True

    # 2. service where the pages are
    tier = st.tier[touched]
    slow = tier == SLOW
    out.local = float(c[~slow].sum())
    out.remote = float(c[slow].sum())

    # 3. promotion
    promote_failed = 0
    candidates = _NONE
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
            moved, pp = st.demote(n - st.free)
            out.demoted, out.ping_pong = out.demoted + moved, out.ping_pong + pp
        else:
            n = min(budget, max(0, st.free - rules.promote_free_min))
            promote_failed = budget - n if rules.failed_promotions_wake else 0
        promoted = order[:n]
        st.place(promoted, FAST)
        st.active[promoted] = False
        st.promoted_epoch[promoted] = st.epoch
        st.window_promoted_bytes += n * st.page_bytes
        out.promoted = n
        if rules.promote == "on_access":  # the access that missed was remote, the rest local
            moved_accesses = float(counts[promoted].sum()) - n
            out.local += moved_accesses
            out.remote -= moved_accesses

    # 4. reclaim
    if rules.reclaims and (st.free < rules.reclaim_below or woken or promote_failed):
        need = max(0, rules.reclaim_to - st.free) + promote_failed
        need = math.ceil(need / rules.reclaim_batch) * rules.reclaim_batch
        kswapd(need)
    return out
