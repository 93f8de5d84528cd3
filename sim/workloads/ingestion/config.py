"""Scenario fields of `workload.kind: ingestion` (the names of the issue are fixed; more are added).

```yaml
workload:
  kind: ingestion
  dataset: {samples: 100_000_000, bytes_per_sample: 16_000, columns: 800, columns_read: 0.3,
            compression: 3.0, partition_bytes: "256 MiB"}
  storage: {nodes: 40, media: hdd, replication: 3, nic: {bandwidth: "25 Gbit/s"}}
  preprocessing:
    mode: disaggregated        # on_trainer | disaggregated
    workers: auto              # a number, or auto (a controller sizes the pool from buffer levels)
    worker: {cores: 32, memory: "256 GiB", nic: {bandwidth: "25 Gbit/s"}}
    cpu_s_per_sample: {decode: 2.0e-4, transform: 6.0e-4}   # stage -> core-seconds per sample
  trainers: {demand_samples_per_s_per_host: 200_000}      # trainers are the cluster's hosts
  dedup: 1.0                   # RecD: samples per session (values per distinct value); 1 = none
  faults: []                   # [{kind: worker_crash, at_s: 30, count: 4}, {kind: storage_node_down, at_s: 60}]
  duration_s: 120
```
Sizes are stored (compressed) bytes unless named otherwise: `bytes_per_sample` is one sample
uncompressed with all columns, a partition holds `partition_bytes` of compressed rows, a job reads
`columns_read` of the columns. `media:` (see media_pipeline.py) replaces `cpu_s_per_sample` with the
stages of a video-curation pipeline. NICs, media and GPUs take catalog names or inline mappings.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from hardware_models import catalog
from hardware_models.gpu import DeviceSpec
from hardware_models.memory import MemoryTierSpec
from hardware_models.nic import LinkSpec
from hardware_models.strict import StrictModel
from hardware_models.units import Bytes, Seconds
from sim.workloads.base import WorkloadBase
from sim.workloads.ingestion.media import MediaConfig


def _spec(section: str, value: Any, default_name: str) -> Any:
    """Catalog name, .yaml path or inline mapping -> raw fields (an inline mapping without a base
    and without a name is named after its role)."""
    if isinstance(value, BaseModel):
        return value
    if isinstance(value, dict) and "base" not in value and "name" not in value:
        value = {"name": default_name, **value}
    return catalog.raw_spec(section, value)


class DatasetConfig(StrictModel):
    samples: int = Field(gt=0, description="samples (rows; videos for media pipelines) in the dataset")
    bytes_per_sample: Bytes = Field(gt=0, description="uncompressed bytes of one sample, all columns")
    columns: int = Field(1, ge=1, description="feature columns (each a column chunk per partition)")
    columns_read: float = Field(1.0, gt=0, le=1, description="fraction of columns (bytes) the job reads")
    compression: float = Field(1.0, ge=1, description="uncompressed / stored bytes")
    partition_bytes: Bytes = Field(gt=0, description="stored bytes of one partition; one split reads one")
    read_bytes: Bytes | None = Field(
        None, gt=0, description="bytes per storage access; default one column chunk (partition_bytes / columns)"
    )
    tensor_bytes_per_sample: Bytes | None = Field(
        None,
        gt=0,
        description="preprocessed bytes per sample sent to a trainer; default bytes_per_sample x columns_read",
    )

    @property
    def samples_per_partition(self) -> int:
        return max(1, int(self.partition_bytes * self.compression // self.bytes_per_sample))

    @property
    def access_bytes(self) -> float:
        return self.read_bytes or self.partition_bytes / self.columns

    @property
    def tensor_bytes(self) -> float:
        return self.tensor_bytes_per_sample or self.bytes_per_sample * self.columns_read


class StorageConfig(StrictModel):
    nodes: int = Field(ge=1)
    media: MemoryTierSpec = Field(default_factory=lambda: catalog.tier("hdd"), description="medium per node")
    media_per_node: int = Field(1, ge=1, description="devices per node, striped (bandwidth and IOPS add)")
    replication: int = Field(3, ge=1, description="copies of each partition on distinct nodes")
    nic: LinkSpec = Field(default_factory=lambda: catalog.link("eth-25g-tcp"))

    @field_validator("media", mode="before")
    @classmethod
    def _media(cls, v):
        return _spec("tier", v, "storage-medium")

    @field_validator("nic", mode="before")
    @classmethod
    def _nic(cls, v):
        return _spec("link", v, "storage-nic")

    def medium_link_spec(self) -> MemoryTierSpec:
        """The medium as the network sees it: sequential bandwidth of all devices on its link, no
        latency; random accesses are charged explicitly per read (pipeline_parts.Storage)."""
        n, m = self.media_per_node, self.media
        bandwidth = m.bandwidth * n
        return m.model_copy(
            update={
                "bandwidth": bandwidth,
                "write_bandwidth": m.write_bandwidth_bytes_per_s * n,
                "iops": bandwidth / m.granularity,
                "latency": 0.0,
            }
        )

    @property
    def bytes_per_access(self) -> float:
        """Sequential bytes one random access costs in medium time: bandwidth / IOPS."""
        return self.media.bandwidth / self.media.max_iops


class WorkerConfig(StrictModel):
    cores: int = Field(32, ge=1)
    memory: Bytes = Field(256 * 2**30, gt=0)
    nic: LinkSpec = Field(default_factory=lambda: catalog.link("eth-25g-tcp"))
    gpus: int = Field(0, ge=0, description="GPUs per worker (media pipelines' GPU stages)")
    gpu: DeviceSpec = Field(default_factory=lambda: catalog.device("h100-sxm"))

    @field_validator("nic", mode="before")
    @classmethod
    def _nic(cls, v):
        return _spec("link", v, "worker-nic")

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, v):
        return _spec("device", v, "worker-gpu")


class AutoscaleConfig(StrictModel):
    max_workers: int = Field(32, ge=1, description="pool hosts the controller may start")
    initial_workers: int = Field(1, ge=1)
    interval_s: Seconds = Field(2.0, gt=0, description="control period")
    startup_s: Seconds = Field(2.0, ge=0, description="time for a new worker to start (assumption)")
    low_watermark: float = Field(0.5, gt=0, lt=1, description="scale up below this mean buffer fill")
    high_watermark: float = Field(0.9, gt=0, le=1, description="consider scaling down above this fill")
    scale_down_utilisation: float = Field(
        0.8, gt=0, le=1, description="scale down only if the rest stay below this core use"
    )


DEFAULT_MEMORY_PASSES = 2.0  # host-memory bytes per processed byte of a CPU stage (assumption: in once, out once)


class PreprocessingConfig(StrictModel):
    mode: Literal["on_trainer", "disaggregated"] = "disaggregated"
    workers: int | Literal["auto"] | None = Field(None, description="disaggregated: a number or auto")
    worker: WorkerConfig = WorkerConfig()
    cpu_s_per_sample: dict[str, float] | None = Field(None, description="stage -> core-seconds per sample")
    batch_samples: int = Field(4096, ge=1, description="samples per batch sent to a trainer")
    cores_per_batch: int = Field(1, ge=1, description="cores one batch's CPU stages run on in parallel")
    splits_in_flight: int = Field(2, ge=1, description="splits a worker reads/processes concurrently")
    output_batches: int | None = Field(
        None,
        ge=1,
        description="batches a worker holds in process or awaiting "
        "a trainer slot; default twice the batches its cores run at once",
    )
    service_cv: float = Field(
        0.3,
        ge=0,
        description="coefficient of variation of stage busy times and "
        "storage access times (assumption: data skew, noisy neighbours)",
    )
    heartbeat_timeout_s: Seconds = Field(2.0, ge=0, description="master notices a crashed worker after this")
    autoscale: AutoscaleConfig = AutoscaleConfig()
    memory_bytes_per_byte: dict[str, float] | None = Field(
        None,
        description="on_trainer with a host DRAM tier (hardware.memory_tiers of kind ddr): stage -> "
        "host-memory bytes the stage moves per decoded byte (bytes_per_sample x columns_read) it processes; "
        f"default {DEFAULT_MEMORY_PASSES:g} per stage (assumption: a streaming stage reads each byte once "
        "and writes one byte)",
    )

    @field_validator("cpu_s_per_sample")
    @classmethod
    def _positive(cls, v):
        if v is not None and (not v or any(not (x >= 0 and math.isfinite(x)) for x in v.values())):
            raise ValueError("must map stage names to core-seconds >= 0, e.g. {decode: 2.0e-4}")
        return v

    @field_validator("memory_bytes_per_byte")
    @classmethod
    def _passes(cls, v):
        if v is not None and any(not (x >= 0 and math.isfinite(x)) for x in v.values()):
            raise ValueError("must map stage names to bytes per byte >= 0, e.g. {decode: 2.0}")
        return v

    def memory_passes(self) -> tuple[float, ...]:
        """Host-memory bytes per decoded byte of each CPU stage (cpu_s_per_sample's order)."""
        given = self.memory_bytes_per_byte or {}
        return tuple(given.get(stage, DEFAULT_MEMORY_PASSES) for stage in self.cpu_s_per_sample or {})


class TrainersConfig(StrictModel):
    demand_samples_per_s_per_host: float = Field(gt=0)
    buffer_batches: int = Field(8, ge=1, description="batches a trainer host buffers")
    training_cores: int = Field(
        16,
        ge=0,
        description="on_trainer: host cores the training processes keep "
        "(assumption: one feeder per GPU + communication threads)",
    )
    network_bytes_per_sample: Bytes = Field(
        0,
        ge=0,
        description="the training job's own traffic: bytes per trained sample each trainer host exchanges "
        "with the next one (e.g. gradient sync) during its step, over the NICs its batches arrive on",
    )


class DedupConfig(StrictModel):
    factor: float = Field(1.0, ge=1, description="samples per session (values per distinct value)")
    byte_fraction: float = Field(0.5, ge=0, le=1, description="share of sample bytes in session-constant features")
    work_fraction: float = Field(0.5, ge=0, le=1, description="share of preprocessing work on those features")
    sessions: Literal["geometric", "fixed"] = Field("geometric", description="session length distribution")
    index_bytes_per_sample: Bytes = Field(4, ge=0, description="inverse-index bytes per sample (IKJT)")


class FaultConfig(StrictModel):
    kind: Literal["worker_crash", "storage_node_down"]
    at_s: Seconds = Field(ge=0)
    count: int = Field(1, ge=1)
    restart_after_s: Seconds | None = Field(None, gt=0, description="worker restarts / node returns after")


class Config(WorkloadBase):
    kind: Literal["ingestion"]
    dataset: DatasetConfig
    storage: StorageConfig
    preprocessing: PreprocessingConfig = PreprocessingConfig()
    trainers: TrainersConfig
    dedup: DedupConfig = DedupConfig()
    faults: list[FaultConfig] = Field(default_factory=list)
    duration_s: Seconds = Field(gt=0)
    warmup_s: Seconds = Field(5.0, ge=0, description="excluded from rates and stall fractions")
    media: MediaConfig | None = Field(None, description="a video-curation pipeline instead of cpu_s_per_sample")

    @field_validator("dedup", mode="before")
    @classmethod
    def _dedup_number(cls, v):
        return {"factor": v} if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @property
    def disaggregated(self) -> bool:
        return self.preprocessing.mode == "disaggregated"

    def pool_size(self) -> int:
        w = self.preprocessing.workers
        return self.preprocessing.autoscale.max_workers if w == "auto" else int(w or 0)

    def host_memory_tier(self, hardware):
        """on_trainer: the trainer hosts' DRAM (the first `hardware.memory_tiers` entry of kind ddr),
        whose bandwidth preprocessing shares with the trainer's host-to-device copies; None when
        disaggregated or when the hosts list no DRAM tier (then host memory traffic is not modelled)."""
        if self.disaggregated:
            return None
        return next((t for t in hardware.memory_tiers if t.kind == "ddr"), None)

    def host_pools(self, hardware) -> list:
        from hardware_models.topology import HostPool

        pools = [HostPool("storage", self.storage.nodes, self.storage.nic, [self.storage.medium_link_spec()])]
        if self.disaggregated:
            pools.append(HostPool("preproc", self.pool_size(), self.preprocessing.worker.nic))
        return pools

    def check(self, hardware) -> None:
        from sim.workloads.ingestion.checks import check_config

        check_config(self, hardware)
