"""Load a scenario, build the cluster, run the workload, collect a `RunResult`.

`run(scenario)` is the one entry point the CLI, sweeps, notebooks and validation use:

    from sim import load_scenario, run
    result = run(load_scenario("scenarios/allreduce-2x8-h100.yaml"))
    result.metrics["busbw_bytes_per_s"], result.spans (DataFrame of spans), result.links
    result.plot.timeline(), result.bottleneck          # sim/report/plots.py, sim/report/bottleneck.py

`RunResult.summary()` is the contract JSON object of DESIGN.md.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sim.cluster.cluster import Cluster
from sim.energy.meter import EnergyMeter, PowerReport
from sim.engine.simulation import Simulation
from sim.engine.progress import drive
from sim.errors import ScenarioError
from sim.scenario.estimate import DEFAULT_LIMITS, Limits, enforce
from sim.report.provenance import profile
from sim.scenario.model import Scenario
from sim.workloads import module_for


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
    power: PowerReport | None = field(default=None, repr=False)     # sim/energy/meter.py: power over time

    @cached_property
    def spans(self) -> pd.DataFrame:
        """Every recorded span (component, track, name, start_s, end_s, bytes, flop, category)."""
        return self.sim.recorder.frame()

    @cached_property
    def links(self) -> pd.DataFrame:
        """Per-link bytes, busy time and utilisation over the run."""
        return self.cluster.network.link_table(self.sim_time_s)

    @cached_property
    def plot(self):
        """Plots of this run: `result.plot.timeline()`, `.utilisation()`, `.topology()` ..."""
        from sim.report.plots import RunPlots
        return RunPlots(self)

    @cached_property
    def bottleneck(self) -> dict:
        """Critical path, bounding resource and utilisation per resource (sim/report/bottleneck.py)."""
        from sim.report.bottleneck import bottleneck_report
        return jsonable(bottleneck_report(self.spans, self.links, self.cluster.topology, self.sim_time_s,
                                          self.sim.recorder.dropped))

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
            "profile": profile(self.scenario),         # sim/report/provenance.py: profile entry/file, calibrated
            "bottleneck": self.bottleneck,
        }


def run(scenario: Scenario, progress: bool = False, limits: Limits | None = DEFAULT_LIMITS) -> RunResult:
    """Simulate one scenario to completion (`progress`: a tqdm bar on stderr for long runs). A scenario
    whose estimated cost exceeds `limits` is refused first (sim/scenario/estimate.py; None: no limits)."""
    enforce(scenario, limits)
    if scenario.workloads is not None:            # several jobs sharing the cluster
        from sim.tenancy import run_jobs
        return run_jobs(scenario, progress)
    module = module_for(scenario.workload.kind)
    with _fewer_gc_pauses():
        return _run_one(scenario, module, progress)


@contextlib.contextmanager
def _fewer_gc_pauses(young_threshold: int = 50_000):
    """A simulation allocates many long-lived objects (events, spans, routes): the objects that
    exist before it are frozen out of the collector and young collections run 50x less often;
    both are restored afterwards (the collector stays on: reference cycles are still freed)."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(young_threshold, thresholds[0]), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _run_one(scenario: Scenario, module, progress: bool) -> RunResult:
    wall_start = time.perf_counter()
    sim = Simulation(seed=scenario.seed, span_limit=scenario.trace_limit)
    try:
        cluster = Cluster.build(sim, scenario.hardware, scenario.network_model,
                                scenario.workload.host_pools(scenario.hardware))
    except ValueError as exc:
        raise ScenarioError(str(exc), path="hardware.topology") from None
    meter = EnergyMeter.attach(sim, cluster, scenario)
    gc.freeze()             # the cluster and the meter live all run: out of the collector's scans too
    proc = sim.process(module.simulate(sim, cluster, scenario.workload))
    drive(sim.env, proc, progress)
    metrics = jsonable(proc.value)
    power = meter.report(float(sim.now))
    metrics.update({k: v for k, v in jsonable(power.metrics(metrics)).items() if k not in metrics})
    return RunResult(scenario=scenario, metrics=metrics, sim_time_s=float(sim.now),
                     wall_s=time.perf_counter() - wall_start, events=sim.env.events_processed,
                     sim=sim, cluster=cluster, power=power)
