"""`kind: trace_replay` as a `Workload` (sim/workloads/base.py): a measured trace replayed on modelled hardware."""

from __future__ import annotations

from sim.workloads.base import Workload
from sim.workloads.trace_replay.sizing import trace_replay_estimate
from sim.workloads.trace_replay.workload import Config, simulate

METRICS = {
    "step_s": "replayed time of each ProfilerStep (first begin to last end over the ranks), list of s",
    "iteration_s": "mean of step_s (with no steps: the whole replay), s",
    "measured_step_s": "the trace's own ProfilerStep durations (slowest rank), list of s",
    "measured_iteration_s": "mean of measured_step_s (None without steps), s",
    "replay_error": "iteration_s / measured_iteration_s - 1, fraction",
    "time_by_category_s": "replayed seconds per category (gemm, attention, embedding, elementwise, "
    "collective, other, gap), mean over ranks, dict of s",
    "measured_time_by_category_s": "the trace's seconds per category, mean over ranks, dict of s",
    "ranks": "ranks replayed, count",
    "nodes": "replayed graph nodes (ops, measured segments, kernels, collectives, marks), count",
    "collectives": "collective and send/recv nodes over all ranks, count",
    "unpriced_ops": "ops of a re-timed category kept as measured (no shapes or dtype recorded), count",
    "ignored": "names of Chakra nodes not replayed (metadata, memory load/store), list",
    "makespan_s": "first node to last node over all ranks, s",
}


class TraceReplayWorkload(Workload):
    kind = "trace_replay"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return trace_replay_estimate(config, hardware, network_model)


WORKLOAD = TraceReplayWorkload()
