"""Cost estimates before running, and the limits that refuse a scenario which would explode
(`dcsim check` prints them; `run` enforces them first).

Every estimate is counted from the scenario alone, in closed form (nothing is built: estimating a
10^9-flow all-to-all must itself be cheap). What is counted and what each item costs in memory is
`Estimate` (sim/engine/cost.py). Each workload kind counts its own part (`Workload.estimate`,
sim/workloads/base.py, in the kind's `sizing` module: a collective's schedule steps, cp_inference's
layer plan, ...); this module adds what every run has:

- `links`: directed topology links, counted from the shape (every GPU has NVSwitch, NIC and
  host-link duplexes; fabric links above the NICs; every leaf to every explicit spine; host tiers and
  the workload's host pools), and `route_factor`: the equal-cost paths a flow's entries spread over;
- `trace_limit`: spans kept at most;
- several jobs (`workloads:`): the sum over jobs, run twice (together and each alone), their flows
  at once adding up.

`wall_time_s` turns an estimate into seconds of wall time from rates measured on the shipped
scenarios (see the constants), on the machine they were measured on or, given its `speed` relative
to that one (sim/engine/speed_probe.py: the engine's event rate here over `REFERENCE_EVENTS_PER_S`),
on this one; `dcsim check` prints it beside events and flows, and `dcsim run` warns from it.

`Limits` are what `run` refuses up front (memory, events, simulated flows); `enforce` raises a
one-line ScenarioError with the estimate and the kind's hint (or "a smaller cluster" when the
topology dominates the memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware_models.units import format_bytes, format_duration
from sim.engine.cost import BYTES_PER_LINK, Estimate
from sim.errors import ScenarioError
from sim.scenario.jobs import job_host_pools, place_jobs, sub_hardware
from sim.workloads import workload_for

GIB = 2.0**30
# Wall time of a run, measured on the 34 shipped scenarios (`dcsim run --json`: wall_s / events, one
# process on a 2-core machine that may have been loaded): the median is ~55 us per processed event
# (15-130 us for 30 of them; 200-600 us in runs of a few hundred events, where building dominates,
# and in tiered_memory, whose epochs do numpy work per event). Building the cluster adds ~3 us per
# directed link (the 16K-GPU clos3, 107K links: ~0.3 s). Good to a factor of a few, not better.
EVENTS_PER_S = 1.8e4
# The machine on which these constants are right (sim/engine/speed_probe.py scales estimates by the
# probe's rate here over this): measured by benchmarks/estimate_calibration.py on a quiet 2-core Intel
# Xeon VM, whose probe ran 1.34M events/s and whose runs of 5 s or more (7 shipped scenarios) took
# 1/0.37 of their estimates in the median (0.23-0.51x): such a machine runs the probe at 1.34M / 0.37.
REFERENCE_EVENTS_PER_S = 3.58e6
BUILD_S_PER_LINK = 3e-6


@dataclass(frozen=True)
class Limits:
    """What `run` refuses up front. None disables a limit."""

    memory_bytes: float | None = 8 * GIB
    events: float | None = 1e9
    simulated_flows: float | None = 1e9


DEFAULT_LIMITS = Limits()


# ---------------------------------------------------------------------------------------------
# entry points


def estimate(scenario) -> Estimate:
    """The cost of running `scenario` (a validated sim.scenario.model.Scenario)."""
    hw = scenario.hardware
    if scenario.workloads is not None:
        est = Estimate(path="workloads", hint="fewer or smaller jobs")
        jobs = [
            _workload_estimate(job, sub_hardware(hw, len(hosts)), scenario.network_model)
            for job, hosts in zip(scenario.workloads, place_jobs(scenario.workloads, hw.nodes))
        ]
        for one in jobs:
            est.add(one, times=2)  # together, then alone
        for name in ("peak_flows", "listed_flows", "extra_bytes"):  # together: all at once
            setattr(est, name, sum(getattr(one, name) for one in jobs))
        est.notes = [n for one in jobs for n in one.notes]
        pools = job_host_pools(scenario.workloads, hw)
    else:
        est = _workload_estimate(scenario.workload, hw, scenario.network_model)
        pools = scenario.workload.host_pools(hw)
    est.links = topology_links(hw, pools)
    est.route_factor = route_factor(hw.topology)
    est.trace_limit = scenario.trace_limit
    return est


def enforce(scenario, limits: Limits | None = DEFAULT_LIMITS) -> Estimate:
    """Estimate and refuse (one-line ScenarioError with the estimate and a hint) past `limits`."""
    est = estimate(scenario)
    if limits is None:
        return est
    over = []
    if limits.memory_bytes is not None and est.memory_bytes > limits.memory_bytes:
        over.append(f"~{format_bytes(est.memory_bytes)} of memory (limit {format_bytes(limits.memory_bytes)})")
    if limits.events is not None and est.events > limits.events:
        over.append(f"{est.events:.2g} events (limit {limits.events:.2g})")
    if limits.simulated_flows is not None and est.simulated_flows > limits.simulated_flows:
        over.append(f"{est.simulated_flows:.2g} simulated flows (limit {limits.simulated_flows:.2g})")
    if over:
        topology_bound = est.links * BYTES_PER_LINK > 0.5 * est.memory_bytes
        path, hint = ("hardware.nodes", "a smaller cluster") if topology_bound else (est.path, est.hint)
        raise ScenarioError(
            f"refused before running: estimated {' and '.join(over)} "
            f"({est.peak_flows:.2g} flows at once, {est.links:.2g} links); try {hint}, "
            "or run anyway with `dcsim run --no-limits` (run(scenario, limits=None))",
            path=path,
        )
    return est


def wall_time_s(est: Estimate, speed: float = 1.0) -> float:
    """Seconds of wall time a run of this estimate takes, about (see EVENTS_PER_S; a kind whose
    events are lighter or heavier than the median says so, `Estimate.event_cost`; work that grows with
    something else, `Estimate.extra_work_s`), on a machine
    `speed` times as fast as the one the rates were measured on (sim/engine/speed_probe.py)."""
    return (est.events * est.event_cost / EVENTS_PER_S + est.extra_work_s + est.links * BUILD_S_PER_LINK) / speed


def machine_speed() -> float:
    """This machine's speed relative to the one the constants are right on (probed now, ~0.1 s)."""
    from sim.engine.speed_probe import speed_factor

    return speed_factor(REFERENCE_EVENTS_PER_S)


