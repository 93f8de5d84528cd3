"""Page-access streams, delivered in epochs: accesses per page for the next batch of accesses.

- `PhasedPopularity`: an independent-reference stream whose popularity law is Zipf (`zipf_alpha`) or
  a hot set (`hot_fraction` of the pages get `hot_access_fraction` of the accesses, uniformly) over
  the ranks; which page holds which rank is a seeded random permutation, redrawn at every phase
  change (`phase_s` of simulated time; none: one phase). An epoch of n accesses gives each page
  Poisson(n p_page) accesses (independent references; the total is Poisson(n)).
- `TraceReplay`: a recorded stream, replayed in order in epochs of n accesses (a row with a count
  spanning an epoch boundary is split). Trace format (CSV, header row, `#` comments allowed):

      page,count
      0,3          # page id (integer, 0 <= page < pages), then accesses in a row (>= 1, default 1)
      2            # `count` may be left out (column absent or empty): 1

  `load_trace(path, pages)` raises a one-line ScenarioError naming the file, the line and the bad
  value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import ScenarioError
from sim.memory.zipf import ZipfRows


class PhasedPopularity:
    def __init__(
        self,
        pages: int,
        rank_pmf: np.ndarray,
        phase_s: float | None,
        access_rng: np.random.Generator,
        phase_rng: np.random.Generator,
    ) -> None:
        self.pages = pages
        self.rank_pmf = rank_pmf / rank_pmf.sum()
        self.phase_s = phase_s
        self._access_rng, self._phase_rng = access_rng, phase_rng
        self._phase = -1
        self._p = np.zeros(pages)

    @classmethod
    def zipf(cls, pages: int, alpha: float, **kw) -> PhasedPopularity:
        return cls(pages, ZipfRows(pages, alpha).pmf(np.arange(1, pages + 1)), **kw)

    @classmethod
    def hot_set(cls, pages: int, hot_fraction: float, hot_access_fraction: float, **kw) -> PhasedPopularity:
        hot = max(1, min(pages, round(hot_fraction * pages)))
        pmf = np.full(pages, (1.0 - hot_access_fraction) / max(pages - hot, 1))
        pmf[:hot] = hot_access_fraction / hot if hot < pages else 1.0 / pages
        return cls(pages, pmf, **kw)

    def phase(self, now_s: float) -> int:
        return 0 if not self.phase_s else int(now_s // self.phase_s)

    def counts(self, now_s: float, accesses: int) -> np.ndarray:
        phase = self.phase(now_s)
        while self._phase < phase:  # one permutation per phase, drawn in order (seeded)
            self._phase += 1
            self._p = np.empty(self.pages)
            self._p[self._phase_rng.permutation(self.pages)] = self.rank_pmf
        return self._access_rng.poisson(accesses * self._p)


class TraceReplay:
    def __init__(self, page: np.ndarray, count: np.ndarray, pages: int) -> None:
        self.page, self.pages = page, pages
        self.end = np.cumsum(count)  # accesses up to and including each row
        self.start = self.end - count
        self.total = int(self.end[-1]) if len(self.end) else 0
        self.position = 0

    @staticmethod
    def phase(now_s: float) -> int:
        return 0

    def counts(self, now_s: float, accesses: int) -> np.ndarray | None:
        """Accesses per page of the next `accesses` of the trace (None when it is exhausted)."""
        if self.position >= self.total:
            return None
        lo, hi = self.position, min(self.position + accesses, self.total)
        first = int(np.searchsorted(self.end, lo, side="right"))
        last = int(np.searchsorted(self.end, hi, side="left"))
        rows = slice(first, last + 1)
        taken = np.minimum(self.end[rows], hi) - np.maximum(self.start[rows], lo)
        self.position = hi
        return np.bincount(self.page[rows], weights=taken, minlength=self.pages).astype(np.int64)


def load_trace(
    path: str | Path, pages: int | None = None, key: str = "workload.access.trace"
) -> tuple[np.ndarray, np.ndarray]:
    """(page ids, counts) of a trace CSV; every bad row is a one-line ScenarioError."""
    try:
        frame = pd.read_csv(path, dtype=str, comment="#", skipinitialspace=True, skip_blank_lines=True)
    except FileNotFoundError:
        raise ScenarioError("trace file not found", path=key, value=str(path)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"not a CSV trace ({str(exc).splitlines()[0]})", path=key, value=str(path)) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    unknown = [c for c in frame.columns if c not in ("page", "count")]
    if "page" not in frame.columns or unknown:
        raise ScenarioError(
            f"needs a header row with columns page[,count]; got {list(frame.columns)}", path=key, value=str(path)
        )
    if frame.empty:
        raise ScenarioError("trace has no accesses", path=key, value=str(path))
    lines = _line_numbers(path)
    page = _integers(frame["page"], lines, path, key, "page", minimum=0, default=None)
    count = (
        _integers(frame["count"], lines, path, key, "count", minimum=1, default=1)
        if "count" in frame.columns
        else np.ones(len(frame), dtype=np.int64)
    )
    if pages is not None and page.max() >= pages:
        i = int(np.argmax(page >= pages))
        raise ScenarioError(
            f"line {lines[i]}: page {page[i]} is outside the footprint's {pages} pages (0..{pages - 1})",
            path=key,
            value=str(path),
        )
    return page, count


def _integers(
    column: pd.Series, lines: list[int], path, key: str, name: str, minimum: int, default: int | None
) -> np.ndarray:
    text = column.fillna("").str.strip()
    if default is not None:
        text = text.where(text != "", str(default))
    numbers = pd.to_numeric(text, errors="coerce")
    bad = numbers.isna() | (numbers != np.floor(numbers)) | (numbers < minimum) | (numbers >= 2**53)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise ScenarioError(
            f"line {lines[i]}: {name} {text.iloc[i]!r} is not an integer >= {minimum} (and below 2^53)",
            path=key,
            value=str(path),
        )
    return numbers.to_numpy().astype(np.int64)


def _line_numbers(path) -> list[int]:
    """File line numbers of the data rows (after the header; blank and comment lines skipped)."""
    out, header_seen = [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            body = line.split("#", 1)[0].strip()
            if not body:
                continue
            if header_seen:
                out.append(n)
            header_seen = True
    return out
