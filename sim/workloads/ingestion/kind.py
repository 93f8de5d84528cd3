"""`kind: ingestion` as a `Workload` (sim/workloads/base.py): training-data ingestion; its plot is
the trainer buffers over time (sim/workloads/ingestion/plots.py), its part of the bottleneck report
the stage that bounds the pipeline in closed form."""

from __future__ import annotations

import re

import numpy as np

from sim.workloads.base import PathReading, Workload
from sim.workloads.ingestion.sizing import ingestion_estimate
from sim.workloads.ingestion.workload import Config, simulate

METRICS = {
    "trainer_samples_per_s": "samples the trainers consumed per second over [warmup_s, duration_s], samples/s",
    "trainer_demand_samples_per_s": "samples the trainers asked for per second, samples/s",
    "data_stall_fraction": "trainer time waiting for data (an empty buffer, or step copies outlasting compute), fraction",
    "preprocessing_workers": "workers running at the end (0 on_trainer), count",
    "workers_per_trainer_host": "preprocessing_workers / trainer hosts, ratio",
    "storage_read_bytes_per_s": "bytes read off the storage media per second, retries included, bytes/s",
    "samples_lost": "samples never delivered (faults), count",
    "mode": "where preprocessing runs (disaggregated, on_trainer), name",
    "utilisation": "per resource (worker cores, memory, GPUs, NICs, storage media, trainer NICs), fraction",
    "stage_capacity_samples_per_s": "closed-form throughput bound per resource, samples/s",
    "bounding_stage": "the stage with the lowest closed-form capacity (stage_capacity_samples_per_s), name",
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

    def read_critical_path(self, result, path):
        """The run as the trainer that finished it lived it: its training steps, and while it waited
        for a batch, what the path did meanwhile (workers preprocessing, reading, sending): the data
        stall, bounded by the closed-form bounding stage. The run is stall-bound as soon as its
        trainers stall (STALL_BOUND of the time)."""
        m = result.metrics
        if not m.get("bounding_stage") or path.empty:
            return PathReading(path)
        stage = m["bounding_stage"]
        utilisation = m.get("utilisation") or {}
        stall = m.get("data_stall_fraction") or 0.0
        return PathReading(
            path,
            seen_by=[_last_trainer(result.span_columns)],
            since_s=float(result.scenario.workload.warmup_s),
            seen_on_track="trainer",
            waiting_for=lambda resource, component, viewer: "stall",
            bounded_by={"stall": _stage_resource(stage)},
            utilisation={"cpu": utilisation["preprocessing_cpu"]} if "preprocessing_cpu" in utilisation else {},
            notes={
                "bounding_stage": stage,
                "stage_capacity_samples_per_s": (m.get("stage_capacity_samples_per_s") or {}).get(stage),
                "data_stall_fraction": stall,
            },
            bounds_run="stall" if stall >= STALL_BOUND else None,
        )


TRAINER = re.compile(r"h\d+")  # a trainer host's component
STALL_BOUND = 0.01  # a path this much stalled: the data pipeline, not the trainer, sets the pace


def _last_trainer(spans) -> str:
    """The trainer host whose last span ends last (the first such span among equal ends); `spans`:
    Columns."""
    if "component" not in spans:
        return ""
    components = spans["component"].tolist()
    trainer = {c: TRAINER.fullmatch(str(c)) is not None for c in set(components)}
    rows = np.flatnonzero(np.fromiter((trainer[c] for c in components), dtype=bool, count=len(components)))
    if not len(rows):
        return ""
    return str(components[rows[int(np.argmax(spans["end_s"][rows]))]])


def _stage_resource(stage: str) -> str:
    """The resource key (sim/report/resources.py) of a closed-form stage (`stage_capacity_samples_per_s`)."""
    for part, resource in (("trainer", "trainer"), ("cpu", "cpu"), ("gpu", "compute"), ("nic", "nic")):
        if part in stage:
            return resource
    return "storage" if stage.startswith("storage") else stage


WORKLOAD = IngestionWorkload()
