"""`kind: ingestion` — training-data ingestion: disaggregated preprocessing (DPP, arXiv 2108.09373),
RecD dedup (arXiv 2211.05239) and a video-curation variant, all on one stage/worker machinery.

Storage nodes (a host pool `storage{k}` with a medium node `storage{k}/{medium}` each) serve splits;
a master hands them out; preprocessing workers read, decompress/decode/transform (or decode, shot-
split, filter, caption, encode) and batch them; the cluster's hosts are the trainers, pulling
batches into bounded buffers at their demand rate. `mode: disaggregated` runs the workers on a host
pool `preproc{k}` on the cluster network; `mode: on_trainer` runs them on the trainer hosts' own
cores (hardware.host_cpu x host_cpus, minus `trainers.training_cores` kept by training), reading
straight into the trainer. There they share the host with training: where the hosts list a DRAM
tier (`hardware.memory_tiers`, kind ddr), each batch's CPU stages move `memory_bytes_per_byte` x
its decoded bytes as a flow DRAM -> CPU, and each trainer step copies its batch DRAM -> PCIe ->
GPUs; all these flows share the DRAM link max-min fairly (the network's mechanism), so a stage
lasts until its cores and its memory traffic are both done and a step until its compute and its
copies are. The training job's own traffic (`trainers.network_bytes_per_sample`, any mode) flows
to the next trainer host during each step over the NICs the storage reads and batches arrive on.
The stall then is no closed form of core counts; `stage_capacity_samples_per_s.host_memory` is
the DRAM bound alone. Fields: config.py; data models: data.py (tabular + RecD), media.py (video);
machinery: pipeline.py (workers), parts.py (storage, master, trainers), control.py (autoscaling,
faults, the buffer trace), levels.py (lean containers).

Metrics (rates and fractions over [warmup_s, duration_s]):
- contract: `trainer_samples_per_s`, `trainer_demand_samples_per_s`, `data_stall_fraction` (trainer
  time waiting on an empty buffer, or for a step's flows beyond its compute), `preprocessing_workers`
  (running at the end; 0 on_trainer),
  `storage_read_bytes_per_s` (bytes off the media, retries included), `samples_lost`;
- `utilisation`: per resource (worker cores, memory, GPUs, NICs; storage media and NICs; trainer NICs);
- `stage_capacity_samples_per_s` (closed forms per resource, for comparison) and `bottleneck`;
- `exactly_once`: the ledger's counts (delivered, duplicated, pending, requeued, lost);
- `dedup`: measured ratios without/with RecD for storage, bytes read, bytes sent, preprocessing work;
- `autoscale` (workers: auto): `settle_time_s` from the buffer trace, scaling decisions;
- `buffer_trace`: rows [t_s, buffer_fill, stall_fraction, workers, core_utilisation];
- `faults`: crashes, storage read retries, wasted bytes.
"""

from __future__ import annotations

import numpy as np

from sim.engine.compute import Device
from sim.workloads.ingestion.config import Config
from sim.workloads.ingestion.control import TRACE_COLUMNS, Autoscaler, BufferMonitor, inject_faults, settle_time_s
from sim.workloads.ingestion.data import TabularData
from sim.workloads.ingestion.ledger import SampleLedger
from sim.workloads.ingestion.media import VideoData
from sim.workloads.ingestion.parts import Credits, Master, Storage, Trainer, Window, WindowedLinkBytes
from sim.workloads.ingestion.pipeline import Pipeline, PipelineSettings, Worker

__all__ = ["Config", "simulate", "stage_capacities"]


def build_data(config: Config, seed: int):
    if config.media is not None:
        return VideoData(config, config.media, config.preprocessing.worker.gpu, seed)
    return TabularData(config, seed)


