"""Zipf access laws over rows or pages, with sums over ranks that scale to billions of rows.

`ZipfRows(rows, alpha)`: the k-th hottest of `rows` rows is accessed with probability
p_k = k^-alpha / H(rows, alpha) (H: generalised harmonic number). Hashing places hot rows at random
ids, so a row-wise shard of a table sees the same law over its own rows. Sums over ranks
(`rank_sum`) are exact over the first `HEAD` ranks and Euler–Maclaurin (integral + end
corrections) beyond, so tables of billions of rows cost microseconds.
`cdf(k)` is the share of accesses to the k hottest rows, `hot_rows(rate)` the rows whose share is at
least `rate`, `expected_distinct(n, lo, hi)` the distinct rows among n accesses falling in ranks
(lo, hi] (sum of 1 - exp(-n p_k)), `sample(rng, n)` draws ranks (exact inverse CDF).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

HEAD = 4096  # ranks summed exactly; beyond: Euler–Maclaurin
_TAIL_POINTS = 257  # Simpson nodes in log-rank for tail integrals (odd)


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
            out[tail] += self._power_integral(m, x) + (x**-a - m**-a) / 2 + a * (m ** (-a - 1) - x ** (-a - 1)) / 12
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
        if hi > start:  # sum_{k=start+1}^{hi} f(k) ~ int_start^hi f + (f(hi) - f(start)) / 2
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
        if np.any(tail):  # invert H on the tail by bisection on the rank (vectorised)
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
