"""The energy report's per-device activity sweep (sim/energy/meter.py `_sweep`, and compiled for many
intervals in sim/energy/sweep_kernel.py): busy segments of constant activity from each device's merged
compute and comm intervals. Both paths give the same segments, value for value, and the segments
are what a direct per-device timeline says."""

from __future__ import annotations

import numpy as np
import pytest

from sim.energy import meter
from sim.energy.meter import _sweep
from sim.energy.sweep_kernel import sweep
from sim.engine.activity import union


def merged_intervals(seed: int, devices: int, per_device: int):
    """Random compute and comm intervals of `devices` GPUs on a coarse time grid (ties, touching and
    zero-length intervals are common), merged per (device, state) by `union`."""
    rng = np.random.default_rng(seed)
    n = devices * per_device
    device = rng.integers(0, devices, n)
    state = rng.integers(0, 2, n)
    start = rng.integers(0, 40, n) * 0.25
    end = start + rng.integers(0, 6, n) * 0.25
    return union(device * 2 + state, start, end)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("comm_activity", [0.0, 0.35])
def test_the_compiled_sweep_gives_the_numpy_paths_segments(seed, comm_activity):
    key, start, end = merged_intervals(seed, devices=1 + seed * 7, per_device=30)
    expected = _sweep(key, start, end, comm_activity)
    got = sweep(key, start, end, comm_activity)
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype and e.tolist() == g.tolist()


def test_segments_follow_each_devices_timeline():
    """Device 0 computes [0, 2] and communicates [1, 4]; device 3 only communicates [1, 3]: activity
    1 while computing, the comm activity while only communicating, a segment from each event to the
    device's next one, none while idle."""
    key = np.array([0, 1, 7])
    start, end = np.array([0.0, 1.0, 1.0]), np.array([2.0, 4.0, 3.0])
    for path in (_sweep, sweep):
        t0, t1, device, activity = path(key, start, end, 0.5)
        assert list(zip(t0.tolist(), t1.tolist(), device.tolist(), activity.tolist())) == [
            (0.0, 1.0, 0, 1.0),
            (1.0, 2.0, 0, 1.0),
            (2.0, 4.0, 0, 0.5),
            (1.0, 3.0, 3, 0.5),
        ]


def test_a_run_with_many_intervals_sweeps_compiled(monkeypatch):
    """The report picks the compiled sweep from COMPILED_SWEEP_MIN merged intervals on (a small run
    sweeps with numpy and never loads numba: tests/test_startup.py)."""
    calls = []
    monkeypatch.setattr(meter, "COMPILED_SWEEP_MIN", 0)
    import sim.energy.sweep_kernel as kernel

    monkeypatch.setattr(kernel, "sweep", lambda *args: calls.append(len(args[0])) or sweep(*args))
    key_state = np.array([0, 1])
    flat, counts = np.array([0, 1, 0]), np.array([2, 1])
    segments = meter._device_segments(
        flat, counts, key_state, np.array([0, 1]), np.array([0.0, 1.0]), np.array([2.0, 3.0]), 0.5
    )
    assert calls == [3]
    assert list(zip(*(a.tolist() for a in segments))) == [
        (0.0, 1.0, 0, 1.0),
        (1.0, 2.0, 0, 1.0),
        (2.0, 3.0, 0, 0.5),
        (0.0, 2.0, 1, 1.0),
    ]