def _workers(sim, cluster, config: Config) -> list[Worker]:
    pre, hw = config.preprocessing, cluster.hardware
    if not config.disaggregated:
        cores = hw.host_cpu.cores * hw.host_cpus - config.trainers.training_cores
        dram = config.host_memory_tier(hw)
        workers = []
        for h, nodes in enumerate(cluster.topology.hosts):
            w = Worker(h, f"h{h}", list(nodes), cores, hw.host_cpu.memory * hw.host_cpus, [], local_trainer=h)
            if dram is not None:
                w.memory_flow = (cluster.tier_node(h, dram.name), cluster.cpu_node(h))
            workers.append(w)
        return workers
    spec = pre.worker
    return [
        Worker(
            k,
            name,
            [name],
            spec.cores,
            spec.memory,
            [Device(sim, f"{name}/g{j}", spec.gpu, -1) for j in range(spec.gpus)],
        )
        for k, name in enumerate(cluster.topology.pools["preproc"])
    ]


def _step_flows(cluster, config: Config):
    """batch -> the flows of a trainer step (None when there are none): on_trainer with a DRAM
    tier, the batch's host-to-device copies (DRAM -> PCIe -> each of the host's GPUs, an equal
    share each); with `trainers.network_bytes_per_sample`, the job's own traffic from each GPU to
    its peer on the next host."""
    hosts, dram = cluster.topology.hosts, config.host_memory_tier(cluster.hardware)
    per_sample = config.trainers.network_bytes_per_sample if len(hosts) > 1 else 0.0
    if dram is None and not per_sample:
        return lambda h: None

    def flows(h: int):
        gpus, nxt = hosts[h], hosts[(h + 1) % len(hosts)]
        copies = [] if dram is None else [(cluster.tier_node(h, dram.name), g, 0.0) for g in gpus]
        peers = [(g, p, 0.0) for g, p in zip(gpus, nxt)] if per_sample else []

        def of(batch):
            copy, own = batch.bytes_out / len(gpus), batch.samples * per_sample / len(gpus)
            return [(s, d, copy) for s, d, _ in copies] + [(s, d, own) for s, d, _ in peers]

        return of

    return flows


def simulate(sim, cluster, config: Config):
    pre, tr, hw = config.preprocessing, config.trainers, cluster.hardware
    window = Window(config.warmup_s, config.duration_s)
    data = build_data(config, int(sim.rng("dataset").integers(2**62)))
    storage = Storage(
        sim,
        cluster.network,
        cluster.topology.pools["storage"],
        config.storage.media.name,
        config.storage.replication,
        config.storage.bytes_per_access,
        pre.service_cv,
    )
    ledger = SampleLedger()
    master = Master(sim, data, ledger)
    stores = [Credits(sim.env) for _ in range(1 if config.disaggregated else hw.nodes)]
    step_flows = _step_flows(cluster, config)
    trainers = [
        Trainer(
            sim,
            h,
            list(nodes),
            tr.demand_samples_per_s_per_host,
            tr.buffer_batches,
            stores[h % len(stores)],
            window,
            cluster.network,
            step_flows(h),
        )
        for h, nodes in enumerate(cluster.topology.hosts)
    ]
    for _ in range(tr.buffer_batches):
        for t in trainers:
            t.credits.put(t.index)
    workers = _workers(sim, cluster, config)
    settings = PipelineSettings(
        pre.service_cv,
        pre.cores_per_batch,
        pre.splits_in_flight,
        pre.heartbeat_timeout_s,
        pre.autoscale.startup_s,
        pre.output_batches,
    )
    pipeline = Pipeline(
        sim,
        cluster.network,
        data,
        storage,
        master,
        trainers,
        workers,
        (lambda w: stores[0]) if config.disaggregated else (lambda w: stores[w.local_trainer]),
        settings,
        window,
    )
    auto = pre.workers == "auto"
    for w in workers[: pre.autoscale.initial_workers] if auto else workers:
        pipeline.start(w)
    for t in trainers:
        t.start()
    controller = Autoscaler(sim, pipeline, pre.autoscale) if auto else None
    monitor = BufferMonitor(sim, pipeline, pre.autoscale.interval_s, controller)
    sim.process(monitor.run())
    inject_faults(sim, pipeline, storage, config.faults)
    link_bytes = WindowedLinkBytes(cluster.topology.num_links, window)
    cluster.network.traffic_observers.append(link_bytes)
    yield sim.timeout(config.warmup_s)
    start = {"storage_bytes": storage.bytes_read, "links": link_bytes}
    yield sim.timeout(config.duration_s - config.warmup_s)
    for t in trainers:
        t.close()
    pipeline.close()
    return _metrics(config, cluster, pipeline, monitor, controller, start)


