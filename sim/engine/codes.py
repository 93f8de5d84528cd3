"""Integer codes of values: `factorize` (each distinct value's code, in order of first appearance)
and `factorize_rows` (the same for rows of several columns, e.g. a span's component, track and
category); and `distinct`, the distinct values in ascending order.

numpy's `unique` codes values in sorted order; these keep the order in which values first appear,
so whatever is numbered by them (bundles of flows, nodes, groups of a report) keeps the order of
the data it came from. `ranges`: the indices of concatenated index ranges. Plain numpy and Python: a small run never imports pandas for them (issue 26).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a numeric array (flattened) in ascending order: `np.unique(values)`
    for arrays without NaN. By sorting: numpy 2's `unique` hashes, which on the hot paths' arrays
    (tens to thousands of link or bundle indices) is 2-10x slower, and its first call imports
    numpy.ma (10-20 ms of a small run's start-up)."""
    ordered = np.sort(values, axis=None)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the concatenated ranges [start, start + length)."""
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))


def factorize(values) -> tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values): `distinct[codes]` equals `values`; codes number the distinct values
    in order of first appearance (`pandas.factorize`'s order). Numbers or strings, without NaN."""
    values = np.asarray(values)
    codes, first = _first_appearance(values)
    return codes, values[first]


def _first_appearance(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes in order of first appearance, the position of each code's first value)."""
    if not len(values):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # sorted codes -> codes by first appearance
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.ravel()], first[order]


def factorize_rows(columns: Sequence) -> tuple[np.ndarray, list[tuple]]:
    """(codes, distinct rows) of the rows of equally long `columns` (any hashable values, None
    included), codes in order of first appearance. Each column is coded by a dictionary pass, the
    codes combined (mixed radix; renumbered by first appearance where the next column would overflow
    63 bits) and factorized as numbers."""
    n = len(columns[0]) if len(columns) else 0
    values = [np.asarray(c, dtype=object) if not isinstance(c, np.ndarray) else c for c in columns]
    combined = np.zeros(n, dtype=np.int64)
    radix = 1
    for column in values:
        items = column.tolist()
        seen = {v: i for i, v in enumerate(dict.fromkeys(items))}  # in order of first appearance
        code = np.fromiter(map(seen.__getitem__, items), dtype=np.int64, count=n)
        size = max(len(seen), 1)
        if radix * size >= 2**62:  # the prefixes so far as their distinct rows (at most n of them)
            combined, _ = _first_appearance(combined)
            radix = int(combined.max()) + 1
        radix *= size
        combined = combined * size + code
    codes, first = _first_appearance(combined)
    taken = [column[first].tolist() for column in values]
    return codes, list(zip(*taken)) if taken else []
