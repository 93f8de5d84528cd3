"""Every shipped scenario loads, runs and is deterministic (same seed -> identical metrics).

Scenarios whose first lines contain the tag `# dcsim: slow` are heavy; they run only with
`pytest -m slow`.
"""
from pathlib import Path

import pytest

from sim import load_scenario, run

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("**/*.yaml"))


def is_slow(path: Path) -> bool:
    head = path.read_text().splitlines()[:5]
    return any("dcsim: slow" in line for line in head)


def params():
    for p in SCENARIOS:
        marks = [pytest.mark.slow] if is_slow(p) else []
        yield pytest.param(p, id=str(p.relative_to(ROOT / "scenarios")), marks=marks)


@pytest.mark.parametrize("path", params())
def test_scenario_runs_and_is_deterministic(path):
    first = run(load_scenario(path))
    assert first.metrics, "a run must report metrics"
    assert first.sim_time_s > 0 and first.events > 0
    second = run(load_scenario(path))
    assert second.metrics == first.metrics


def test_runs_in_one_process_do_not_influence_each_other():
    path = ROOT / "scenarios" / "allreduce-2x8-h100.yaml"
    alone = run(load_scenario(path)).metrics
    run(load_scenario(path, ["seed=3", "workload.bytes=1GiB"]))
    assert run(load_scenario(path)).metrics == alone
