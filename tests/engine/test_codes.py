"""`factorize` and `factorize_rows` (sim/engine/codes.py): codes in order of first appearance, the
numbering pandas.factorize gives, without importing pandas; `distinct`: numpy's `unique` by sorting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.engine.codes import distinct, factorize, factorize_rows


@pytest.mark.parametrize(
    "values",
    [
        np.array([5, 3, 5, 9, 3, 3, 1]),
        np.array([0.5, 0.25, 0.5, 1.0, 0.25]),
        np.array(["h1/nic0", "h0/nic0", "h1/nic0", "spine0"], dtype=object),
        np.random.default_rng(0).integers(0, 50, 1_000),
    ],
    ids=["ints", "floats", "strings", "many"],
)
def test_factorize_numbers_values_in_order_of_first_appearance_as_pandas_does(values):
    codes, distinct = factorize(values)
    expected_codes, expected_distinct = pd.factorize(values)
    assert codes.tolist() == expected_codes.tolist()
    assert list(distinct) == list(expected_distinct)
    assert list(distinct[codes]) == list(values)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 100, 10_000])
def test_distinct_is_numpys_unique(n):
    rng = np.random.default_rng(n)
    for values in (rng.integers(-5, max(n // 3, 1), n), rng.integers(0, 3, (n, 2)), rng.random(n).round(2)):
        got, expected = distinct(values), np.unique(values)
        assert got.dtype == expected.dtype
        assert got.tolist() == expected.tolist()


def test_factorize_of_nothing_is_empty():
    codes, distinct = factorize(np.zeros(0))
    assert len(codes) == 0 and len(distinct) == 0


def test_factorize_rows_codes_each_distinct_row_once_in_order_of_first_appearance():
    component = ["g0", "g1", "g0", "g0", None]
    track = ["compute", "comm", "compute", "comm", None]
    codes, rows = factorize_rows([component, track])
    assert codes.tolist() == [0, 1, 0, 2, 3]
    assert rows == [("g0", "compute"), ("g1", "comm"), ("g0", "comm"), (None, None)]


def test_factorize_rows_of_more_combinations_than_one_number_holds_renumbers_on_the_way():
    """Columns whose distinct values multiply past 63 bits: the prefix codes are renumbered, the rows'
    codes stay those of a row-by-row numbering."""
    rng = np.random.default_rng(1)
    columns = [rng.integers(0, 100_000, 300).astype(object) for _ in range(6)]  # ~300^6 > 2^62 combinations
    codes, rows = factorize_rows(columns)
    seen: dict[tuple, int] = {}
    expected = [seen.setdefault(row, len(seen)) for row in zip(*(c.tolist() for c in columns))]
    assert codes.tolist() == expected and rows == list(seen)
