"""Cross-checks of an ingestion config against itself and the hardware: each failure is a one-line
ScenarioError naming the key path, the value and what is allowed."""

from __future__ import annotations

from sim.errors import ScenarioError


def _err(message: str, path: str, value) -> ScenarioError:
    return ScenarioError(message, path=f"workload.{path}", value=value)


def check_config(cfg, hardware) -> None:
    pre, ds, st = cfg.preprocessing, cfg.dataset, cfg.storage
    if cfg.warmup_s >= cfg.duration_s:
        raise _err(f"must be below duration_s ({cfg.duration_s:g} s)", "warmup_s", cfg.warmup_s)
    if st.replication > st.nodes:
        raise _err(f"cannot exceed storage.nodes ({st.nodes})", "storage.replication", st.replication)
    if (pre.cpu_s_per_sample is None) == (cfg.media is None):
        raise _err(
            "give exactly one of preprocessing.cpu_s_per_sample (tabular stages) or media (a video-curation pipeline)",
            "preprocessing.cpu_s_per_sample",
            pre.cpu_s_per_sample,
        )
    unknown = sorted(set(pre.memory_bytes_per_byte or {}) - set(pre.cpu_s_per_sample or {}))
    if unknown:
        raise _err(
            f"names no stage of cpu_s_per_sample ({', '.join(pre.cpu_s_per_sample or {}) or 'none'})",
            "preprocessing.memory_bytes_per_byte",
            unknown[0],
        )
    if cfg.disaggregated:
        _check_disaggregated(cfg)
    else:
        _check_on_trainer(cfg, hardware)
    if cfg.dedup.sessions == "fixed" and cfg.dedup.factor != int(cfg.dedup.factor):
        raise _err("sessions: fixed needs a whole number of samples per session", "dedup.factor", cfg.dedup.factor)
    if cfg.media is not None and cfg.dedup.factor != 1.0:
        raise _err("RecD dedup applies to tabular rows, not media pipelines; use 1.0", "dedup.factor", cfg.dedup.factor)
    if ds.partition_bytes * ds.compression < ds.bytes_per_sample:
        raise _err(
            f"a partition must hold at least one sample ({ds.bytes_per_sample / ds.compression:.0f} stored bytes)",
            "dataset.partition_bytes",
            ds.partition_bytes,
        )
    down = sum(f.count for f in cfg.faults if f.kind == "storage_node_down")
    if down >= st.replication:
        raise _err(
            f"{down} storage nodes down with replication {st.replication} could leave partitions "
            "with no live copy; take down fewer than `replication` nodes",
            "faults",
            down,
        )
    for i, f in enumerate(cfg.faults):
        if f.at_s >= cfg.duration_s:
            raise _err(f"must be before duration_s ({cfg.duration_s:g} s)", f"faults.{i}.at_s", f.at_s)
        if f.kind == "worker_crash" and not cfg.disaggregated:
            raise _err("worker_crash needs preprocessing.mode: disaggregated", f"faults.{i}.kind", f.kind)
        if f.kind == "worker_crash" and pre.workers != "auto" and f.count > pre.workers:
            raise _err(f"cannot exceed the {pre.workers} workers", f"faults.{i}.count", f.count)
        if f.kind == "storage_node_down" and f.count >= st.nodes:
            raise _err(f"must leave at least one of {st.nodes} storage nodes up", f"faults.{i}.count", f.count)


def _check_disaggregated(cfg) -> None:
    pre, w = cfg.preprocessing, cfg.preprocessing.worker
    if pre.workers is None:
        raise _err("disaggregated preprocessing needs a worker count or auto", "preprocessing.workers", None)
    if isinstance(pre.workers, int) and pre.workers < 1:
        raise _err("must be >= 1 or auto", "preprocessing.workers", pre.workers)
    a = pre.autoscale
    if a.initial_workers > a.max_workers:
        raise _err(
            f"cannot exceed autoscale.max_workers ({a.max_workers})",
            "preprocessing.autoscale.initial_workers",
            a.initial_workers,
        )
    if a.low_watermark >= a.high_watermark:
        raise _err(
            f"must be below high_watermark ({a.high_watermark})",
            "preprocessing.autoscale.low_watermark",
            a.low_watermark,
        )
    if pre.cores_per_batch > w.cores:
        raise _err(f"cannot exceed worker.cores ({w.cores})", "preprocessing.cores_per_batch", pre.cores_per_batch)
    if cfg.media is not None:
        if w.gpus < 1:
            raise _err(
                "a media pipeline runs shot detection, filters and captions on worker GPUs; set >= 1",
                "preprocessing.worker.gpus",
                w.gpus,
            )
        for path, model in (
            ("shot_model", cfg.media.shot_model),
            ("filter_model", cfg.media.filter_model),
            ("caption_model", cfg.media.caption_model),
        ):
            if getattr(w.gpu.peak, model.dtype, None) is None:
                raise _err(f"worker GPU {w.gpu.name} has no {model.dtype} peak", f"media.{path}.dtype", model.dtype)
    from sim.workloads.ingestion.data import TabularData

    need = cfg.dataset.partition_bytes if cfg.media is not None else TabularData.split_memory_bytes(cfg)
    if need > w.memory:
        raise _err(
            f"one split needs {need / 2**30:.1f} GiB of worker memory; raise worker.memory or lower "
            "dataset.partition_bytes",
            "preprocessing.worker.memory",
            w.memory,
        )


def _check_on_trainer(cfg, hardware) -> None:
    pre, tr = cfg.preprocessing, cfg.trainers
    if pre.workers is not None:
        raise _err(
            "on_trainer preprocessing runs on the trainer hosts (hardware.nodes); remove workers",
            "preprocessing.workers",
            pre.workers,
        )
    if "worker" in pre.model_fields_set:
        raise _err(
            "on_trainer preprocessing uses the trainer hosts' CPUs (hardware.host_cpu); remove worker",
            "preprocessing.worker",
            "...",
        )
    if cfg.media is not None:
        raise _err(
            "media pipelines need GPU workers: use preprocessing.mode: disaggregated", "preprocessing.mode", pre.mode
        )
    cores = hardware.host_cpu.cores * hardware.host_cpus
    if tr.training_cores >= cores:
        raise _err(
            f"must leave some of the trainer host's {cores} cores to preprocessing",
            "trainers.training_cores",
            tr.training_cores,
        )
    if pre.cores_per_batch > cores - tr.training_cores:
        raise _err(
            f"cannot exceed the {cores - tr.training_cores} cores left on a trainer host",
            "preprocessing.cores_per_batch",
            pre.cores_per_batch,
        )
