"""Memory and storage tiers: HBM, host DDR, CXL, SCM (byte- and block-addressable), SSD, HDD, remote.

A tier has a capacity, read/write bandwidth, access latency and an access granularity (the smallest
unit a random access moves: 64 B cache line for DRAM, 256 B for Optane PMem, 4 KiB for block devices).
A random read of `n` bytes therefore moves `ceil(n / granularity) * granularity` bytes, and a tier
serves at most `iops` random accesses per second (derived from latency and queue depth if unset).

`access_time_s` is the uncontended cost of a batch of random accesses; contention between devices
sharing one tier is added by the engine (sim/memory/tiers.py).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from hardware_models.spec import PowerSpec, Spec
from hardware_models.units import Bytes, BytesPerS, Seconds

TierKind = Literal["hbm", "ddr", "cxl", "scm", "ssd", "hdd", "remote"]


class MemoryTierSpec(Spec):
    name: str
    kind: TierKind
    capacity: Bytes = Field(gt=0, description="bytes per host (per device for HBM)")
    bandwidth: BytesPerS = Field(gt=0, description="read bandwidth, bytes/s")
    write_bandwidth: BytesPerS | None = Field(None, gt=0, description="bytes/s; defaults to bandwidth")
    latency: Seconds = Field(ge=0, description="random access latency, s")
    granularity: Bytes = Field(64, gt=0, description="bytes moved by the smallest access")
    iops: float | None = Field(None, gt=0, description="random accesses/s the tier sustains")
    queue_depth: int = Field(64, ge=1, description="outstanding accesses used to derive iops from latency")
    byte_addressable: bool = True
    power: PowerSpec = PowerSpec()
    source: str = ""

    @property
    def write_bandwidth_bytes_per_s(self) -> float:
        return self.write_bandwidth or self.bandwidth

    @property
    def max_iops(self) -> float:
        """Random accesses per second: given, or queue_depth / latency (Little's law)."""
        if self.iops is not None:
            return self.iops
        return self.queue_depth / self.latency if self.latency > 0 else math.inf

    def bytes_moved(self, access_bytes: float) -> float:
        """Bytes a single random access of `access_bytes` moves at this tier's granularity."""
        return math.ceil(access_bytes / self.granularity) * self.granularity

    def access_time_s(self, accesses: float, access_bytes: float, write: bool = False) -> float:
        """Uncontended time of `accesses` random accesses of `access_bytes` each.

        Bound by bandwidth (granularity-rounded bytes) or by the access rate, whichever is slower,
        plus one latency for the first access.
        """
        if accesses <= 0:
            return 0.0
        bw = self.write_bandwidth_bytes_per_s if write else self.bandwidth
        return max(accesses * self.bytes_moved(access_bytes) / bw, accesses / self.max_iops) + self.latency
