"""`kind: tiered_memory` — a page-access stream on host DRAM + CXL under a placement policy.

A CPU application on host 0 (node `h0/cpu`) touches `footprint` bytes of pages (`page_bytes`) spread
over a fast tier (`fast_tier`, e.g. ddr5-host) and a slow tier (`slow_tier`, e.g. cxl-expander);
`ratio` "a:b" lets the fast tier hold a/(a+b) of the footprint (TPP's local:CXL ratio), the rest
lives on the slow tier. The `policy` (static | lru | numa_balancing | tpp; sim/memory/policies.py)
moves pages between them as the run goes. The stream (`access`: a Zipf or hot-set popularity law
with phase changes, or a CSV trace; sim/memory/access.py) is replayed in epochs of
`epoch_accesses` accesses of `access.access_bytes` each, seeded from the simulation's substreams.

Every epoch (sim/memory/placement.py decides where each access is served and what moves):
- the accesses are flows on the topology: local bytes from `h0/{fast}` to `h0/cpu`, remote bytes
  from `h0/{slow}` to `h0/cpu`; migrations are flows from one tier node to the other (through the
  CPU node), so they take bandwidth on both tiers' links and compete with the accesses;
- the application keeps `outstanding_accesses` loads in flight (memory-level parallelism): by
  Little's law the epoch needs at least (local x fast latency + remote x slow latency + hint faults
  x `hint_fault_cost`) / outstanding_accesses seconds;
- the epoch ends when both its flows (accesses and migrations) and that latency bound are done.
The all-local reference runs the same accesses on the fast tier alone (same latency bound and
the uncontended flow time of `h0/{fast}` -> `h0/cpu`).

The run lasts `duration_s` of simulated time (a trace may end sooner; a trace without
`duration_s` runs to its end).

Metrics: `local_traffic_fraction` (accesses served by the fast tier), `throughput_relative_to_all_local`,
`promotions_per_s`, `demotions_per_s` (pages), plus `accesses_per_s`, `migration_bytes_per_s`,
`hint_faults_per_s`, `local_traffic_fraction_by_phase`, `fast_pages`, `pages`, `epochs`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from hardware_models.strict import StrictModel
from hardware_models.units import Bytes, BytesPerS, Seconds
from sim.engine.replay import delay_to
from sim.errors import ScenarioError
from sim.memory.access import PhasedPopularity, TraceReplay, load_trace
from sim.memory.tiers import PageState, Tuning, advance, placement_policy
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

    def tuning(self) -> Tuning:
        return Tuning(
            self.hint_fault_fraction,
            self.promote_rate_limit,
            self.watermark_low,
            self.watermark_high,
            self.demote_watermark,
            self.reclaim_batch_pages,
            self.failed_promotion_wakes_kswapd,
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
        if self.footprint is not None:
            return max(1, int(self.footprint // self.page_bytes))
        return int(trace_pages or 0)

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
        pages = self.pages(trace_pages)
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


def _stream(sim, config: Config):
    """(the access stream, pages in the footprint)."""
    a = config.access
    if a.trace:
        page, count = load_trace(a.trace, config.pages() if config.footprint else None)
        pages = config.pages(int(page.max()) + 1)
        return TraceReplay(page, count, pages), pages
    pages = config.pages()
    kw = {
        "phase_s": a.phase_s,
        "access_rng": sim.rng("tiered_memory.accesses"),
        "phase_rng": sim.rng("tiered_memory.phases"),
    }
    if a.distribution == "zipf":
        return PhasedPopularity.zipf(pages, a.zipf_alpha, **kw), pages
    return PhasedPopularity.hot_set(pages, a.hot_fraction, a.hot_access_fraction, **kw), pages


def _latency(sim, cpu: str, parts: list[tuple[str, float]], end_s: float):
    """The epoch's access latency as spans on the CPU, one per tier (category `memory:<tier>`: the
    tier that bounded that part) and one for hint faults; ends exactly at `end_s`."""
    for k, (what, seconds) in enumerate(parts):
        t0 = sim.now
        yield sim.timeout(delay_to(sim.now, end_s) if k == len(parts) - 1 else seconds)
        if sim.now > t0:
            category = "page_fault" if what == "hint faults" else f"memory:{what}"
            sim.span(cpu, "memory latency", f"latency {what}", t0, category=category)


def simulate(sim, cluster, config: Config):
    fast, slow = config.tiers(cluster.hardware)
    stream, pages = _stream(sim, config)
    state = PageState(pages, config.fast_pages(pages), float(config.page_bytes))
    rules = placement_policy(config.policy, config.tuning.tuning()).rules(state.fast_pages)
    fault_rng = sim.rng("tiered_memory.hint_faults")
    net = cluster.network
    cpu, fast_node, slow_node = cluster.cpu_node(0), cluster.tier_node(0, fast.name), cluster.tier_node(0, slow.name)
    bytes_fast, bytes_slow = fast.bytes_moved(config.access.access_bytes), slow.bytes_moved(config.access.access_bytes)
    mlp, page = config.outstanding_accesses, config.page_bytes
    totals = {"local": 0.0, "remote": 0.0, "promoted": 0, "demoted": 0, "hint_faults": 0, "all_local_s": 0.0}
    by_phase: dict[int, list[float]] = {}
    start, end = sim.now, math.inf if config.duration_s is None else config.duration_s
    epochs = 0
    while sim.now - start < end:
        counts = stream.counts(sim.now - start, config.epoch_accesses)
        if counts is None:
            break
        epoch_start = sim.now
        out = advance(state, rules, counts, fault_rng, sim.now - start)
        accesses = out.local + out.remote
        flows = [(fast_node, cpu, out.local * bytes_fast), (slow_node, cpu, out.remote * bytes_slow)]
        moves = [(slow_node, fast_node, out.promoted * page), (fast_node, slow_node, out.demoted * page)]
        latencies = [  # (tier or cause, seconds): the accesses' latency, overlapped `mlp` deep
            (fast.name, out.local * fast.latency / mlp),
            (slow.name, out.remote * slow.latency / mlp),
            ("hint faults", out.hint_faults * config.hint_fault_cost / mlp),
        ]
        latency_s = (
            out.local * fast.latency + out.remote * slow.latency + out.hint_faults * config.hint_fault_cost
        ) / mlp
        yield sim.all_of(
            [
                net.transfer_many([f for f in flows if f[2] > 0], name="tiered_memory.access"),
                net.transfer_many([f for f in moves if f[2] > 0], name="tiered_memory.migration"),
                sim.process(_latency(sim, cpu, latencies, epoch_start + latency_s)),
            ]
        )
        sim.span(
            cpu,
            "memory",
            config.policy,
            epoch_start,
            nbytes=out.local * bytes_fast + out.remote * bytes_slow,
            category="memory",
        )
        epochs += 1
        for k in ("local", "remote", "promoted", "demoted", "hint_faults"):
            totals[k] += getattr(out, k)
        totals["all_local_s"] += max(
            net.estimate_time_s(fast_node, cpu, accesses * bytes_fast) if accesses else 0.0,
            accesses * fast.latency / mlp,
        )
        row = by_phase.setdefault(stream.phase(epoch_start - start), [0.0, 0.0])
        row[0] += out.local
        row[1] += accesses
    elapsed = sim.now - start
    accesses = totals["local"] + totals["remote"]

    def rate(x: float) -> float:
        return x / elapsed if elapsed > 0 else 0.0

    return {
        "local_traffic_fraction": totals["local"] / accesses if accesses else 1.0,
        "throughput_relative_to_all_local": totals["all_local_s"] / elapsed if elapsed > 0 else 1.0,
        "promotions_per_s": rate(totals["promoted"]),
        "demotions_per_s": rate(totals["demoted"]),
        "accesses_per_s": rate(accesses),
        "migration_bytes_per_s": rate((totals["promoted"] + totals["demoted"]) * page),
        "hint_faults_per_s": rate(totals["hint_faults"]),
        "local_traffic_fraction_by_phase": [loc / n if n else 1.0 for _, (loc, n) in sorted(by_phase.items())],
        "promotions": totals["promoted"],
        "demotions": totals["demoted"],
        "accesses": accesses,
        "policy": config.policy,
        "pages": pages,
        "fast_pages": state.fast_pages,
        "epochs": epochs,
    }