def _metrics(config: Config, cluster, pipeline: Pipeline, monitor, controller, start) -> dict:
    hw, w_s = cluster.hardware, pipeline.window.length_s
    trainers = pipeline.trainers
    demand = config.trainers.demand_samples_per_s_per_host * hw.nodes
    running = len(pipeline.active()) if config.disaggregated else 0
    exactly_once = pipeline.master.ledger.reconcile(pipeline.pending_ranges())
    caps = stage_capacities(config, hw, pipeline.data)
    metrics = {
        "trainer_samples_per_s": sum(t.samples for t in trainers) / w_s,
        "trainer_demand_samples_per_s": demand,
        "data_stall_fraction": float(np.mean([t.stall_s for t in trainers])) / w_s,
        "preprocessing_workers": running,
        "storage_read_bytes_per_s": (pipeline.storage.bytes_read - start["storage_bytes"]) / w_s,
        "samples_lost": exactly_once["samples_lost"],
        "mode": config.preprocessing.mode,
        "workers_per_trainer_host": running / hw.nodes,
        "utilisation": _utilisation(config, cluster, pipeline, start["links"]),
        "stage_capacity_samples_per_s": caps,
        "bounding_stage": min(caps, key=caps.get),
        "exactly_once": exactly_once,
        "faults": {
            "worker_crashes": pipeline.crashes,
            "storage_read_retries": pipeline.storage.retries,
            "storage_degraded_reads": pipeline.storage.degraded_reads,
            "storage_bytes_wasted": pipeline.storage.bytes_wasted,
            "sent_bytes_wasted": pipeline.bytes_sent_wasted,
        },
        "totals": {
            "storage_read_bytes": pipeline.storage.bytes_read,
            "bytes_sent": pipeline.bytes_sent,
            "bytes_delivered": sum(t.bytes_received for t in trainers),
            "batches_delivered": pipeline.batches_sent,
        },
        "buffer_trace_columns": TRACE_COLUMNS,
        "buffer_trace": [r.as_list() for r in monitor.trace],
    }
    if config.media is None:
        metrics["dedup"] = _ratios(pipeline.counters)
    else:
        c = pipeline.counters
        metrics["media"] = {k: c.get(k, 0.0) for k in ("clips", "clips_kept", "video_s")}
        metrics["media"]["video_hours_per_day"] = metrics["trainer_samples_per_s"] * config.media.video_s * 24
    if controller is not None:
        low = config.preprocessing.autoscale.low_watermark
        metrics["autoscale"] = {
            "settle_time_s": settle_time_s(monitor.trace, low),
            "workers_stable_from_s": controller.changes[-1][0] if controller.changes else 0.0,
            "decisions": [[t, n] for t, n in controller.changes],
        }
    return metrics


def _ratios(c: dict) -> dict:
    def ratio(key):
        return c[f"{key}_raw"] / c[key] if c.get(key) else None

    return {
        "storage_bytes_ratio": ratio("stored_bytes"),
        "read_bytes_ratio": ratio("read_bytes"),
        "sent_bytes_ratio": ratio("sent_bytes"),
        "preprocessing_work_ratio": ratio("work_core_s"),
    }