def estimate_lines(est: Estimate, speed: float | None = None) -> list[str]:
    """What `dcsim check` prints: the estimate with its wall time first (scaled to this machine when
    its `speed` relative to the reference machine is given, and said so)."""
    first, *rest = est.lines()
    wall = f"~{format_duration(wall_time_s(est, speed or 1.0))} wall time"
    if speed is not None:
        wall += f" on this machine (its engine runs {speed:.2g}x the reference machine's events/s)"
    return [f"estimate: {wall}, {first.removeprefix('estimate: ')}", *rest]


def topology_links(hw, pools=()) -> float:
    """Directed links of the cluster's topology, from its shape (see module docstring)."""
    gpus, hosts = hw.num_gpus, hw.nodes
    per_gpu = 6.0  # NVSwitch, NIC and host-link duplexes
    switch = 0.5 * gpus + 64  # fabric links above the NICs (measured 0.1-0.3 per GPU)
    topo = hw.topology
    if topo.kind in ("fat-tree", "rail-optimized") and not topo.spines_aggregated:
        leaves = hw.gpus_per_node if topo.kind == "rail-optimized" else hosts / (topo.hosts_per_leaf or 1)
        switch += 2.0 * leaves * (topo.spines or 16)  # every leaf to every explicit spine
    tiers = 2.0 * hosts * len(hw.memory_tiers)
    pool = sum(p.count * (2.0 + 2.0 * len(p.media)) for p in pools)
    return per_gpu * gpus + switch + tiers + pool


def route_factor(topo) -> float:
    """Equal-cost paths a flow is spread over (its incidence entries scale with them): 1 on one
    switch, clos3 and aggregated spines; min(spines, max_paths) over explicit spines; up to
    max_paths on tori and user graphs."""
    if topo.kind in ("fat-tree", "rail-optimized") and not topo.spines_aggregated and topo.ecmp == "even":
        return float(min(topo.spines or 16, topo.max_paths))
    if topo.kind in ("torus", "graph") and topo.ecmp == "even":
        return float(topo.max_paths)
    return 2.0 if topo.kind == "ring" else 1.0


def _workload_estimate(config, hw, network_model: str) -> Estimate:
    """The workload's own part (its kind's `estimate`)."""
    return workload_for(config.kind).estimate(config, hw, network_model)
