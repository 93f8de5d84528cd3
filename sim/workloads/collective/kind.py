"""`kind: collective` as a `Workload` (sim/workloads/base.py): nccl-tests-like collective benchmarks."""

from __future__ import annotations

from sim.workloads.base import Workload
from sim.workloads.collective.sizing import collective_estimate
from sim.workloads.collective.workload import Config, simulate

METRICS = {
    "time_s": "time of the collective (of the largest size with a list of sizes), s",
    "algbw_bytes_per_s": "algorithm bandwidth = bytes / time_s (nccl-tests), bytes/s",
    "busbw_bytes_per_s": "bus bandwidth = algbw x bus factor (2(n-1)/n all-reduce, (n-1)/n others), bytes/s",
    "algorithm": "the algorithm that ran (auto: the one chosen), name",
    "ranks": "ranks in the group, count",
    "op": "the collective operation, name",
    "per_size": "with a list of sizes: one row per size (bytes, time_s, algbw, busbw, algorithm), list",
}


class CollectiveWorkload(Workload):
    kind = "collective"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return collective_estimate(config, hardware, network_model)


WORKLOAD = CollectiveWorkload()
