"""Page lifecycles: a program allocating and freeing memory over time (bursts, steady churn).

An `AllocationStream` is one kind of allocation of a program (a request arena, a batch's buffers,
a file read through the page cache): from `start_s` it allocates pages at `rate_pages_per_s`
(infinite: a burst, all at once) until it has allocated `total_pages` (None: until the run ends),
and frees every page `lifetime_s` after it allocated it (None: never). Page i (0, 1, ...) is
allocated at t_i = start_s + i / rate and freed at t_i + lifetime_s, so at time t the stream has
allocated n(t) = min(total, floor((t - start_s) rate) + 1) pages (t >= start_s) and freed
n(t - lifetime_s): steady churn keeps rate x lifetime pages live (+-1).

The stream's pages are `slots` consecutive page ids of the footprint's address space (after the
resident working set and the streams before it); page i uses slot i mod slots. With a lifetime,
slots = ceil(rate x lifetime) + 1 (a ring: page i + slots is allocated at or after page i was
freed), without one slots = total_pages. Freed slots are unallocated pages until reused, and a
reused slot is a new page: the allocator places it again.

While it has live pages the stream receives `access_share` of all accesses, spread over its live
pages by a Zipf law of their age (`zipf_alpha`; newest page first; 0: uniform): recently
allocated memory is the hot memory. `page_type` marks its pages anonymous or file (page cache).

`Lifecycle` holds the streams of a run: `step(now_s)` returns the pages to free and to allocate by
`now_s` (each in allocation order; a page both allocated and freed since the last step is
neither: steps further apart than a lifetime never hold two pages of one slot), `counts(accesses, rng)` the accesses of the live pages
(Poisson(accesses x share x pmf) per page, seeded from the run's rng) and the share they took.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AllocationStream:
    start_s: float
    rate_pages_per_s: float  # math.inf: a burst
    total_pages: int | None  # None: until the run ends (needs a lifetime)
    lifetime_s: float | None = None
    access_share: float = 0.0
    zipf_alpha: float = 0.0
    page_type: int = 0  # sim.memory.placement.ANON or FILE
    name: str = ""

    def __post_init__(self) -> None:
        if self.total_pages is None and (self.lifetime_s is None or math.isinf(self.rate_pages_per_s)):
            raise ValueError("an allocation stream without a total needs a finite rate and a lifetime")

    @property
    def slots(self) -> int:
        total = math.inf if self.total_pages is None else self.total_pages
        if self.lifetime_s is None or math.isinf(self.rate_pages_per_s):
            return int(total)
        return int(min(total, math.ceil(self.rate_pages_per_s * self.lifetime_s) + 1))

    def allocated_by(self, t_s: float) -> int:
        """n(t): pages allocated at or before `t_s`."""
        if t_s < self.start_s:
            return 0
        total = math.inf if self.total_pages is None else self.total_pages
        if math.isinf(self.rate_pages_per_s):
            return int(total)
        return int(min(total, math.floor((t_s - self.start_s) * self.rate_pages_per_s) + 1))

    def freed_by(self, t_s: float) -> int:
        return 0 if self.lifetime_s is None else self.allocated_by(t_s - self.lifetime_s)


class Lifecycle:
    """The allocation streams of a run laid out after `first_page` in the address space."""

    def __init__(self, streams: list[AllocationStream], first_page: int) -> None:
        self.streams = streams
        self.first: list[int] = []
        page = first_page
        for s in streams:
            self.first.append(page)
            page += s.slots
        self.end_page = page
        self.allocated = [0] * len(streams)
        self.freed = [0] * len(streams)

    def page_types(self) -> list[tuple[int, int, int]]:
        """(first page, slots, page type) per stream."""
        return [(f, s.slots, s.page_type) for f, s in zip(self.first, self.streams, strict=True)]

    def _slots(self, k: int, lo: int, hi: int) -> np.ndarray:
        return self.first[k] + np.arange(lo, hi, dtype=np.int64) % self.streams[k].slots

    def step(self, now_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(pages freed, pages allocated) since the last step, by `now_s`."""
        freed, allocated = [], []
        for k, s in enumerate(self.streams):
            f, a = s.freed_by(now_s), s.allocated_by(now_s)
            # pages allocated and freed again since the last step never reach the page table
            freed.append(self._slots(k, self.freed[k], min(f, self.allocated[k])))
            allocated.append(self._slots(k, max(self.allocated[k], f), a))
            self.freed[k], self.allocated[k] = f, a
        empty = np.zeros(0, dtype=np.int64)
        return (np.concatenate(freed) if freed else empty), (np.concatenate(allocated) if allocated else empty)

    def live(self, k: int) -> int:
        return self.allocated[k] - self.freed[k]

    def counts(self, accesses: float, rng: np.random.Generator, pages: int) -> tuple[np.ndarray, float]:
        """(accesses per page of the live pages, the share of `accesses` the streams took)."""
        out = np.zeros(pages, dtype=np.int64)
        share = 0.0
        for k, s in enumerate(self.streams):
            live = self.live(k)
            if live <= 0 or s.access_share <= 0:
                continue
            share += s.access_share
            newest_first = np.arange(self.allocated[k] - 1, self.freed[k] - 1, -1, dtype=np.int64)
            pmf = np.arange(1, live + 1, dtype=float) ** -s.zipf_alpha
            pmf /= pmf.sum()
            slots = self.first[k] + newest_first % s.slots
            out[slots] += rng.poisson(accesses * s.access_share * pmf)
        return out, share
