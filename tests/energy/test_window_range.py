"""The power swing's sliding window (sim/energy/meter.py `largest_window_range`): the largest
max - min over `size` consecutive bins, computed without scipy.ndimage (start-up, issue 26).
It must be the float scipy's max/min filters give, and the brute-force one."""

from __future__ import annotations

import numpy as np
import pytest

from sim.energy.meter import largest_window_range


def _brute_force(values: np.ndarray, size: int) -> float:
    return max(float(values[i : i + size].max() - values[i : i + size].min()) for i in range(len(values) - size + 1))


@pytest.mark.parametrize("n", [2, 3, 7, 64, 1001])
def test_largest_window_range_is_brute_force_and_scipys_filters(n):
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(n)
    values = rng.normal(5e3, 2e3, size=n)
    for size in sorted({2, 3, max(2, n // 3), max(2, n - 1), n} & set(range(2, n + 1))):
        scipy_range = ndimage.maximum_filter1d(values, size, mode="nearest") - ndimage.minimum_filter1d(
            values, size, mode="nearest"
        )
        assert largest_window_range(values, size) == _brute_force(values, size) == float(scipy_range.max())


def test_a_step_is_seen_only_by_windows_that_span_it():
    values = np.array([1.0, 1.0, 1.0, 9.0, 9.0, 2.0, 2.0])
    assert largest_window_range(values, 2) == 8.0  # 1 -> 9 inside two bins
    assert largest_window_range(values, 7) == 8.0
