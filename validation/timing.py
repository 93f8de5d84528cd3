"""Timing real torch runs: warm-up, repeats, a statistic robust to other load, thread pinning.

`measure(fn, repeats)` runs `fn` a few times untimed (allocation, oneDNN/cuBLAS heuristics, caches),
then `repeats` timed runs; on CUDA the caller passes `sync` (e.g. `torch.cuda.synchronize`) so a
timed run ends when the device is done.

Other load on the machine: a process that shares the cores takes them away from the measured one
for whole scheduler slices (milliseconds), so a long sample on a busy 2-core machine can take twice
its time. The Linux kernel accounts that time: `/proc/<pid>/task/<tid>/schedstat` holds, per thread,
the time it waited on a run queue while runnable (`core_wait_s`). Every sample is its wall time
minus the run-queue wait of the measuring thread during it - its *on-core time*: what the run took
while it had a core (blocked time, e.g. waiting for a peer rank or a GPU, stays in). A sample that
waited more than `PREEMPTED_FRACTION` of its wall time is *preempted*; when more than half the
samples are, `measure` widens the repeats (up to `WIDEN` x) and says so (`Timing.preempted`,
`Timing.widened`, in the records' `checks`). Where schedstat is missing (not Linux), the process
CPU time stands in for single-threaded samples (min(wall, CPU)).

What this does not remove: a neighbour sharing the memory system or caches while both run, and a
hypervisor taking the virtual CPU (steal time, invisible inside the guest) - so the harness also
measures the primitives before and after the compositions and pools both passes (`Context.pooled`).

`Context` is what every measurement needs to stamp a record: the torch module, the device, the
threads per process and the device's name.

Only `validation/` imports torch, and only when a measurement runs, so `dcsim` works without it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

PREEMPTED_FRACTION = 0.05  # run-queue wait above this share of a sample's wall time: preempted
WIDEN = 2  # at most this many times the asked repeats when most samples are preempted


def core_wait_s() -> float | None:
    """Seconds the calling thread has waited on a run queue while runnable (Linux schedstat); None
    where the kernel does not provide it. The measured work runs on the calling thread (one torch
    thread per process; gloo's and the DataLoader's waits block it, they do not queue it)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Timing:
    median_s: float  # median on-core time of the samples (module docstring)
    spread_s: float  # interquartile range of the samples
    repeats: int
    min_s: float | None = None
    cpu_median_s: float | None = None  # process CPU time per sample
    preempted: int = 0  # samples that waited on a run queue for more than PREEMPTED_FRACTION
    widened: bool = False  # repeats were added because most samples were preempted
    samples_s: tuple[float, ...] = ()  # on-core time per sample (pooled across passes)
    wall_median_s: float | None = None  # median wall time, other processes' share included

    @property
    def checks(self) -> dict:
        out: dict = {"cpu_median_s": self.cpu_median_s} if self.cpu_median_s else {}
        if self.preempted or self.widened:
            out |= {"preempted_samples": self.preempted, "widened": self.widened, "wall_median_s": self.wall_median_s}
        return out


def summarize(
    samples_s: list[float],
    walls_s: list[float] | None = None,
    cpu_s: list[float] | None = None,
    widened: bool = False,
) -> Timing:
    """Median, interquartile range and minimum of on-core samples; `walls_s` (their wall times) count
    the preempted ones."""
    walls = walls_s or samples_s
    q1, q3 = np.percentile(samples_s, [25, 75])
    preempted = sum(w - s > PREEMPTED_FRACTION * w for s, w in zip(samples_s, walls))
    return Timing(
        float(statistics.median(samples_s)),
        float(q3 - q1),
        len(samples_s),
        float(min(samples_s)),
        float(statistics.median(cpu_s)) if cpu_s else None,
        preempted,
        widened,
        tuple(samples_s),
        float(statistics.median(walls)),
    )


def on_core_s(wall_s: float, wait_s: float | None, cpu_s: float | None = None) -> float:
    """A sample's on-core time: wall minus run-queue wait; without schedstat, min(wall, CPU)."""
    if wait_s is not None:
        return max(wall_s - wait_s, 0.01 * wall_s)  # wait <= wall for one thread; the floor is for rounding
    return min(wall_s, cpu_s) if cpu_s else wall_s


def measure(
    fn: Callable[[], Any], repeats: int, warmup: int = 2, sync: Callable[[], None] | None = None, inner: int = 1
) -> Timing:
    """`repeats` samples; each runs `fn` `inner` times back to back (then syncs) and counts the
    mean. inner > 1 measures steady-state throughput, where a GPU's kernel launches overlap the
    previous kernel (as in a model's forward pass) instead of one launch + sync latency per call.
    Samples are on-core times; repeats widen when most were preempted (module docstring)."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    samples: list[float] = []
    walls: list[float] = []
    cpu: list[float] = []
    widened = False
    while True:
        wait0, start, start_cpu = core_wait_s(), time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        if sync:
            sync()
        wall, spent = (time.perf_counter() - start) / inner, (time.process_time() - start_cpu) / inner
        wait1 = core_wait_s()
        wait = (wait1 - wait0) / inner if wait0 is not None and wait1 is not None else None
        samples.append(on_core_s(wall, wait, None if sync else spent))
        walls.append(wall)
        cpu.append(spent)
        if len(samples) < repeats:
            continue
        t = summarize(samples, walls)
        if len(samples) >= WIDEN * repeats or 2 * t.preempted <= len(samples):
            break
        widened = True
    return summarize(samples, walls, cpu, widened)


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
    pool: dict[str, Timing] = field(default_factory=dict, compare=False, repr=False)

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

        timing = self.pooled(name, timing)
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
            checks={**timing.checks, **(checks or {})},
        )

    def pooled(self, name: str, timing: Timing) -> Timing:
        """`timing` combined with the earlier passes' samples of the same record (if any)."""
        before = self.pool.get(name)
        if before is not None and before.samples_s and timing.samples_s:
            both = summarize(list(before.samples_s + timing.samples_s), widened=before.widened or timing.widened)
            timing = Timing(
                both.median_s,
                both.spread_s,
                both.repeats,
                both.min_s,
                timing.cpu_median_s,
                before.preempted + timing.preempted,
                both.widened,
                both.samples_s,
                timing.wall_median_s,
            )
        self.pool[name] = timing
        return timing
