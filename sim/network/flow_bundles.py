"""Storage for the flow network's active flows (sim/network/flow_slots.py): growable arrays and bundles.

- `Growable`: named numpy arrays sharing one length, with spare room, so appending k rows costs
  O(k) amortised.
- `Bundles`: the distinct sets of entries flows have on shared links (links between switches),
  each stored once with an id; all flows from the hosts of one leaf to the hosts of another share
  one. Ids of a batch of flows are found with one hash (pandas.factorize) of a code per flow.
"""

from __future__ import annotations

import numpy as np

from sim.engine.codes import distinct, factorize, ranges

_SMALL_BATCH = 64  # batches up to this many flows are looked up one by one


class Growable:
    """Named numpy arrays sharing one length, with spare room (doubling)."""

    def __init__(self, fields: dict) -> None:
        self.fields = fields
        self.size = 0
        self.arrays = {name: np.full(0, fill, dtype=dtype) for name, (dtype, fill) in fields.items()}

    def reserve(self, extra: int) -> None:
        need = self.size + extra
        room = len(next(iter(self.arrays.values())))
        if need <= room:
            return
        room = max(2 * room, need, 64)
        for name, (dtype, fill) in self.fields.items():
            grown = np.full(room, fill, dtype=dtype)
            grown[: self.size] = self.arrays[name][: self.size]
            self.arrays[name] = grown


def owners(lengths: np.ndarray) -> np.ndarray:
    """Position of the owner of each entry, entries given as consecutive runs of `lengths`."""
    return np.repeat(np.arange(len(lengths)), lengths)


def _unique_rows(keys: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(a row of each distinct kind, kind of each row) of the matrix [m link ids | m weights]: rows
    are coded by the distinct values of each column (mixed radix) when that fits in 63 bits, else
    compared whole. A column with one value (e.g. all weights 1) adds nothing to the code."""
    code = np.zeros(len(keys), dtype=np.int64)
    radix = 1
    for i, column in enumerate(keys.T):
        if i >= m and (column == column[0]).all():
            continue
        if i < m:  # link ids: their own radix
            column_code, size = column.astype(np.int64), int(column.max()) + 1
        else:
            column_code, values = factorize(column)
            size = len(values)
        radix *= size
        if radix >= 2**62:
            _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            return first, inverse.ravel()
        code = code * size + column_code
    inverse, distinct = factorize(code)
    first = np.empty(len(distinct), dtype=np.int64)
    first[inverse] = np.arange(len(inverse))  # any row of a kind represents it
    return first, inverse


class Bundles:
    """Distinct shared-entry sets (links, weights), each stored once, with ids."""

    def __init__(self) -> None:
        self.index: dict[bytes, int] = {}
        self.store = Growable({"start": (np.int64, 0), "length": (np.int64, 0)})
        self.entries = Growable({"link": (np.int64, 0), "weight": (float, 0.0)})

    def ids(self, links: np.ndarray, weights: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Bundle id per row, rows given by their shared entries (`counts` per row; -1 if none)."""
        out = np.full(len(counts), -1, dtype=np.int64)
        if not len(links):  # no row crosses a shared link
            return out
        if len(counts) <= _SMALL_BATCH:  # few rows: one lookup each
            end = np.cumsum(counts).tolist()
            for i, m in enumerate(counts.tolist()):
                if m:
                    part = slice(end[i] - m, end[i])
                    out[i] = self._id(np.concatenate([links[part].astype(float), weights[part]]), m)
            return out
        owner = np.repeat(np.arange(len(counts)), counts)
        for m in distinct(counts[counts > 0]).tolist():
            rows = np.flatnonzero(counts == m)
            mine = counts[owner] == m
            keys = np.concatenate([links[mine].reshape(-1, m).astype(float), weights[mine].reshape(-1, m)], axis=1)
            first, inverse = _unique_rows(keys, m)
            ids = np.array([self._id(keys[i], m) for i in first], dtype=np.int64)
            out[rows] = ids[inverse]
        return out

    def _id(self, key: np.ndarray, m: int) -> int:
        found = self.index.get(key.tobytes())
        if found is not None:
            return found
        new = self.store.size
        self.store.reserve(1)
        self.entries.reserve(m)
        self.store.arrays["start"][new] = self.entries.size
        self.store.arrays["length"][new] = m
        e = slice(self.entries.size, self.entries.size + m)
        self.entries.arrays["link"][e] = key[:m].astype(np.int64)
        self.entries.arrays["weight"][e] = key[m:]
        self.entries.size += m
        self.store.size += 1
        self.index[key.tobytes()] = new
        return new

    def of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(owner position in `ids`, link, weight) of the entries of bundles `ids`."""
        lengths = self.store.arrays["length"][ids]
        idx = ranges(self.store.arrays["start"][ids], lengths)
        return (
            np.repeat(np.arange(len(ids)), lengths),
            self.entries.arrays["link"][idx],
            self.entries.arrays["weight"][idx],
        )
