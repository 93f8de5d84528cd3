"""The energy report's per-device activity sweep (sim/energy/meter.py `_sweep`, and compiled for many
intervals in sim/energy/sweep_kernel.py): busy segments of constant activity from each device's merged
compute and comm intervals. Both paths give the same segments, value for value, and the segments
are what a direct per-device timeline says. The merge before it (`union`, compiled for many
intervals in sim/engine/union_kernel.py) gives the same intervals either way, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from sim.energy import meter
from sim.energy.meter import _sweep
from sim.energy.sweep_kernel import sweep
from sim.engine import activity
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


@pytest.mark.parametrize("seed", range(8))
def test_a_union_merged_compiled_is_the_numpy_one_to_the_last_bit(monkeypatch, seed):
    """Intervals on a coarse grid (ties, touching and zero-length ones), or spread over many orders
    of magnitude (offsets that round), in few or many groups: merged compiled
    (`merge_sorted`, the intervals read through their sort order) or with numpy, the same groups,
    starts and ends, bit for bit; and the result is disjoint and sorted within each group."""
    rng = np.random.default_rng(seed)
    n = 3000
    group = rng.integers(0, [1, 4, 40, 3000][seed % 4], n)
    if seed % 2:
        start = rng.integers(0, 50, n) * 0.1
        end = start + rng.integers(0, 10, n) * 0.1
    else:
        start = rng.random(n) * 10.0 ** rng.uniform(-6, 6, n)
        end = start + rng.random(n) * 10.0 ** rng.uniform(-6, 3, n) * (rng.random(n) < 0.9)
    monkeypatch.setattr(activity, "COMPILED_UNION_MIN", n + 1)
    expected = union(group, start, end)
    monkeypatch.setattr(activity, "COMPILED_UNION_MIN", 1)
    got = union(group, start, end)
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype and e.tobytes() == g.tobytes()
    g, s, e = got
    same = g[1:] == g[:-1]
    assert (np.diff(g) >= 0).all() and (s[1:][same] > e[:-1][same]).all()


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


@pytest.mark.parametrize("seed", range(4))
def test_the_coarse_entries_gathered_compiled_spread_as_the_numpy_ones(monkeypatch, seed):
    """Each representative's segments are spread once per group of the devices it stands for
    (`_class_members` pairs): from COMPILED_SPREAD_MIN entries on, they are spread compiled
    without being built (`AdaptiveBins.spread_fanout`); the bins are the numpy path's, to the bit."""
    from types import SimpleNamespace

    from sim.energy.meter import EnergyMeter, _class_members
    from sim.engine.link_traffic import AdaptiveBins

    rng = np.random.default_rng(seed)
    n_dev, n_pool = 48, 8  # GPUs on 6 hosts of 8, then 8 pool GPUs (group 6)
    rep = np.full(n_dev + n_pool, -1)  # each row's representative (-1: idle)
    leaders = rng.choice(n_dev + n_pool, 10, replace=False)
    rep[leaders] = leaders
    others = np.setdiff1d(np.arange(n_dev + n_pool), leaders)
    standing = others[rng.random(len(others)) < 0.7]
    rep[standing] = rng.choice(leaders, len(standing))
    members = _class_members(rep, np.repeat(np.arange(7), 8), n_dev)
    assert members[5].any() and not members[5].all()  # pairs on GPU hosts and of pool GPUs
    n = 400
    t0 = np.sort(rng.integers(0, 200, n) * 0.5)
    segments = (t0, t0 + rng.integers(0, 9, n) * 0.25, rng.choice(leaders, n), rng.choice([0.0, 0.4, 1.0], n))
    power = SimpleNamespace(max=700.0, idle=100.0)
    inv = SimpleNamespace(
        gpu_dynamic_w=600.0, site=SimpleNamespace(gpu_host=power), topology=SimpleNamespace(hosts=[range(8)])
    )
    stub = SimpleNamespace(inv=inv)
    bins = {}
    for compiled in (False, True):
        monkeypatch.setattr(meter, "COMPILED_SPREAD_MIN", 0 if compiled else 10**9)
        fine, coarse = AdaptiveBins(4, 64), AdaptiveBins(8, 64)
        EnergyMeter._spread_gpu(stub, segments, members, fine, coarse)
        bins[compiled] = (fine.values().tolist(), coarse.values().tolist(), coarse.width_s)
    assert bins[True] == bins[False]
    assert np.count_nonzero(bins[True][1]) > 20
