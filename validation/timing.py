"""Timing real torch runs: warm-up, repeats, median and interquartile spread, thread pinning.

`measure(fn, repeats)` runs `fn` a few times untimed (allocation, oneDNN/cuBLAS heuristics, caches),
then `repeats` timed runs with `time.perf_counter` (and the process CPU time beside it: on a shared machine wall / CPU > 1 shows
that other processes took the core); on CUDA the caller passes `sync` (e.g.
`torch.cuda.synchronize`) so a timed run ends when the device is done. `Context` is what every
measurement needs to stamp a record: the torch module, the device, the threads per process and the
device's name.

Only `validation/` imports torch, and only when a measurement runs, so `dcsim` works without it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Timing:
    median_s: float
    spread_s: float
    repeats: int
    min_s: float | None = None
    cpu_median_s: float | None = None  # process CPU time: wall / cpu > 1 means others took the core


def summarize(samples_s: list[float]) -> Timing:
    """Median and interquartile range of timed samples."""
    q1, q3 = np.percentile(samples_s, [25, 75])
    return Timing(float(statistics.median(samples_s)), float(q3 - q1), len(samples_s), float(min(samples_s)))


def measure(
    fn: Callable[[], Any], repeats: int, warmup: int = 2, sync: Callable[[], None] | None = None, inner: int = 1
) -> Timing:
    """`repeats` samples; each runs `fn` `inner` times back to back (then syncs) and counts the
    mean. inner > 1 measures steady-state throughput, where a GPU's kernel launches overlap the
    previous kernel (as in a model's forward pass) instead of one launch + sync latency per call."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    samples, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        if sync:
            sync()
        samples.append((time.perf_counter() - start) / inner)
        cpu.append((time.process_time() - start_cpu) / inner)
    return replace(summarize(samples), cpu_median_s=float(statistics.median(cpu)))


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown-cpu"


def slug(text: str) -> str:
    keep = "".join(c.lower() if c.isalnum() else "-" for c in text.replace("(R)", "").replace("(TM)", ""))
    return "-".join(p for p in keep.split("-") if p)


@dataclass(frozen=True)
class Context:
    """Where and how measurements run; stamps every record."""

    torch: Any
    device: str  # "cpu" | "cuda"
    threads: int = 1
    quick: bool = False

    @classmethod
    def create(cls, device: str = "cpu", threads: int = 1, quick: bool = False) -> Context:
        import torch

        torch.set_num_threads(threads)
        return cls(torch, device, threads, quick)

    @property
    def device_name(self) -> str:
        if self.device == "cuda":
            return self.torch.cuda.get_device_name(0)
        return cpu_model_name()

    @property
    def torch_version(self) -> str:
        return str(self.torch.__version__)

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    @property
    def inner(self) -> int:
        """Back-to-back calls per timed sample of a primitive: 10 on a GPU (steady-state
        throughput, launches overlapped), 1 on a CPU (no asynchronous launch to overlap)."""
        return 10 if self.gpu else 1

    @property
    def sync(self) -> Callable[[], None] | None:
        return self.torch.cuda.synchronize if self.device == "cuda" else None

    def time(self, fn: Callable[[], Any], repeats: int, warmup: int = 2, inner: int = 1) -> Timing:
        return measure(fn, repeats, warmup, self.sync, inner)

    def record(
        self,
        name: str,
        family: str,
        workload: str,
        params: dict,
        timing: Timing,
        processes: int = 1,
        checks: dict | None = None,
    ):
        from validation.records import Record

        return Record(
            name=name,
            family=family,
            workload=workload,
            params=params,
            device=self.device_name,
            device_kind=self.device,
            torch_version=self.torch_version,
            threads=self.threads,
            processes=processes,
            repeats=timing.repeats,
            median_s=timing.median_s,
            spread_s=timing.spread_s,
            min_s=timing.min_s,
            checks={**({"cpu_median_s": timing.cpu_median_s} if timing.cpu_median_s else {}), **(checks or {})},
        )
