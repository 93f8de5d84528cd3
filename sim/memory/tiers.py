"""The memory layer: access laws, placement policies over tiers, and tier traffic at run time.

This module is the layer's front door; the pieces live in
- sim/memory/zipf.py: `ZipfRows`, the Zipf row/page access law with sums over ranks that scale to
  billions of rows;
- sim/memory/policies.py: placement policies (static first-touch or pinned hottest rows, LRU,
  NUMA balancing, TPP) with one interface: `rules(fast_pages)` for the epoch engine and
  `hit_rate(dist, capacity)` for the steady state (Che's approximation and its q-LRU extension);
  `sampled_hit_rate` is the exact per-access reference replay;
- sim/memory/placement.py: the epoch engine that moves pages between a fast and a slow tier as a
  simulation runs (`PageState`, `advance`), used by `kind: tiered_memory`.
The embedding workload's HBM cache (`uvm_cache`) and its hottest-rows-first placement over HBM,
DDR and SCM use the same policy objects (sim/workloads/embedding/cost.py).

Tier traffic at run time (here)
- `hbm_tier(gpu)`: a device's HBM as a `MemoryTierSpec` (32 B sector granularity, assumption).
- `TieredMemory.kernel(device, name, accesses)`: one kernel that holds a device stream while it moves
  its `Access`es: HBM bytes through the device's roofline memory model (`DeviceSpec.memory_time_s`; rows at its gather efficiency),
  host tiers (DDR reached as UVM, CXL, SCM, SSD) as network flows from/to the host's tier node
  `h{i}/{tier}` over the host link, so the GPUs of one host share the tier max-min fairly. It counts
  accesses and bytes per tier.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hardware_models.gpu import DeviceSpec
from hardware_models.memory import MemoryTierSpec
from sim.memory.placement import EpochOutcome, PageState, Rules, advance  # noqa: F401 - re-exported
from sim.memory.policies import (  # noqa: F401
    TPP,
    LRUPlacement,
    NumaBalancing,
    PlacementPolicy,
    StaticPlacement,
    Tuning,
    che_hit_rate,
    placement_policy,
    sampled_hit_rate,
)
from sim.memory.zipf import HEAD, ZipfRows  # noqa: F401 - re-exported

HBM_SECTOR_BYTES = 32  # assumption: A100/H100 DRAM access sector (L2 sector size)


# ------------------------------------------------------------------------------------------------
# tier traffic at run time


def hbm_tier(gpu: DeviceSpec) -> MemoryTierSpec:
    """A device's HBM as a tier (per device)."""
    return MemoryTierSpec(
        name="hbm",
        kind="hbm",
        capacity=gpu.memory,
        bandwidth=gpu.memory_bandwidth,
        latency=0.0,
        granularity=HBM_SECTOR_BYTES,
        source=gpu.source,
    )


@dataclass(frozen=True)
class Access:
    """`count` random accesses of `access_bytes` each to tier `tier` ('hbm' or a host tier name)."""

    tier: str
    count: float
    access_bytes: float
    write: bool = False


class TieredMemory:
    """Serves a cluster's tier traffic and counts it per tier."""

    def __init__(self, sim, cluster) -> None:
        self.sim = sim
        self.cluster = cluster
        self.tiers = {t.name: t for t in cluster.hardware.memory_tiers}
        self.hbm = hbm_tier(cluster.hardware.gpu)
        self.accesses: dict[str, float] = defaultdict(float)
        self.bytes: dict[str, float] = defaultdict(float)

    def spec(self, tier: str) -> MemoryTierSpec:
        return self.hbm if tier == "hbm" else self.tiers[tier]

    def kernel(
        self,
        device,
        name: str,
        accesses: list[Access],
        stream: str = "compute",
        category: str = "memory",
        extra_hbm_bytes: float = 0.0,
    ):
        """A SimPy process: hold `stream`, move all accesses concurrently, record a span.

        Its value is the kernel's duration (from getting the stream to the last byte)."""
        return self.sim.process(self._kernel(device, name, accesses, stream, category, extra_hbm_bytes))

    def _kernel(self, device, name, accesses, stream, category, extra_hbm_bytes):
        with device.stream(stream).request() as req:
            yield req
            start = self.sim.now
            hbm_bytes = extra_hbm_bytes
            gathered = 0.0
            host_bytes: dict[tuple[str, bool], float] = defaultdict(float)
            for a in accesses:
                if a.count <= 0:
                    continue
                moved = a.count * self.spec(a.tier).bytes_moved(a.access_bytes)
                self.accesses[a.tier] += a.count
                self.bytes[a.tier] += moved
                if a.tier == "hbm":
                    gathered += moved
                else:
                    host_bytes[(a.tier, a.write)] += moved
            events = [self.sim.timeout(device.spec.memory_time_s(hbm_bytes, gather_bytes=gathered))]
            hbm_bytes += gathered
            for (tier, write), moved in sorted(host_bytes.items()):
                node = self.cluster.tier_node(device.host, tier)
                src, dst = (device.node, node) if write else (node, device.node)
                events.append(
                    self.cluster.network.transfer_many(
                        [(src, dst, moved)], name=f"{name}:{tier}{'.write' if write else ''}"
                    )
                )
            yield self.sim.all_of(events)
            duration = self.sim.now - start
            device.record(stream, duration)
            self.sim.span(device.node, stream, name, start, nbytes=hbm_bytes, category=category)
        return duration
