"""`kind: training_campaign` as a `Workload` (sim/workloads/base.py): a long training job under
failures, checkpoints and restarts."""

from __future__ import annotations

from sim.workloads.base import PathReading, Workload
from sim.workloads.campaign.sizing import campaign_estimate
from sim.workloads.campaign.workload import Config, simulate

METRICS = {
    "interruptions": "unexpected + planned interruptions over the horizon, mean over replicas, count",
    "interruptions_std": "their standard deviation over replicas, count",
    "interruptions_per_replica": "interruptions of every replica, list of counts",
    "unexpected_interruptions": "failures, mean over replicas, count",
    "planned_interruptions": "planned maintenance interruptions, mean over replicas, count",
    "planned_absorbed": "planned interruptions absorbed by a restart already under way, mean, count",
    "interruptions_by_cause": "interruptions per failure cause, mean over replicas, counts",
    "effective_training_time_fraction": "useful training time / horizon, mean over replicas, fraction",
    "effective_training_time_fraction_std": "its standard deviation over replicas, fraction",
    "effective_training_time_fraction_ci95": "its 95% confidence interval, [low, high] fractions",
    "effective_training_time_fraction_min": "its minimum over replicas, fraction",
    "effective_training_time_fraction_max": "its maximum over replicas, fraction",
    "effective_training_time_fraction_per_replica": "its value for every replica, list of fractions",
    "lost_work_s": "training time rolled back per replica, mean, s",
    "lost_work_s_std": "its standard deviation over replicas, s",
    "useful_training_s": "training time kept per replica, mean, s",
    "useful_tokens": "tokens trained and kept (with a training job), tokens",
    "checkpoint_overhead_s": "time spent stalled for checkpoints per replica, mean, s",
    "recovery_s": "detection + restart + restore time per replica, mean, s",
    "checkpoints": "checkpoints taken per replica, mean, count",
    "checkpoint_write_s": "one checkpoint written to storage (simulated flows), s",
    "checkpoint_snapshot_s": "one snapshot into host memory (async mode), s",
    "checkpoint_stall_s": "what the job stalls per checkpoint, s",
    "restore_s": "one restore from storage, s",
    "detection_s": "failure detection time, s",
    "restart_s": "restart time after detection, s",
    "checkpoint_bytes": "bytes of one checkpoint, bytes",
    "checkpoint_bytes_per_gpu": "bytes each GPU writes per checkpoint, bytes",
    "checkpoint_mode": "blocking or async, name",
    "checkpoint_interval_s": "training time between checkpoints (whole iterations), s",
    "iterations_per_checkpoint": "iterations between checkpoints, count",
    "job_mtbf_s": "mean time between unexpected failures of the job, s",
    "expected_interruptions": "failure rates x horizon, count",
    "young_daly_interval_s": "sqrt(2 x stall x MTBF), s",
    "daly_interval_s": "Daly's higher-order optimum interval, s",
    "iteration_s": "iteration time used (simulated training run or given), s",
    "iteration_from": "where iteration_s came from (training or iteration_s), name",
    "training": "key metrics of the simulated training run, dict",
    "gpus": "GPUs of the job, count",
    "horizon_s": "simulated calendar time per replica, s",
    "replicas": "independent failure histories, count",
    "interval_scan": "with compare_intervals: one row per interval (effective fraction, delta_vs_best), list",
    "best_checkpoint_interval_s": "with compare_intervals: the interval of the best effective fraction, s",
    "best_effective_training_time_fraction": "with compare_intervals: that best effective fraction, fraction",
}


class CampaignWorkload(Workload):
    kind = "training_campaign"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return campaign_estimate(config, hardware, network_model)

    def read_critical_path(self, result, path):
        """The campaign as its traced replica lived it (`job` / `replica 0`): useful iterations,
        checkpoints, and the downtime after each failure by its cause (`recovery: <cause>`). The
        iterations are the work itself: what bounds the run is the largest loss."""
        spans = result.span_columns
        traced = "component" in spans and bool(((spans["component"] == "job") & (spans["track"] == "replica 0")).any())
        if path.empty or not traced:
            return PathReading(path)
        per_replica = result.metrics.get("effective_training_time_fraction_per_replica") or [None]
        return PathReading(
            path,
            seen_by=["job"],
            seen_on_track="replica 0",
            notes={"replica": 0, "effective_training_time_fraction": per_replica[0]},
            not_bounds=frozenset({"useful work"}),
        )


WORKLOAD = CampaignWorkload()
