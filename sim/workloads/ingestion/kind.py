"""`kind: ingestion` as a `Workload` (sim/workloads/base.py): training-data ingestion; its plot is
the trainer buffers over time (sim/workloads/ingestion/plots.py), its part of the bottleneck report
the stage that bounds the pipeline in closed form."""

from __future__ import annotations

from sim.workloads.base import Workload
from sim.workloads.ingestion.sizing import ingestion_estimate
from sim.workloads.ingestion.workload import Config, simulate

METRICS = {
    "trainer_samples_per_s": "samples the trainers consumed per second over [warmup_s, duration_s], samples/s",
    "trainer_demand_samples_per_s": "samples the trainers asked for per second, samples/s",
    "data_stall_fraction": "trainer time waiting on an empty buffer, fraction",
    "preprocessing_workers": "workers running at the end (0 on_trainer), count",
    "workers_per_trainer_host": "preprocessing_workers / trainer hosts, ratio",
    "storage_read_bytes_per_s": "bytes read off the storage media per second, retries included, bytes/s",
    "samples_lost": "samples never delivered (faults), count",
    "mode": "where preprocessing runs (disaggregated, on_trainer), name",
    "utilisation": "per resource (worker cores, memory, GPUs, NICs, storage media, trainer NICs), fraction",
    "stage_capacity_samples_per_s": "closed-form throughput bound per resource, samples/s",
    "bottleneck": "the resource with the lowest stage capacity, name",
    "exactly_once": "the ledger's counts: delivered, duplicated, pending, requeued, lost; samples",
    "faults": "worker crashes, storage read retries, wasted bytes; counts and bytes",
    "totals": "storage bytes read, bytes sent and other totals over the run, bytes",
    "dedup": "with RecD: ratios without/with dedup for storage, bytes read, bytes sent, work; ratios",
    "media": "video curation: clips, clips kept, video seconds, video hours per day",
    "autoscale": "workers: auto: settle_time_s from the buffer trace and the scaling decisions",
    "buffer_trace": "one row per control interval: t_s, buffer_fill, stall_fraction, workers, core_utilisation",
    "buffer_trace_columns": "the column names of buffer_trace, list",
}


class IngestionWorkload(Workload):
    kind = "ingestion"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return ingestion_estimate(config, hardware, network_model)

    def plots(self, result):
        m, name = result.metrics, result.scenario.name
        if not m.get("buffer_trace"):
            return []
        from sim.workloads.ingestion.plots import ingestion_buffers  # matplotlib: only when drawing

        return [("ingestion_buffers", lambda **kw: ingestion_buffers(m, **{"title": f"{name}: buffers", **kw}))]

    def bottleneck(self, result):
        """The pipeline stage that bounds throughput in closed form, beside the simulated critical path."""
        m = result.metrics
        if not m.get("bottleneck"):
            return {}
        capacity = m.get("stage_capacity_samples_per_s") or {}
        return {
            "pipeline_stage": m["bottleneck"],
            "stage_capacity_samples_per_s": capacity.get(m["bottleneck"]),
            "data_stall_fraction": m.get("data_stall_fraction"),
        }


WORKLOAD = IngestionWorkload()
