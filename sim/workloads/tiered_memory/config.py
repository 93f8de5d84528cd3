"""The scenario config of `kind: tiered_memory` (sim/workloads/tiered_memory/workload.py runs it).

- `Config`: tiers, ratio, footprint (the resident working set), the access stream (`AccessConfig`),
  the program's allocations over time (`AllocationConfig`, sim/memory/lifecycle.py), the CPU side
  (threads, compute between accesses and its overlap with memory latency), migration costs, and
  the policy's kernel knobs (`TuningConfig`).
- The address space is the footprint's pages followed by each allocation stream's pages; `ratio`
  sizes the fast tier against that address space (without allocations: the footprint).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from hardware_models.strict import StrictModel
from hardware_models.units import Bytes, BytesPerS, Seconds
from sim.errors import ScenarioError
from sim.memory.access import load_trace
from sim.memory.lifecycle import AllocationStream
from sim.memory.placement import ANON, FILE
from sim.memory.tiers import Tuning
from sim.workloads.base import WorkloadBase

MAX_PAGES = 2**25  # ~0.5 GB of per-page state and per-epoch counts


class AccessConfig(StrictModel):
    distribution: Literal["zipf", "hot_set"] = "zipf"
    zipf_alpha: float = Field(1.0, ge=0, description="zipf: p_k ~ k^-alpha over the pages")
    hot_fraction: float = Field(0.1, gt=0, lt=1, description="hot_set: share of pages in the hot set")
    hot_access_fraction: float = Field(0.9, ge=0, le=1, description="hot_set: share of accesses to it")
    phase_s: Seconds | None = Field(None, gt=0, description="the popularity moves to new random pages every phase")
    trace: str | None = Field(None, description="CSV page,count in access order (sim/memory/access.py)")
    access_bytes: Bytes = Field(64, gt=0, description="bytes one access loads (a cache line)")

    @field_validator("trace")
    @classmethod
    def _relative_to_scenario(cls, v, info: ValidationInfo):
        base_dir = (info.context or {}).get("base_dir")
        if v and base_dir and not Path(v).is_absolute() and not Path(v).is_file() and (Path(base_dir) / v).is_file():
            return str(Path(base_dir) / v)
        return v


class AllocationConfig(StrictModel):
    name: str = Field("", description="a label")
    page_type: Literal["anon", "file"] = Field("anon", description="anonymous memory or page cache (file)")
    at: Seconds = Field(0.0, ge=0, description="when the allocations start")
    bytes: Bytes | None = Field(None, gt=0, description="bytes allocated in all (default: until the run ends)")
    rate: BytesPerS | None = Field(None, gt=0, description="allocation rate (default: all at once, a burst)")
    lifetime: Seconds | None = Field(None, gt=0, description="each page is freed this long after it was allocated")
    access_share: float = Field(0.0, ge=0, le=1, description="share of all accesses to its live pages")
    zipf_alpha: float = Field(0.0, ge=0, description="popularity of its live pages by age, newest first (0: uniform)")

    def stream(self, page_bytes: float) -> AllocationStream:
        return AllocationStream(
            start_s=self.at,
            rate_pages_per_s=math.inf if self.rate is None else self.rate / page_bytes,
            total_pages=None if self.bytes is None else max(1, math.ceil(self.bytes / page_bytes)),
            lifetime_s=self.lifetime,
            access_share=self.access_share,
            zipf_alpha=self.zipf_alpha,
            page_type=FILE if self.page_type == "file" else ANON,
            name=self.name,
        )


class TuningConfig(StrictModel):
    hint_fault_fraction: float = Field(
        Tuning.hint_fault_fraction,
        ge=0,
        le=1,
        description="numa_balancing/tpp: share of accesses that take a hint fault",
    )
    promote_rate_limit: BytesPerS = Field(
        Tuning.rate_limit_bytes_per_s, gt=0, description="promotion bytes per 1-s window (Linux default 65536 MB/s)"
    )
    watermark_low: float = Field(Tuning.watermark_low, ge=0, lt=1, description="fraction of the fast tier")
    watermark_high: float = Field(Tuning.watermark_high, ge=0, lt=1, description="fraction of the fast tier")
    demote_watermark: float = Field(Tuning.demote_watermark, ge=0, lt=1, description="tpp: kept free by demotion")
    reclaim_batch_pages: int = Field(Tuning.reclaim_batch_pages, ge=1)
    failed_promotion_wakes_kswapd: bool = Field(
        Tuning.failed_promotion_wakes_kswapd, description="numa_balancing: tiering mode (true) or classic (false)"
    )
    file_pages_on_slow_tier: bool = Field(
        Tuning.file_pages_on_slow_tier,
        description="tpp: page-type-aware allocation, page-cache (file) pages allocated on the slow tier",
    )

    def tuning(self) -> Tuning:
        return Tuning(
            hint_fault_fraction=self.hint_fault_fraction,
            rate_limit_bytes_per_s=self.promote_rate_limit,
            watermark_low=self.watermark_low,
            watermark_high=self.watermark_high,
            demote_watermark=self.demote_watermark,
            reclaim_batch_pages=self.reclaim_batch_pages,
            failed_promotion_wakes_kswapd=self.failed_promotion_wakes_kswapd,
            file_pages_on_slow_tier=self.file_pages_on_slow_tier,
        )


class Config(WorkloadBase):
    kind: Literal["tiered_memory"]
    policy: Literal["static", "lru", "numa_balancing", "tpp"] = "tpp"
    fast_tier: str = Field("ddr", description="a hardware.memory_tiers entry (name or kind)")
    slow_tier: str = Field("cxl", description="a hardware.memory_tiers entry (name or kind)")
    ratio: str = Field("1:4", description="fast:slow share of the footprint, e.g. 2:1 or 1:4")
    footprint: Bytes | None = Field(None, gt=0, description="bytes touched (default with a trace: its pages)")
    page_bytes: Bytes = Field(4096, gt=0)
    access: AccessConfig = AccessConfig()
    duration_s: Seconds | None = Field(None, gt=0, description="simulated time (a trace may end sooner)")
    epoch_accesses: int = Field(1_000_000, ge=1, description="accesses per epoch of the placement engine")
    outstanding_accesses: float = Field(128, gt=0, description="assumption: loads in flight (memory-level parallelism)")
    hint_fault_cost: Seconds = Field(1e-6, ge=0, description="assumption: stall per NUMA hint fault (~1 us)")
    threads: int = Field(
        16, ge=1, description="assumption: application threads; a hint fault or a promotion stalls one of them"
    )
    compute_per_access: Seconds = Field(0.0, ge=0, description="CPU time a thread spends between two of its accesses")
    compute_overlap: float = Field(
        0.0, ge=0, le=1, description="share of the shorter of compute and memory time hidden under the other"
    )
    migration_page_cost: Seconds = Field(
        2e-6,
        ge=0,
        description="assumption: kernel time to migrate one page besides its copy (unmap, TLB shootdown, remap); "
        "a promotion stalls the faulting thread, kswapd demotes at most one page per this time",
    )
    allocations: list[AllocationConfig] = Field(
        default_factory=list, description="the program's allocations and frees over time (sim/memory/lifecycle.py)"
    )
    interval_s: Seconds | None = Field(
        None, gt=0, description="report local_traffic_fraction_by_interval per interval (default: the whole run)"
    )
    tuning: TuningConfig = TuningConfig()

    @field_validator("ratio", mode="before")
    @classmethod
    def _ratio(cls, v) -> str:
        if isinstance(v, int):
            raise ValueError(
                f"ratio must be a quoted 'fast:slow' string, e.g. \"2:1\" (unquoted, YAML reads 2:1 as "  # noqa: TRY004 - pydantic reports ValueError
                f"the base-60 number {v})"
            )
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*", str(v))
        if not m or float(m.group(1)) <= 0 or float(m.group(2)) < 0:
            raise ValueError(f"ratio must be 'fast:slow' with fast > 0 (e.g. '1:4', '2:1'), got {v!r}")
        return v

    @property
    def fast_share(self) -> float:
        a, b = (float(x) for x in self.ratio.split(":"))
        return a / (a + b)

    def pages(self, trace_pages: int | None = None) -> int:
        """Pages of the resident working set (the footprint, or the trace's pages)."""
        if self.footprint is not None:
            return max(1, int(self.footprint // self.page_bytes))
        return int(trace_pages or 0)

    def streams(self) -> list[AllocationStream]:
        return [a.stream(self.page_bytes) for a in self.allocations]

    def address_space(self, base_pages: int) -> int:
        """The footprint's pages plus every allocation stream's pages."""
        return base_pages + sum(s.slots for s in self.streams())

    def fast_pages(self, pages: int) -> int:
        return math.floor(pages * self.fast_share)

    def check(self, hardware) -> None:
        fast, slow = self.tiers(hardware)
        trace_pages = None
        if self.access.trace:
            generator = {"distribution", "zipf_alpha", "hot_fraction", "hot_access_fraction", "phase_s"}
            mixed = sorted(generator & self.access.model_fields_set)
            if mixed:
                raise ScenarioError(
                    f"give either a trace or a generator ({', '.join(mixed)}), not both",
                    path="workload.access",
                    value=mixed,
                )
            page, _ = load_trace(self.access.trace, self.pages() if self.footprint else None)
            trace_pages = int(page.max()) + 1
        else:
            for key in ("footprint", "duration_s"):
                if getattr(self, key) is None:
                    raise ScenarioError("required with a generated access stream", path=f"workload.{key}")
        self._check_allocations()
        pages = self.address_space(self.pages(trace_pages))
        if pages > MAX_PAGES:
            raise ScenarioError(
                f"{pages} pages is more than the engine's {MAX_PAGES} (per-page state arrays); "
                f"use larger page_bytes or a smaller footprint",
                path="workload.footprint" if self.footprint else "workload.access.trace",
                value=self.footprint or self.access.trace,
            )
        fast_pages = self.fast_pages(pages)
        if fast_pages < 1:
            raise ScenarioError(
                f"the fast tier would hold no page of the {pages}-page footprint",
                path="workload.ratio",
                value=self.ratio,
            )
        for spec, n, key in ((fast, fast_pages, "fast_tier"), (slow, pages, "slow_tier")):
            if n * self.page_bytes > spec.capacity:
                raise ScenarioError(
                    f"{n * self.page_bytes / 2**30:.1f} GiB does not fit in {spec.name} "
                    f"({spec.capacity / 2**30:.1f} GiB per host)",
                    path=f"workload.{key}",
                    value=getattr(self, key),
                )
        if self.policy == "lru" and self.epoch_accesses > fast_pages:
            raise ScenarioError(
                f"lru keeps recency per epoch, which is faithful only while an epoch has no more "
                f"accesses than the fast tier has pages ({fast_pages}); lower it",
                path="workload.epoch_accesses",
                value=self.epoch_accesses,
            )
        t = self.tuning
        if not t.watermark_low <= t.watermark_high:
            raise ScenarioError(
                "needs watermark_low <= watermark_high", path="workload.tuning.watermark_low", value=t.watermark_low
            )

    def _check_allocations(self) -> None:
        for i, a in enumerate(self.allocations):
            key = f"workload.allocations.{i}"
            if a.bytes is None and (a.rate is None or a.lifetime is None):
                raise ScenarioError(
                    "needs bytes, or a rate and a lifetime (allocations until the run ends reuse "
                    "rate x lifetime of address space)",
                    path=f"{key}.bytes",
                    value=a.model_dump(exclude_defaults=True),
                )
            if a.bytes is None and self.duration_s is None:
                raise ScenarioError("allocating until the run ends needs workload.duration_s", path=f"{key}.bytes")
        shares = [a.access_share for a in self.allocations]
        if sum(shares) > 1.0 + 1e-9:
            raise ScenarioError(
                f"the allocations' access shares sum to {sum(shares):g}; allowed: at most 1 (the rest goes to "
                "the footprint)",
                path="workload.allocations",
                value=shares,
            )

    def tiers(self, hardware):
        out = []
        for key in ("fast_tier", "slow_tier"):
            spec = hardware.tier(getattr(self, key))
            if spec is None:
                have = ", ".join(f"{t.name} ({t.kind})" for t in hardware.memory_tiers) or "none"
                raise ScenarioError(
                    f"not in hardware.memory_tiers (have: {have}); add the catalog tier there",
                    path=f"workload.{key}",
                    value=getattr(self, key),
                )
            out.append(spec)
        if out[0].name == out[1].name:
            raise ScenarioError("fast and slow tier are the same tier", path="workload.slow_tier", value=self.slow_tier)
        return out
