"""Multi-tenancy: several jobs on one cluster (`workloads:` in a scenario instead of `workload:`).

A job is a workload config with two more fields: `name` and `hosts`, the hosts it occupies:

    workloads:
      - {name: train, hosts: "0-3", kind: collective, ...}              # explicit: "0-3,8-11" or [0, 1, 2]
      - {name: serve, hosts: {count: 4, placement: spread}, kind: cp_inference, ...}

`place_jobs` is the scheduler: explicit host sets are reserved first (overlaps are errors), then the
jobs that ask for a count take free hosts in list order, `packed` (the first run of `count`
consecutive free hosts, else the lowest free ones: neighbours share ToRs and pods) or `spread`
(evenly strided over the free hosts: across ToRs and pods, the way a scheduler spreads for failure
domains). Each job's cross-checks run against `sub_hardware`: the cluster's hardware with `nodes` =
the job's host count, so "the product of the parallelism equals the GPUs" holds per job.

At run time a job sees a `ClusterView` (the same interface a workload gets from `Cluster`: devices,
hosts, num_gpus, nodes(ranks), topology, network, hardware) restricted to its hosts, and a
`JobSimulation` whose random substreams are prefixed with the job's name, so a job draws the same
numbers alone or beside others. All jobs share one Simulation, one network and therefore its links.
The runner (sim/tenancy.py) runs them together and alone to get each job's `slowdown_vs_alone`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Literal

from pydantic import Field, ValidationError, create_model, field_validator

from hardware_models.strict import StrictModel
from sim.cluster.cluster import Cluster
from sim.errors import ScenarioError
from sim.workloads import KINDS, WorkloadBase, config_class, kind_of
from sim.workloads.kind_union import KindUnion


class HostRequest(StrictModel):
    """A number of hosts, placed by the scheduler."""

    count: int = Field(ge=1)
    placement: Literal["packed", "spread"] = "packed"


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_host_set(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11] (ValueError on bad syntax or repeats)."""
    hosts: list[int] = []
    for part in str(text).split(","):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(f"{text!r} is not a host set; expected ranges like '0-3,8,10-11'")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"range {part.strip()!r} ends before it starts")
        hosts += range(lo, hi + 1)
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"{text!r} names a host twice")
    return hosts


HostSpec = HostRequest | list[int] | str


def _check_hosts(cls, v):
    """One clear message for every malformed `hosts` (before the union tries its members)."""
    if isinstance(v, str):
        parse_host_set(v)
    elif isinstance(v, list):
        if not v or len(set(v)) != len(v) or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in v):
            raise ValueError("a host list needs distinct host indices >= 0")
    elif isinstance(v, dict):
        try:
            return HostRequest.model_validate(v)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"{where}: {err['msg']} (hosts: {{count: N, placement: packed|spread}})") from None
    elif not isinstance(v, HostRequest):
        raise ValueError(
            "hosts must be a host set like '0-3,8', a list of host indices, or {count: N, placement: packed|spread}"
        )
    return v


