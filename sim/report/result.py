"""The result of one run and how it is written down: `RunResult`, its JSON summary and provenance.

`RunResult` holds the scenario, the metrics (plain JSON types: `jsonable`), the clock and what the
run built (the Simulation with its span recorder, the Cluster with its network, the power report);
spans, the link table, plots (sim/report/plots.py `RunPlots`) and the bottleneck report
(sim/report/bottleneck.py, with the workload's own part) are computed when first asked for.
`summary()` is the contract JSON object of `dcsim run --json` and summary.json: scenario, kind,
metrics, sim_time_s, wall_s, events, dcsim_version, scenario_sha256 (of the resolved scenario,
`resolved_yaml`), profile and bottleneck.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from sim.cluster.cluster import Cluster
from sim.energy.meter import PowerReport
from sim.engine.gc_pauses import fewer_gc_pauses
from sim.engine.simulation import Simulation
from sim.report.bottleneck import run_bottleneck
from sim.report.columns import Columns
from sim.report.provenance import profile
from sim.scenario.model import Scenario

if TYPE_CHECKING:  # pandas: the `spans` and `links` tables, built when first asked for
    import pandas as pd


def dcsim_version() -> str:
    try:
        return version("dcsim")
    except PackageNotFoundError:
        return "0+unknown"


def jsonable(value: Any) -> Any:
    """Metrics -> plain JSON types (numpy scalars/arrays, tuples, non-finite floats as None)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)


def resolved_yaml(scenario: Scenario) -> str:
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)


def scenario_sha256(scenario: Scenario) -> str:
    return hashlib.sha256(json.dumps(scenario.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


@dataclass
class RunResult:
    scenario: Scenario
    metrics: dict
    sim_time_s: float
    wall_s: float
    events: int
    sim: Simulation = field(repr=False)
    cluster: Cluster = field(repr=False)
    power: PowerReport | None = field(default=None, repr=False)  # sim/energy/meter.py: power over time

    @cached_property
    def span_columns(self) -> Columns:
        """Every recorded span as columns (sim/engine/simulation.py `Recorder.columns`): what the
        bottleneck report and the kinds' readings of it compute on."""
        with fewer_gc_pauses():  # hundreds of thousands of rows after a run of millions of objects
            return Columns(self.sim.recorder.columns())

    @cached_property
    def spans(self) -> pd.DataFrame:
        """Every recorded span (component, track, name, start_s, end_s, bytes, flop, category)."""
        return self.span_columns.frame()

    @cached_property
    def links(self) -> pd.DataFrame:
        """Per-link bytes, busy time and utilisation over the run."""
        return self.cluster.network.link_table(self.sim_time_s)

    @cached_property
    def plot(self):
        """Plots of this run: `result.plot.timeline()`, `.utilisation()`, `.topology()` ..."""
        from sim.report.plots import RunPlots  # matplotlib: only when plotting

        return RunPlots(self)

    @cached_property
    def bottleneck(self) -> dict:
        """Critical path, bounding resource and utilisation per resource (sim/report/bottleneck.py)."""
        with fewer_gc_pauses():  # see span_columns
            return jsonable(run_bottleneck(self))

    def summary(self) -> dict:
        return {
            "scenario": self.scenario.name,
            "kind": self.scenario.kind,
            "metrics": self.metrics,
            "sim_time_s": self.sim_time_s,
            "wall_s": self.wall_s,
            "events": self.events,
            "dcsim_version": dcsim_version(),
            "scenario_sha256": scenario_sha256(self.scenario),
            "profile": profile(self.scenario),  # sim/report/provenance.py: profile entry/file, calibrated
            "bottleneck": self.bottleneck,
        }
