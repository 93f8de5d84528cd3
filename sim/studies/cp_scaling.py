"""Small studies that run one scenario several times with overrides, for notebooks and plots.

- `with_overrides(scenario, overrides)`: a new validated Scenario from `--set`-style overrides
  (`{"hardware.nodes": 4}`), through the same path as the command line (errors are ScenarioErrors).
- `cp_scaling_runs(scenario, hosts, rings)`: the TTFT-vs-hosts study of context-parallel inference:
  for every host count the scenario runs with `hardware.nodes = hosts` and CP = all GPUs / TP (TP
  kept), once per ring algorithm (pass-KV, pass-Q). One host means CP = 1 (no ring), the baseline
  of ideal scaling. Plot the table with `sim.workloads.cp_inference.plots.cp_scaling`.
- `sweep_runs(scenario, key, values)`: one run per value of one key; a table of scalar metrics.

Heavier grids belong to `dcsim sweep` (sim/studies/sweep.py: parallel, resumable); these run in process.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from sim.runner import run
from sim.scenario.model import Scenario, apply_override, scenario_from_dict
from sim.studies.seeds import scalar_metrics
from sim.workloads import config_class

CP_INFERENCE = config_class("cp_inference")  # the study's kind, through the registry


def with_overrides(scenario: Scenario, overrides: dict) -> Scenario:
    data = scenario.model_dump(mode="json", exclude_none=True)
    for key, value in overrides.items():
        apply_override(data, key.split("."), value)
    return scenario_from_dict(data)


def cp_scaling_runs(
    scenario: Scenario, hosts: Iterable[int] = (1, 2, 4, 8), rings: Iterable[str] = ("pass-kv", "pass-q")
) -> pd.DataFrame:
    """One row per (hosts, ring): ttft_s, mfu, ring actually used, cp, tp, wall_s."""
    workload = scenario.workload
    if not isinstance(workload, CP_INFERENCE):
        raise ValueError(f"cp_scaling_runs needs a cp_inference scenario, got {scenario.kind!r}")
    gpn = scenario.hardware.gpus_per_node
    tp = workload.parallelism.tp or gpn
    rows = []
    for h in hosts:
        cp = h * gpn // tp
        for ring in ["none"] if cp == 1 else list(rings):
            over = {"hardware.nodes": int(h), "workload.parallelism.tp": tp, "workload.parallelism.cp": cp}
            if ring != "none":
                over["workload.ring"] = ring
            result = run(with_overrides(scenario, over))
            m = result.metrics
            for label in list(rings) if cp == 1 else [ring]:  # cp = 1: the common baseline
                rows.append(
                    {
                        "hosts": int(h),
                        "ring": label,
                        "ring_used": m.get("ring_algorithm"),
                        "cp": cp,
                        "tp": tp,
                        "ttft_s": m["ttft_s"],
                        "mfu": m.get("mfu"),
                        "wall_s": result.wall_s,
                    }
                )
    return pd.DataFrame(rows)


def sweep_runs(scenario: Scenario, key: str, values: Iterable, extra: dict | None = None) -> pd.DataFrame:
    """One run per value of `key` (plus fixed `extra` overrides): scalar and top-level text metrics
    (e.g. ingestion's `bounding_stage`) per row."""
    rows = []
    for value in values:
        result = run(with_overrides(scenario, {**(extra or {}), key: value}))
        rows.append(
            {
                key: value,
                "sim_time_s": result.sim_time_s,
                "wall_s": result.wall_s,
                "bottleneck": result.bottleneck["resource"],
                **scalar_metrics(result.metrics),
                **{k: v for k, v in result.metrics.items() if isinstance(v, str)},
            }
        )
    return pd.DataFrame(rows)