def job_class(config_class):
    """The job config of a workload kind: its config class plus `name` and `hosts`."""
    return create_model(
        f"Job_{kind_of(config_class)}",
        __base__=config_class,
        __validators__={"_hosts": field_validator("hosts", mode="before")(_check_hosts)},
        name=(str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$", description="job name (metrics.jobs.NAME)")),
        hosts=(HostSpec, Field(description="hosts it occupies: '0-511', [0, 1], or {count, placement}")),
    )


def job_class_of(kind: object):
    """The job config class of `kind` (None for an unknown kind), built once per kind."""
    config = config_class(kind)
    return None if config is None else _job_class(config)


@cache
def _job_class(config):
    return job_class(config)


# one job of `workloads`: the union on `kind` of every kind's job class, imported by dispatch
JobConfig = Annotated[WorkloadBase, KindUnion(job_class_of, lambda: list(KINDS))]


# ---------------------------------------------------------------------------------------------
# placement and per-job checks


def _spread(free: list[int], count: int) -> list[int]:
    step = len(free) / count
    return [free[int(i * step)] for i in range(count)]


def _packed(free: list[int], count: int) -> list[int]:
    free_set = set(free)
    for start in free:
        if all(h in free_set for h in range(start, start + count)):
            return list(range(start, start + count))
    return free[:count]


def place_jobs(jobs, num_hosts: int) -> list[list[int]]:
    """Global host indices per job (in job order); ScenarioError on overlaps or shortage."""
    placed: dict[int, list[int]] = {}
    owner: dict[int, str] = {}
    names: set[str] = set()
    for i, job in enumerate(jobs):
        if job.name in names:
            raise ScenarioError("job names must be unique", path=f"workloads.{i}.name", value=job.name)
        names.add(job.name)
        if isinstance(job.hosts, HostRequest):
            continue
        hosts = parse_host_set(job.hosts) if isinstance(job.hosts, str) else list(job.hosts)
        bad = [h for h in hosts if h >= num_hosts]
        if bad:
            raise ScenarioError(
                f"host {bad[0]} does not exist: the cluster has hosts 0..{num_hosts - 1}",
                path=f"workloads.{i}.hosts",
                value=job.hosts,
            )
        clash = [h for h in hosts if h in owner]
        if clash:
            raise ScenarioError(
                f"host {clash[0]} is already used by job {owner[clash[0]]!r}; jobs may not overlap",
                path=f"workloads.{i}.hosts",
                value=job.hosts,
            )
        owner.update({h: job.name for h in hosts})
        placed[i] = hosts
    for i, job in enumerate(jobs):
        if not isinstance(job.hosts, HostRequest):
            continue
        free = [h for h in range(num_hosts) if h not in owner]
        if job.hosts.count > len(free):
            raise ScenarioError(
                f"asks for {job.hosts.count} hosts but only {len(free)} of {num_hosts} are free",
                path=f"workloads.{i}.hosts",
                value=job.hosts.model_dump(),
            )
        hosts = (_spread if job.hosts.placement == "spread" else _packed)(free, job.hosts.count)
        owner.update({h: job.name for h in hosts})
        placed[i] = hosts
    return [placed[i] for i in range(len(jobs))]


def sub_hardware(hardware, num_hosts: int):
    """The hardware as one job sees it: the same specs and topology, `nodes` = its host count."""
    return hardware.model_copy(update={"nodes": num_hosts})


def check_jobs(jobs, hardware) -> list[list[int]]:
    """Place the jobs and run each one's cross-checks on its share; error paths name `workloads.i`."""
    placement = place_jobs(jobs, hardware.nodes)
    for i, (job, hosts) in enumerate(zip(jobs, placement)):
        try:
            job.check(sub_hardware(hardware, len(hosts)))
        except ScenarioError as err:
            path = err.path or "workload"
            if path == "workload" or path.startswith("workload."):
                err.path = f"workloads.{i}" + path[len("workload") :]
            raise
    return placement


def job_host_pools(jobs, hardware) -> list:
    pools = [
        p
        for j, hosts in zip(jobs, place_jobs(jobs, hardware.nodes))
        for p in j.host_pools(sub_hardware(hardware, len(hosts)))
    ]
    names = [p.name for p in pools]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ScenarioError(
            f"two jobs attach a host pool named {dup[0]!r}; pools cannot be shared yet", path="workloads"
        )
    return pools


# ---------------------------------------------------------------------------------------------
# what a running job sees


class TopologyView:
    """The shared topology, with `hosts` and `devices` restricted to one job."""

    def __init__(self, topology, host_ids: list[int]) -> None:
        self._topology = topology
        self.hosts = [topology.hosts[h] for h in host_ids]
        self.devices = [d for devs in self.hosts for d in devs]

    def __getattr__(self, name):
        return getattr(self._topology, name)


@dataclass
class ClusterView(Cluster):
    """One job's share of a Cluster: its hosts' devices, renumbered from rank 0, on the shared network.
    `hardware` is sub_hardware (nodes = this job's host count), `topology` a TopologyView; node
    names (`tier_node`, `cpu_node`) take global host indices, as in `Device.host`."""

    host_ids: list[int] = field(default_factory=list)  # global index of each of the job's hosts

    @classmethod
    def of(cls, cluster, host_ids: list[int]) -> ClusterView:
        hosts = [cluster.hosts[h] for h in host_ids]
        return cls(
            cluster.sim,
            sub_hardware(cluster.hardware, len(host_ids)),
            TopologyView(cluster.topology, host_ids),
            cluster.network,
            [d for devs in hosts for d in devs],
            hosts,
            list(host_ids),
        )


class JobSimulation:
    """The shared Simulation as one job sees it: random substreams prefixed with the job's name."""

    def __init__(self, sim, job_name: str) -> None:
        self._sim = sim
        self.job_name = job_name

    def rng(self, name: str):
        return self._sim.rng(f"job:{self.job_name}/{name}")

    def __getattr__(self, name):
        return getattr(self._sim, name)
