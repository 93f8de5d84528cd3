"""Load a scenario, build the cluster, run the workload, collect a `RunResult`.

`run(scenario)` is the one entry point the CLI, sweeps, notebooks and validation use:

    from sim import load_scenario, run
    result = run(load_scenario("scenarios/allreduce-2x8-h100.yaml"))
    result.metrics["busbw_bytes_per_s"], result.spans (DataFrame of spans), result.links
    result.plot.timeline(), result.bottleneck          # sim/report/plots.py, sim/report/bottleneck.py

It refuses a scenario whose estimated cost exceeds the limits (sim/scenario/estimate.py), then runs
one workload here (its kind's `simulate`, sim/workloads/base.py) or several jobs on one cluster
(sim/tenancy.py). `RunResult` and its summary (the contract JSON object) live in sim/report/result.py;
`RunResult`, `jsonable` and `scenario_sha256` are re-exported here for callers.
"""

from __future__ import annotations

import time

from sim.cluster.cluster import Cluster
from sim.energy.meter import EnergyMeter
from sim.engine.gc_pauses import fewer_gc_pauses
from sim.engine.progress import drive
from sim.engine.simulation import Simulation
from sim.errors import ScenarioError
from sim.report.result import RunResult, dcsim_version, jsonable, resolved_yaml, scenario_sha256
from sim.scenario.estimate import DEFAULT_LIMITS, Limits, enforce
from sim.scenario.model import Scenario
from sim.tenancy import run_jobs
from sim.workloads import Workload, workload_for

__all__ = ["RunResult", "dcsim_version", "jsonable", "resolved_yaml", "run", "scenario_sha256"]


def run(scenario: Scenario, progress: bool = False, limits: Limits | None = DEFAULT_LIMITS) -> RunResult:
    """Simulate one scenario to completion (`progress`: a tqdm bar on stderr for long runs). A scenario
    whose estimated cost exceeds `limits` is refused first (sim/scenario/estimate.py; None: no limits)."""
    enforce(scenario, limits)
    with fewer_gc_pauses():  # sim/engine/gc_pauses.py
        if scenario.workloads is not None:  # several jobs sharing the cluster
            return run_jobs(scenario, progress)
        return _run_one(scenario, workload_for(scenario.workload.kind), progress)


def _run_one(scenario: Scenario, workload: Workload, progress: bool) -> RunResult:
    wall_start = time.perf_counter()
    sim = Simulation(seed=scenario.seed, span_limit=scenario.trace_limit)
    try:
        cluster = Cluster.build(
            sim, scenario.hardware, scenario.network_model, scenario.workload.host_pools(scenario.hardware)
        )
    except ValueError as exc:
        raise ScenarioError(str(exc), path="hardware.topology") from None
    meter = EnergyMeter.attach(sim, cluster, scenario)
    proc = sim.process(workload.simulate(sim, cluster, scenario.workload))
    drive(sim.env, proc, progress)
    metrics = jsonable(proc.value)
    power = meter.report(float(sim.now))
    metrics.update({k: v for k, v in jsonable(power.metrics(metrics)).items() if k not in metrics})
    return RunResult(
        scenario=scenario,
        metrics=metrics,
        sim_time_s=float(sim.now),
        wall_s=time.perf_counter() - wall_start,
        events=sim.env.events_processed,
        sim=sim,
        cluster=cluster,
        power=power,
    )
