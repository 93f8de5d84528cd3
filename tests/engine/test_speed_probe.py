"""The engine probe (sim/engine/speed_probe.py) measures this machine's SimPy event rate, the yardstick
by which wall-time estimates measured on one machine are scaled to another."""

from __future__ import annotations

import pytest

from sim.engine.speed_probe import engine_events_per_s, speed_factor


def test_the_probe_measures_a_positive_event_rate_quickly():
    rate = engine_events_per_s(events=2_000, repeats=2)
    assert 1e4 < rate < 1e9  # a SimPy event takes ~0.5-5 us on a current CPU


def test_the_speed_factor_is_this_machines_rate_over_the_references():
    assert speed_factor(1e6, measured_events_per_s=5e5) == pytest.approx(0.5)
    assert speed_factor(1e6, measured_events_per_s=2e6) == pytest.approx(2.0)
