"""`kind: collective` — nccl-tests-like collective benchmarks on the simulated cluster.

Fields: `op` (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv), `bytes` (one size or
a list), `algorithm` (ring, tree, hierarchical, direct, auto), `protocol` (LL, LL128, Simple, auto:
NCCL's protocols and tuner, sim/network/nccl.py), `group` (all devices, the first N
ranks, or a list of ranks), `background` (extra point-to-point flows that compete for links while
the collective runs, to study contention).

Metrics (nccl-tests definitions): `time_s`, `algbw_bytes_per_s` = bytes / time, `busbw_bytes_per_s`
= algbw x bus factor (2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
all-to-all); with a list of sizes they are those of the largest size and `per_size` holds one row per
size.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hardware_models.strict import StrictModel
from hardware_models.units import Bytes
from sim.errors import ScenarioError
from sim.network.collectives import bus_factor, collective
from sim.workloads.base import WorkloadBase


class BackgroundFlow(StrictModel):
    src: int = Field(ge=0, description="source rank")
    dst: int = Field(ge=0, description="destination rank")
    bytes: Bytes = Field(gt=0)


class Config(WorkloadBase):
    kind: Literal["collective"]
    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"] = "all_reduce"
    bytes: Bytes | list[Bytes] = Field(description="message size (nccl-tests convention), or a list")
    algorithm: Literal["ring", "tree", "hierarchical", "direct", "auto"] = "auto"
    protocol: Literal["auto", "LL", "LL128", "Simple", "none"] = Field(
        "auto",
        description="NCCL protocol (auto: the tuner's choice by size, sim/network/nccl.py); none: the schedule's "
        "steps lock-step with no library latency on top of the links' (gloo, or links calibrated end to end)",
    )
    group: Literal["all"] | int | list[int] = "all"
    background: list[BackgroundFlow] = Field(default_factory=list)

    @property
    def sizes(self) -> list[float]:
        return list(self.bytes) if isinstance(self.bytes, list) else [self.bytes]

    def ranks(self, num_gpus: int) -> list[int]:
        if self.group == "all":
            return list(range(num_gpus))
        if isinstance(self.group, int):
            return list(range(self.group))
        return list(self.group)

    def check(self, hardware) -> None:
        n = hardware.num_gpus
        if any(s <= 0 for s in self.sizes):
            raise ScenarioError("sizes must be > 0", path="workload.bytes", value=self.bytes)
        if isinstance(self.group, int) and not 2 <= self.group <= n:
            raise ScenarioError(
                f"group size must be between 2 and the cluster's {n} GPUs", path="workload.group", value=self.group
            )
        if isinstance(self.group, list):
            bad = [r for r in self.group if not 0 <= r < n]
            if bad or len(set(self.group)) != len(self.group) or len(self.group) < 2:
                raise ScenarioError(
                    f"ranks must be 2+ distinct values in 0..{n - 1}", path="workload.group", value=self.group
                )
        ranks = self.ranks(n)
        if self.algorithm == "hierarchical" and len(ranks) % hardware.gpus_per_node:
            raise ScenarioError(
                f"hierarchical needs whole hosts: {len(ranks)} ranks do not divide into hosts of "
                f"{hardware.gpus_per_node} GPUs",
                path="workload.group",
                value=self.group,
            )
        if self.algorithm == "tree" and self.op != "all_reduce":
            raise ScenarioError("tree implements all_reduce only", path="workload.algorithm", value="tree")
        if self.algorithm == "direct" and self.op not in ("all_to_all", "send_recv"):
            raise ScenarioError("direct implements all_to_all and send_recv", path="workload.algorithm", value="direct")
        if self.op in ("all_to_all", "send_recv") and self.algorithm in ("tree", "hierarchical"):
            raise ScenarioError(
                f"{self.op} supports ring, direct or auto", path="workload.algorithm", value=self.algorithm
            )
        for i, f in enumerate(self.background):
            if f.src >= n or f.dst >= n:
                raise ScenarioError(
                    f"ranks must be in 0..{n - 1}", path=f"workload.background.{i}", value=f.model_dump()
                )


def simulate(sim, cluster, config: Config):
    ranks = config.ranks(cluster.num_gpus)
    group = cluster.nodes(ranks)
    net = cluster.network
    rows = []
    for size in config.sizes:
        start = sim.now
        background = [
            net.transfer(cluster.devices[f.src].node, cluster.devices[f.dst].node, f.bytes, name="background")
            for f in config.background
        ]
        proc, algo = collective(
            net,
            config.op,
            group,
            size,
            config.algorithm,
            name=config.op,
            protocol=None if config.protocol == "none" else config.protocol,
        )
        yield proc
        for node in group:  # each rank runs the collective's kernel (NCCL) from start to end
            sim.span(node, "comm", f"{config.op} {size:.0f} B", start, category="comm")
        t = sim.now - start
        algbw = size / t if t > 0 else 0.0
        rows.append(
            {
                "bytes": size,
                "time_s": t,
                "algbw_bytes_per_s": algbw,
                "busbw_bytes_per_s": algbw * bus_factor(config.op, len(group)),
                "algorithm": algo,
            }
        )
        if background:
            yield sim.all_of(background)
    largest = max(rows, key=lambda r: r["bytes"])
    metrics = {k: largest[k] for k in ("time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "algorithm")}
    metrics["ranks"] = len(group)
    metrics["op"] = config.op
    if len(rows) > 1:
        metrics["per_size"] = rows
    return metrics
