"""`dcsim run` says before it starts when a run will take long (issue 26 item 4): one line on
stderr, from the estimate `dcsim check` prints scaled to this machine's speed (sim/engine/speed_probe.py),
naming `network_model: analytical` when the network is the flow model; nothing for short runs;
`--json` stdout stays exactly one object."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import sim.cli
from sim.cli import long_run_warning, main
from sim.scenario.estimate import estimate, wall_time_s
from sim.scenario.model import load_scenario

ROOT = Path(__file__).resolve().parents[2]
ALLREDUCE = str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml")
CP16_128K = str(ROOT / "scenarios" / "train-llama3-405b-16k-gpus-seq128k-cp16.yaml")  # ships analytical
SEQ8K = str(ROOT / "scenarios" / "train-llama3-405b-16k-gpus-seq8k.yaml")  # ships analytical; ~2 min on flow


def _warning(path: str, *overrides: str, speed: float | None = 1.0) -> str | None:
    """The warning on a machine `speed` times as fast as the reference one (None: probe this one)."""
    scenario = load_scenario(path, list(overrides))
    return long_run_warning(scenario, estimate(scenario), speed)


def test_16k_gpu_training_on_the_flow_network_is_announced_with_the_analytical_network():
    """On a machine half as fast as the reference one (a 2-core VM's probe reads ~0.4)."""
    scenario = load_scenario(SEQ8K, ["network_model=flow"])
    assert wall_time_s(estimate(scenario), 0.5) > sim.cli.LONG_RUN_S
    text = _warning(SEQ8K, "network_model=flow", speed=0.5)
    assert text is not None and "\n" not in text
    assert "estimated to take ~" in text and "network_model: analytical" in text


def test_short_runs_and_the_analytical_network_get_no_suggestion():
    assert _warning(ALLREDUCE) is None
    assert _warning(CP16_128K) is None  # analytical: a few seconds


def test_the_warning_scales_the_estimate_to_this_machines_speed():
    """A run estimated at 40 s on the reference machine takes ~80 s on a machine half as fast: announced
    there, not on the reference machine nor on a faster one."""
    scenario = load_scenario(CP16_128K, ["network_model=flow"])
    reference_s = wall_time_s(estimate(scenario))
    assert sim.cli.LONG_RUN_S / sim.cli.SLOWEST_MACHINE < reference_s < sim.cli.LONG_RUN_S
    assert wall_time_s(estimate(scenario), 0.5) == pytest.approx(2 * reference_s)
    assert _warning(CP16_128K, "network_model=flow") is None
    assert _warning(CP16_128K, "network_model=flow", speed=2.0) is None
    slower = _warning(CP16_128K, "network_model=flow", speed=reference_s / (2 * sim.cli.LONG_RUN_S))
    assert slower is not None and "on this machine" in slower and "analytical" in slower


def test_a_short_run_does_not_probe_the_machine(monkeypatch):
    """Start-up: a run short even on a machine 4x slower than the reference is not probed."""
    import sim.engine.speed_probe

    def no_probe(*_args):
        raise AssertionError("probed")

    monkeypatch.setattr(sim.engine.speed_probe, "speed_factor", no_probe)
    assert _warning(ALLREDUCE, speed=None) is None


def test_a_long_analytical_run_is_announced_without_suggesting_itself(monkeypatch):
    monkeypatch.setattr(sim.cli, "LONG_RUN_S", 0.0)
    text = _warning(ALLREDUCE, "network_model=analytical")
    assert text is not None and "analytical" not in text


def test_the_warning_goes_to_stderr_and_json_stdout_stays_one_object(monkeypatch):
    monkeypatch.setattr(sim.cli, "LONG_RUN_S", 0.0)  # every run counts as long
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as code:
        main(["run", ALLREDUCE, "--json"])
    assert code.value.code == 0
    assert json.loads(out.getvalue())["metrics"]["time_s"] > 0
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dcsim: this run is estimated") and "analytical" in lines[0]
