"""`Columns`: a table as named numpy columns of equal length, what the bottleneck report computes on.

The recorder's spans and the network's link table come as columns (`Recorder.columns`,
`Network.link_columns`); the report filters, orders and sums them with numpy, so a run that prints
its report never imports pandas (start-up, issue 26). A pandas DataFrame (the spans a user builds by
hand, `RunResult.spans`) is taken as well: `columns_of` turns it into columns, `Columns.frame` back.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Columns(dict):
    """Column name -> 1-D numpy array, all of one length (`rows`; as a dict, `len` counts columns)."""

    @property
    def rows(self) -> int:
        return len(next(iter(self.values()))) if self else 0

    @property
    def empty(self) -> bool:
        return self.rows == 0

    def take(self, index) -> Columns:
        """The rows at `index` (positions or a boolean mask), in its order."""
        return Columns({name: values[index] for name, values in self.items()})

    def assign(self, **columns: Any) -> Columns:
        """A copy with these columns added or replaced (a scalar fills the column; a list of
        strings or None becomes an object column)."""
        n = self.rows
        out = Columns(self)
        for name, values in columns.items():
            if isinstance(values, list):
                values = np.array(values, dtype=object) if values else np.zeros(0, dtype=object)
            elif np.ndim(values) == 0:
                values = np.full(n, values, dtype=object if values is None or isinstance(values, str) else None)
            out[name] = np.asarray(values)
        return out

    def frame(self):
        """As a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(dict(self))


def columns_of(table) -> Columns:
    """`table` (Columns, a dict of columns or a pandas DataFrame) as Columns; text as object arrays."""
    if isinstance(table, Columns):
        return table
    if isinstance(table, dict):
        return Columns({name: _array(values) for name, values in table.items()})
    return Columns({str(name): _array(table[name].to_numpy()) for name in table.columns})


def _array(values) -> np.ndarray:
    values = np.asarray(values)
    return values.astype(object) if values.dtype.kind in "US" else values


def concat(tables: list[Columns]) -> Columns:
    """The rows of `tables` (same columns) one after another."""
    return Columns({name: np.concatenate([t[name] for t in tables]) for name in tables[0]})
