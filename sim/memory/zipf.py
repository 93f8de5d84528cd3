"""Zipf access laws over rows or pages, with sums over ranks that scale to billions of rows.

`ZipfRows(rows, alpha)`: the k-th hottest of `rows` rows is accessed with probability
p_k = k^-alpha / H(rows, alpha) (H: generalised harmonic number). Hashing places hot rows at random
ids, so a row-wise shard of a table sees the same law over its own rows. Sums over ranks
(`rank_sum`) are exact over the first `HEAD` ranks and Euler–Maclaurin (integral + end
corrections) beyond, so tables of billions of rows cost microseconds.
`cdf(k)` is the share of accesses to the k hottest rows, `hot_rows(rate)` the rows whose share is at
least `rate`, `expected_distinct(n, lo, hi)` the distinct rows among n accesses falling in ranks
(lo, hi] (sum of 1 - exp(-n p_k)), `sample(rng, n)` draws ranks (exact inverse CDF).

Planners and cache policies sum over the same rank ranges again and again (a shard's regions every
iteration, a root search's steps over the whole table), so a law keeps the nodes of its recent ranges
(`_Nodes`: a slice of the head's ranks, whose pmf is made once, and the tail's Simpson nodes and end
points), the `pmf` of each node array it handed out and its `cdf` at recent scalar ranks: a sum over a
known range costs its `f` without the powers. The arrays are the ones a fresh computation makes (the
same values, read-only), so every sum is the same to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

HEAD = 4096  # ranks summed exactly; beyond: Euler–Maclaurin
_TAIL_POINTS = 257  # Simpson nodes in log-rank for tail integrals (odd)
_NODES_KEPT = 64  # rank ranges whose nodes a law keeps (then it starts afresh: bounded memory)
_CDF_KEPT = 4096  # scalar ranks whose cdf a law keeps (likewise)


class _Nodes:
    """The nodes of `rank_sum` over ranks (lo, hi]: `head` (ranks summed exactly, or None), and the
    tail's Simpson nodes `x` (evenly spaced in log-rank, step `h`) and its end points `ends` (or None)."""

    __slots__ = ("head", "x", "h", "ends")

    def __init__(self, lo: int, hi: int, head_ranks: np.ndarray) -> None:
        head_end = min(hi, max(lo, HEAD))
        self.head = head_ranks[lo:head_end] if head_end > lo else None  # ranks lo + 1 .. head_end
        start = max(lo, HEAD)
        self.x: np.ndarray | None = None
        self.ends: np.ndarray | None = None
        self.h = 0.0
        if hi > start:
            t = np.linspace(math.log(start), math.log(hi), _TAIL_POINTS)
            self.x, self.h = np.exp(t), t[1] - t[0]
            self.ends = np.array([float(start), float(hi)])

    def tail_arrays(self) -> list[np.ndarray]:
        return [a for a in (self.x, self.ends) if a is not None]


class ZipfRows:
    """Zipf row-access law over `rows` rows (rank 1 = hottest)."""

    def __init__(self, rows: float, alpha: float) -> None:
        self.rows = max(1, int(rows))
        self.alpha = float(alpha)
        head = min(self.rows, HEAD)
        self._head_pow = np.arange(1, head + 1, dtype=float) ** -self.alpha
        self._head_cum = np.concatenate([[0.0], np.cumsum(self._head_pow)])
        self.norm = float(self._harmonic(np.asarray(float(self.rows))))
        self._nodes: dict[tuple[int, int], _Nodes] = {}  # recent rank ranges' nodes (module docstring)
        self._cdf_at: dict[int | float, float] = {}  # cdf at recent scalar ranks
        self._head_ranks = np.zeros(0)  # ranks 1 .. head and their pmf (read-only), made when first needed
        self._head_pmf = np.zeros(0)
        self._pmf_of: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}  # id(node array) -> (it, its pmf)

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
        nodes = self._nodes_of(lo, hi)
        total = 0.0
        if nodes.head is not None:
            total += float(np.sum(f(nodes.head)))
        if nodes.x is not None and nodes.ends is not None:
            # sum_{k=start+1}^{hi} f(k) ~ int_start^hi f + (f(hi) - f(start)) / 2
            x, h = nodes.x, nodes.h
            g = f(x) * x
            integral = h / 3 * (g[0] + g[-1] + 4 * g[1:-1:2].sum() + 2 * g[2:-1:2].sum())
            ends = f(nodes.ends)
            total += float(integral + (ends[1] - ends[0]) / 2)
        return total

    def _nodes_of(self, lo: int, hi: int) -> _Nodes:
        """The nodes of ranks (lo, hi], kept (the last `_NODES_KEPT` ranges), their arrays read-only."""
        nodes = self._nodes.get((lo, hi))
        if nodes is None:
            if len(self._nodes) >= _NODES_KEPT:
                self._nodes.clear()
                self._pmf_of.clear()
            if not len(self._head_ranks):  # the head's pmf: the same values as `pmf` of its ranks
                self._head_ranks = np.arange(1, len(self._head_pow) + 1, dtype=float)
                self._head_pmf = self._head_pow / self.norm
                self._head_ranks.flags.writeable = self._head_pmf.flags.writeable = False
            nodes = self._nodes[(lo, hi)] = _Nodes(lo, hi, self._head_ranks)
            if nodes.head is not None:  # a slice of the head's ranks: its pmf is the same slice
                self._pmf_of[id(nodes.head)] = (nodes.head, self._head_pmf[lo : lo + len(nodes.head)])
            for a in nodes.tail_arrays():
                a.flags.writeable = False
                self._pmf_of[id(a)] = (a, None)
        return nodes

    # ---- the law -------------------------------------------------------------------------------
    def pmf(self, k) -> np.ndarray:
        """Access probability of rank(s) `k`. For a node array of `rank_sum` (passed on by its `f`) the
        values are computed once and shared (read-only)."""
        kept = self._pmf_of.get(id(k))
        if kept is not None and kept[0] is k:
            if kept[1] is None:
                value = k**-self.alpha / self.norm
                value.flags.writeable = False
                self._pmf_of[id(k)] = (k, value)
                return value
            return kept[1]
        return np.asarray(k, dtype=float) ** -self.alpha / self.norm

    def cdf(self, k) -> float | np.ndarray:
        """Share of accesses that go to the `k` hottest rows (a law keeps the values at its recent
        scalar `k`s: planners ask for the same region edges again and again)."""
        if isinstance(k, (int, float)):
            kept = self._cdf_at.get(k)
            if kept is None:
                if len(self._cdf_at) >= _CDF_KEPT:
                    self._cdf_at.clear()
                kept = self._cdf_at[k] = float(self._harmonic(np.asarray(k, dtype=float)) / self.norm)
            return kept
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
