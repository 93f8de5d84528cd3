"""The Workload interface (sim/workloads/base.py) and its registry (sim/workloads/__init__.py).

- every registered kind implements the interface: a `Workload`, its kind equal to its config's
  `kind` literal, documented metrics (every one a metric its shipped scenarios report, and every
  metric they report documented), an `Estimate` on its shipped scenario, plots as a list;
- the registry's kinds are the discriminator values of the scenario's workload union (and of the
  jobs' union);
- core code (sim/ outside sim/workloads/) never compares with a kind name nor keys a dispatch table
  on one: it reaches a kind through the registry.
"""

from __future__ import annotations

import ast
import json
import typing
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from sim.engine.cost import Estimate
from sim.report.columns import Columns, columns_of
from sim.scenario.jobs import JobConfig
from sim.scenario.model import load_scenario
from sim.workloads import WORKLOADS, Workload, WorkloadBase, WorkloadConfig, config_class, kind_of, kinds, workload_for
from sim.workloads.base import PathReading
from sim.workloads.kind_union import KindUnion

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((ROOT / "tests" / "golden" / "metrics.json").read_text())
# every kind's run gets these from sim/energy/meter.py, not from the workload
POWER_METRICS = {
    "avg_power_w",
    "cluster_power_swing_w_per_s",
    "cost_usd",
    "energy_j",
    "energy_j_by_class",
    "energy_j_by_scope",
    "peak_power_w",
    "power_bin_s",
    "energy_per_token_j",
    "energy_per_sample_j",
}
# documented metrics no shipped scenario reports (they need an option the scenarios do not set)
CONDITIONAL = {
    "training_campaign": {"interval_scan", "best_checkpoint_interval_s", "best_effective_training_time_fraction"}
}


def _kind_of_file(path: Path) -> str | None:
    data = yaml.safe_load(path.read_text())
    return data["workload"].get("kind") if isinstance(data.get("workload"), dict) else None


SHIPPED = {}
for _path in sorted((ROOT / "scenarios").glob("*.yaml")):
    SHIPPED.setdefault(_kind_of_file(_path), _path)


def _union_kinds(union) -> list[str]:
    lazy = [m for m in getattr(union, "__metadata__", ()) if isinstance(m, KindUnion)]  # sim/workloads/kind_union.py
    members = lazy[0].members() if lazy else typing.get_args(typing.get_args(union)[0])
    return sorted(kind_of(m) for m in members)


def test_the_registry_lists_the_unions_kinds():
    assert kinds() == _union_kinds(WorkloadConfig) == _union_kinds(JobConfig)
    assert len(WORKLOADS) == len(kinds())
    for kind in kinds():
        assert workload_for(kind).kind == kind and config_class(kind) is workload_for(kind).config_class
    assert config_class("no-such-kind") is None and config_class(None) is None
    with pytest.raises(KeyError):
        workload_for("no-such-kind")


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.kind)
def test_every_kind_implements_the_interface(workload):
    assert isinstance(workload, Workload)
    assert issubclass(workload.config_class, WorkloadBase) and kind_of(workload.config_class) == workload.kind
    assert isinstance(workload.metrics, Mapping) and workload.metrics
    assert all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in workload.metrics.items())
    for hook in ("simulate", "estimate", "plots", "read_critical_path", "plan_report"):
        assert callable(getattr(workload, hook))


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.kind)
def test_documented_metrics_are_the_ones_its_scenarios_report(workload):
    reported: set[str] = set()
    for path, metrics in GOLDEN.items():
        data = yaml.safe_load((ROOT / path).read_text())
        jobs = [data["workload"]] if isinstance(data.get("workload"), dict) else []
        if jobs and jobs[0].get("kind") == workload.kind:
            reported |= set(metrics)
        for job in metrics.get("jobs", {}).values():  # several jobs: each job's own metrics
            if job.get("kind") == workload.kind:
                reported |= set(job) - {
                    "kind",
                    "hosts",
                    "gpus",
                    "completion_s",
                    "alone_completion_s",
                    "slowdown_vs_alone",
                }
    assert reported, f"no golden scenario of kind {workload.kind}"
    documented = set(workload.metrics)
    assert reported - POWER_METRICS <= documented, "undocumented metrics"
    assert documented - CONDITIONAL.get(workload.kind, set()) <= reported, "documented but never reported"


@pytest.mark.parametrize("kind", kinds())
def test_estimate_returns_an_estimate_on_a_shipped_scenario(kind):
    assert kind in SHIPPED, f"no shipped scenario of kind {kind}"
    scenario = load_scenario(str(SHIPPED[kind]))
    est = workload_for(kind).estimate(scenario.workload, scenario.hardware, scenario.network_model)
    assert isinstance(est, Estimate) and est.events > 0 and est.memory_bytes > 0
    assert est.path.startswith(("workload", "hardware")) and est.hint


@pytest.mark.parametrize("kind", kinds())
def test_plots_are_lists_and_path_readings_keep_the_path(kind):
    scenario = load_scenario(str(SHIPPED[kind]))
    metrics = GOLDEN[str(SHIPPED[kind].relative_to(ROOT))]
    cluster = SimpleNamespace(num_gpus=scenario.hardware.num_gpus)
    for m in (metrics, {}):
        result = SimpleNamespace(
            scenario=scenario,
            metrics=m,
            spans=pd.DataFrame(),
            span_columns=Columns(),
            links=pd.DataFrame(),
            cluster=cluster,
        )
        plots = workload_for(kind).plots(result)
        assert isinstance(plots, list)
        assert all(isinstance(stem, str) and callable(draw) for stem, draw in plots)
        path = columns_of({"component": ["h0/g0"], "resource": ["compute"], "charged_s": [1.0], "gap_before_s": [0.0]})
        reading = workload_for(kind).read_critical_path(result, path)
        assert isinstance(reading, PathReading) and reading.path.rows == 1
        json.dumps(reading.notes)
        if not m:
            assert plots == [] and reading.notes == {} and reading.bounds_run is None


def test_plots_of_the_kinds_that_draw():
    has_plots = {
        kind
        for kind in kinds()
        if workload_for(kind).plots(
            SimpleNamespace(
                scenario=load_scenario(str(SHIPPED[kind])),
                metrics=GOLDEN[str(SHIPPED[kind].relative_to(ROOT))],
                spans=pd.DataFrame(),
                links=pd.DataFrame(),
                cluster=SimpleNamespace(num_gpus=1),
            )
        )
    }
    assert {"cp_inference", "embedding_training", "ingestion"} <= has_plots


def _kind_literals(node) -> list[str]:
    """Kind names among a comparison operand (a constant, or a tuple/list/set of them)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and n.value in KIND_NAMES]


KIND_NAMES = set(kinds())


def test_core_code_never_switches_on_kind_names():
    """No module of sim/ outside sim/workloads/ compares with a kind name (`== "cp_inference"`,
    `in ("training", ...)`), matches on one, or keys a dict (a dispatch table) on one."""
    found = []
    for path in sorted((ROOT / "sim").rglob("*.py")):
        if (ROOT / "sim" / "workloads") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Compare):
                for operand in (node.left, *node.comparators):
                    names += _kind_literals(operand)
            elif isinstance(node, ast.Dict):
                names += [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in KIND_NAMES]
            elif isinstance(node, ast.MatchValue):
                names += _kind_literals(node.value)
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {name!r}" for name in names]
    assert not found, "core code switches on kind names:\n" + "\n".join(found)
