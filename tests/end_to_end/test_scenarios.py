"""Every shipped and benchmark scenario loads, runs, is deterministic (same seed -> identical
metrics) and reports exactly the metrics in tests/golden/metrics.json.

One run each: reporting exactly the metrics another process wrote when the golden file was made is
the determinism check (a run that varied would miss them), and runs in one process do not influence
each other (`test_runs_in_one_process_do_not_influence_each_other` below; a fresh process with
another hash seed: tests/end_to_end/test_hardening.py).

The golden file pins results across refactors: a change meant to keep results unchanged keeps it
unchanged; a change of the model rewrites it (`python tests/golden/make_golden.py`) in the same
commit, with the reason in the commit message. Scenarios whose first lines contain the tag
`# dcsim: slow` are heavy; they run only with `pytest -m slow` (as do benchmark scenarios that take
more than a few seconds here).
"""

import json
import sys
from pathlib import Path

import pytest

from sim import load_scenario, run

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "golden"))
from make_golden import GOLDEN, SHORTEN, scenario_paths  # noqa: E402

SLOW_BENCHMARKS = {"embedding-1024gpu.yaml", "training-16k-cp16-flow.yaml"}  # 20-30 s a run on the 2-core CI machine


def is_slow(path: Path) -> bool:
    head = path.read_text().splitlines()[:5]
    return any("dcsim: slow" in line for line in head) or path.name in SLOW_BENCHMARKS


def params():
    for p in scenario_paths():
        marks = [pytest.mark.slow] if is_slow(p) else []
        yield pytest.param(p, id=str(p.relative_to(ROOT)), marks=marks)


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("path", params())
def test_scenario_runs_deterministically_with_the_golden_metrics(path, golden):
    rel = str(path.relative_to(ROOT))
    first = run(load_scenario(path, SHORTEN.get(rel, [])), limits=None)
    assert first.metrics, "a run must report metrics"
    assert first.sim_time_s > 0 and first.events > 0
    assert json.loads(json.dumps(first.metrics, sort_keys=True)) == golden[rel], (
        "metrics changed: if intended, python tests/golden/make_golden.py"
    )


def test_runs_in_one_process_do_not_influence_each_other():
    path = ROOT / "scenarios" / "allreduce-2x8-h100.yaml"
    alone = run(load_scenario(path)).metrics
    run(load_scenario(path, ["seed=3", "workload.bytes=1GiB"]))
    assert run(load_scenario(path)).metrics == alone
