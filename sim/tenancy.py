"""Running several jobs on one cluster (a scenario with `workloads:`), and each of them alone.

`run_jobs(scenario)` builds one Simulation and one Cluster, places the jobs (sim/scenario/jobs.py), starts
every job's `simulate` as a process on its `ClusterView` at t = 0 and runs until all have finished.
Their flows share the network's links, so a job whose traffic crosses the links another job uses
(the same ToR uplinks, the same oversubscribed pod-core links) slows down.

To measure that, each job is then run alone on a fresh copy of the same cluster, with the same
seed and the same hosts (its random substreams are prefixed with its name, so it draws the same
numbers either way). Per job, `metrics.jobs.{name}` holds the workload's own metrics plus:
- `kind`, `hosts` (global host indices), `gpus`;
- `completion_s`: when its simulate returned in the shared run; `alone_completion_s`: the same alone;
- `slowdown_vs_alone` = completion_s / alone_completion_s (1 = unaffected by the other tenants).
Top-level metrics: `jobs_count`, `makespan_s`, and the cluster's power and energy (sim/energy/meter.py).

sim/runner.py dispatches here; this module does not import the runner (RunResult: sim/report/result.py).
"""

from __future__ import annotations

import time

from sim.cluster.cluster import Cluster
from sim.energy.meter import EnergyMeter
from sim.engine.progress import drive
from sim.engine.simulation import Simulation
from sim.errors import ScenarioError
from sim.report.result import RunResult, jsonable
from sim.scenario.jobs import ClusterView, JobSimulation, job_host_pools, place_jobs
from sim.workloads import workload_for


def _build(sim, scenario, pools) -> Cluster:
    try:
        return Cluster.build(sim, scenario.hardware, scenario.network_model, pools)
    except ValueError as exc:
        raise ScenarioError(str(exc), path="hardware.topology") from None


def _job(sim, cluster, job, host_ids: list[int], out: dict):
    """One job as a process: its simulate on its view; stores (metrics, completion time) in `out`."""
    job_sim = JobSimulation(sim, job.name)
    view = ClusterView.of(cluster, host_ids)
    view.sim = job_sim
    metrics = yield from workload_for(job.kind).simulate(job_sim, view, job)
    out[job.name] = (metrics, float(sim.now))


def _run_together(scenario, jobs_hosts, pools, progress: bool, metered: bool = True):
    sim = Simulation(seed=scenario.seed, span_limit=scenario.trace_limit if metered else 0)
    cluster = _build(sim, scenario, pools)
    meter = EnergyMeter(sim, cluster, scenario.hardware, pools) if metered else None
    out: dict = {}
    procs = [sim.process(_job(sim, cluster, job, hosts, out)) for job, hosts in jobs_hosts]
    drive(sim.env, sim.all_of(procs), progress)
    return sim, cluster, meter, out


def run_jobs(scenario, progress: bool = False) -> RunResult:
    wall_start = time.perf_counter()
    jobs = scenario.workloads
    placement = place_jobs(jobs, scenario.hardware.nodes)
    pools = job_host_pools(jobs, scenario.hardware)
    sim, cluster, meter, shared = _run_together(scenario, list(zip(jobs, placement)), pools, progress)
    sim_time_s = float(sim.now)
    per_job = {}
    for job, hosts in zip(jobs, placement):
        _, _, _, alone = _run_together(scenario, [(job, hosts)], pools, False, metered=False)
        metrics, done_s = shared[job.name]
        done_alone_s = alone[job.name][1]
        per_job[job.name] = {
            **jsonable(metrics),
            "kind": job.kind,
            "hosts": hosts,
            "gpus": len(hosts) * scenario.hardware.gpus_per_node,
            "completion_s": done_s,
            "alone_completion_s": done_alone_s,
            "slowdown_vs_alone": done_s / done_alone_s if done_alone_s > 0 else 1.0,
        }
    metrics = {"jobs": per_job, "jobs_count": len(jobs), "makespan_s": sim_time_s}
    power = meter.report(sim_time_s)
    metrics.update({k: v for k, v in jsonable(power.metrics(metrics)).items() if k not in metrics})
    return RunResult(
        scenario=scenario,
        metrics=metrics,
        sim_time_s=sim_time_s,
        wall_s=time.perf_counter() - wall_start,
        events=sim.env.events_processed,
        sim=sim,
        cluster=cluster,
        power=power,
    )
