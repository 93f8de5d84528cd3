"""`kind: embedding_training` as a `Workload` (sim/workloads/base.py): DLRM training with sharded
embedding tables; its plot is the per-GPU load of the plan (sim/workloads/embedding/plots.py) and
it has a static plan for `dcsim plan`."""

from __future__ import annotations

from sim.workloads.base import Workload
from sim.workloads.embedding.sizing import embedding_estimate
from sim.workloads.embedding.workload import Config, plan_report, simulate

METRICS = {
    "iteration_s": "mean iteration time (every GPU done), s",
    "samples_per_s": "training samples per second over all GPUs, samples/s",
    "load_imbalance": "max / mean embedding kernel time over GPUs, ratio",
    "slow_tier_accesses_per_iteration": "embedding row reads served by tiers slower than HBM per iteration, count",
    "slow_tier_accesses_by_tier": "the same per tier, dict of counts",
    "hbm_lookups_per_iteration": "embedding row reads served by HBM per iteration, count",
    "hbm_bytes_per_gpu_max": "embedding bytes held in HBM by the fullest GPU, bytes",
    "embedding_kernel_s_per_gpu_max": "embedding kernel time per iteration of the busiest GPU, s",
    "embedding_kernel_s_per_gpu_mean": "embedding kernel time per iteration, mean over GPUs, s",
    "breakdown_s": "mean per GPU: waits and kernels of the iteration's steps, summing to iteration_s; s",
    "breakdown_s_critical_gpu": "the same for the GPU that finished each iteration last, s",
    "planner": "the sharding planner, name",
    "planner_estimate_s": "the planner's cost model of one iteration, s",
    "planner_estimate_breakdown_s": "the planner's estimate per step, s",
    "planner_estimate_error": "(planner estimate - simulated iteration) / simulated iteration, fraction",
    "planner_lower_bound_s": "lower bound of the most loaded GPU's cost, s",
    "planner_gap": "optimality gap of the plan against that bound, fraction",
    "planner_milp_gap": "the MILP solver's gap (RecShard; null otherwise), fraction",
    "min_hosts_for_capacity": "hosts needed to hold the tables with the placements, count",
    "all_to_all_bytes_per_iteration": "bytes of the index, pooled and gradient all-to-alls per iteration, bytes",
    "allreduce_bytes_per_iteration": "dense gradient bytes all-reduced per iteration, bytes",
    "tables": "embedding tables, count",
    "embedding_bytes": "bytes of all tables as stored, bytes",
    "dram_cache_hit_rate": "share of lookups to scm / ssd rows served by the host-DRAM cache (with workload.dram_cache), fraction",
    "plan": "per table: scheme, shards, ranks, placement, HBM / slow-tier bytes, estimated_s; dict",
}


class EmbeddingWorkload(Workload):
    kind = "embedding_training"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return embedding_estimate(config, hardware, network_model)

    def plots(self, result):
        m, name = result.metrics, result.scenario.name
        if not m.get("plan"):
            return []
        from sim.workloads.embedding.plots import embedding_load  # matplotlib: only when drawing

        iterations = result.scenario.workload.iterations
        return [
            (
                "embedding_load",
                lambda **kw: embedding_load(
                    m,
                    result.spans,
                    result.cluster.num_gpus,
                    iterations,
                    **{"title": f"{name}: embedding load per GPU", **kw},
                ),
            )
        ]

    def plan_report(self, scenario):
        return plan_report(scenario)


WORKLOAD = EmbeddingWorkload()