def _utilisation(config: Config, cluster, pipeline: Pipeline, link_bytes) -> dict:
    topo, window = cluster.topology, pipeline.window
    cluster.network.settle()  # the traffic observers' bytes up to the last update
    moved = link_bytes.bytes
    used = [w for w in pipeline.workers if w.alive_s > 0]
    alive_s = sum(w.alive_s for w in used)

    def links(pred) -> float | None:
        ids = [i for i in range(topo.num_links) if pred(topo.link_src[i], topo.link_dst[i], topo.link_kind[i])]
        if not ids:
            return None
        return float(np.mean(moved[ids] / (topo.capacity[ids] * window.length_s)))

    storage = set(topo.pools["storage"])
    workers = {w.name for w in used} if config.disaggregated else set()
    gpus = set(topo.devices)
    out = {
        "preprocessing_cpu": sum(w.cores_busy.window_area() for w in used)
        / sum(w.cores_total * w.alive_s for w in used)
        if alive_s
        else 0.0,
        "preprocessing_memory": sum(w.memory_used.window_area() for w in used)
        / sum(w.memory_total * w.alive_s for w in used)
        if alive_s
        else 0.0,
        "storage_media": links(lambda s, d, k: k == "memory" and d in storage),
        "storage_nic_tx": links(lambda s, d, k: k == "nic" and s in storage),
        "trainer_nic_rx": links(lambda s, d, k: k == "nic" and d in gpus),
    }
    if workers:
        out["preprocessing_nic_rx"] = links(lambda s, d, k: k == "nic" and d in workers)
        out["preprocessing_nic_tx"] = links(lambda s, d, k: k == "nic" and s in workers)
    gpu_stages = [s.name for s in pipeline.data.stages if s.resource == "gpu"]
    if gpu_stages and alive_s:
        out["preprocessing_gpu"] = sum(pipeline.stage_busy_s[s] for s in gpu_stages) / (
            config.preprocessing.worker.gpus * alive_s
        )
    return out


def stage_capacities(config: Config, hardware, data) -> dict[str, float]:
    """Closed-form samples/s each resource could sustain alone (the pipeline can never beat the
    smallest): cores / CPU-seconds per sample, GPUs / GPU-seconds, media bandwidth / (bytes +
    accesses x bytes-per-access), NIC bandwidth / bytes per sample (trainer NICs: with the job's own
    traffic), host DRAM read capacity / (memory
    bytes of the stages + the trainer's copy) per sample (on_trainer with a DRAM tier), and trainer
    demand."""
    pre, st = config.preprocessing, config.storage
    mean = data.mean_per_sample()
    if config.disaggregated:
        n = pre.autoscale.max_workers if pre.workers == "auto" else pre.workers
        cores, gpus, nic = pre.worker.cores, pre.worker.gpus, pre.worker.nic.achieved_bytes_per_s
    else:
        n, gpus = hardware.nodes, 0
        cores = hardware.host_cpu.cores * hardware.host_cpus - config.trainers.training_cores
    per_stage = {"cpu": 0.0, "gpu": 0.0}
    for stage, s in zip(data.stages, mean["stage_s"]):
        per_stage[stage.resource] += s
    caps = {"trainer_demand": config.trainers.demand_samples_per_s_per_host * hardware.nodes}
    if per_stage.get("cpu"):
        caps["preprocessing_cpu"] = n * cores / per_stage["cpu"]
    if per_stage.get("gpu"):
        caps["preprocessing_gpu"] = n * gpus / per_stage["gpu"]
    medium = st.medium_link_spec()
    caps["storage_media"] = st.nodes * medium.bandwidth / (mean["read_bytes"] + mean["accesses"] * st.bytes_per_access)
    caps["storage_nic"] = st.nodes * st.nic.achieved_bytes_per_s / mean["read_bytes"]
    trainer_nic = hardware.nodes * hardware.gpus_per_node * hardware.nic.achieved_bytes_per_s
    own = config.trainers.network_bytes_per_sample if hardware.nodes > 1 else 0.0  # the job's own traffic
    if config.disaggregated:
        caps["preprocessing_nic_rx"] = n * nic / mean["read_bytes"]
        if mean["bytes_out"] > 0:
            caps["preprocessing_nic_tx"] = n * nic / mean["bytes_out"]
            caps["trainer_nic_rx"] = trainer_nic / (mean["bytes_out"] + own)
    else:
        caps["trainer_nic_rx"] = trainer_nic / (mean["read_bytes"] + own)
    dram = config.host_memory_tier(hardware)
    if dram is not None:  # preprocessing's memory traffic and the trainer's copies share each host's DRAM
        from hardware_models.topology import tier_read_capacity

        caps["host_memory"] = n * tier_read_capacity(dram) / (mean.get("memory_bytes", 0.0) + mean["bytes_out"])
    return caps
