"""The exact running maximum / minimum within groups (sim/engine/open_intervals.py running_within, used by
OpenIntervals.flush) equals pandas' groupby cummax / cummin, the straightforward path."""

import numpy as np
import pandas as pd
import pytest

from sim.engine.open_intervals import running_within


@pytest.mark.parametrize("n", [1, 2, 7, 300, 5000])
def test_running_within_groups_is_pandas_cummax_and_cummin(n):
    rng = np.random.default_rng(n)
    for _ in range(10):
        values = rng.choice(rng.normal(size=max(n // 3, 1)) * 1e3, size=n)  # ties on purpose
        group = np.sort(rng.integers(0, max(n // 4, 1), size=n)) + 5  # ascending, not from 0
        for op, name in ((np.maximum, "cummax"), (np.minimum, "cummin")):
            expected = getattr(pd.Series(values).groupby(group), name)().to_numpy()
            np.testing.assert_array_equal(running_within(op, values, group), expected)


def test_running_within_never_carries_a_value_into_the_next_group():
    values = np.array([5.0, 1.0, 0.5, 9.0, 2.0])
    group = np.array([0, 0, 1, 1, 2])
    assert running_within(np.maximum, values, group).tolist() == [5.0, 5.0, 0.5, 9.0, 2.0]
    assert running_within(np.minimum, values, group).tolist() == [5.0, 1.0, 0.5, 0.5, 2.0]
