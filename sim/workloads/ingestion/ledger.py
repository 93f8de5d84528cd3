"""Exactly-once accounting of samples by id ranges, for the ingestion pipelines.

Samples are never simulated one by one: the dataset is the id range [0, samples), a split is a
contiguous range of one partition and a batch a contiguous range of one split. The ledger records
ranges, not assumptions:

- `issue(start, end)`: the master handed out a fresh range (the dataset cursor advanced);
- `deliver(start, end)`: a batch landed in a trainer's buffer;
- `requeue(n)`: n samples of a crashed worker's splits went back to the master's queue.

`reconcile(pending)` counts, with range arithmetic, how many issued samples were delivered once,
delivered more than once (duplicates), are still pending (in the master's queue or in workers'
outstanding splits when the run ends) and are lost (issued, but neither delivered nor pending).
A correct pipeline ends with duplicates = 0 and lost = 0 under any fault; the tests hold it to that.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by half-open ranges [starts[i], ends[i]) (overlaps counted once)."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=np.int64)[order]
    e = np.asarray(ends, dtype=np.int64)[order]
    covered_to = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]])
    return int(np.maximum(e - np.maximum(s, covered_to), 0).sum())


def subtract(start: int, end: int, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) minus the (sorted, disjoint) ranges `taken`, as sorted disjoint ranges."""
    out, cursor = [], start
    for a, b in sorted(taken):
        if a > cursor:
            out.append((cursor, min(a, end)))
        cursor = max(cursor, b)
        if cursor >= end:
            break
    if cursor < end:
        out.append((cursor, end))
    return [(a, b) for a, b in out if b > a]


@dataclass
class SampleLedger:
    issued: int = 0  # samples handed out fresh (the dataset cursor)
    requeued: int = 0  # samples sent back to the queue after crashes
    _starts: array = field(default_factory=lambda: array("q"))  # delivered ranges (16 bytes each)
    _ends: array = field(default_factory=lambda: array("q"))

    def issue(self, start: int, end: int) -> None:
        self.issued += end - start

    def deliver(self, start: int, end: int) -> None:
        self._starts.append(start)
        self._ends.append(end)

    def requeue(self, samples: int) -> None:
        self.requeued += samples

    @property
    def delivered_total(self) -> int:
        """Samples delivered, counting every delivery (duplicates included)."""
        return int(sum(self._ends) - sum(self._starts))

    def reconcile(self, pending: list[tuple[int, int]]) -> dict[str, int]:
        """Delivered once / duplicated / pending / lost, counted from the recorded ranges."""
        ds, de = np.frombuffer(self._starts, dtype=np.int64), np.frombuffer(self._ends, dtype=np.int64)
        ps = np.asarray([a for a, _ in pending], dtype=np.int64)
        pe = np.asarray([b for _, b in pending], dtype=np.int64)
        delivered_union = union_length(ds, de)
        pending_total = int((pe - ps).sum()) if len(ps) else 0
        everything = union_length(np.concatenate([ds, ps]), np.concatenate([de, pe]))
        duplicated = (self.delivered_total - delivered_union) + (delivered_union + pending_total - everything)
        return {
            "samples_issued": self.issued,
            "samples_delivered": delivered_union,
            "samples_duplicated": int(duplicated),
            "samples_pending": pending_total,
            "samples_requeued": self.requeued,
            "samples_lost": int(self.issued - everything),
        }
