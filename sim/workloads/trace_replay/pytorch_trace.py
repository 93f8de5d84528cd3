"""Read PyTorch profiler traces (torch.profiler's Chrome/Kineto JSON export) into per-rank event trees.

Accepted input: one JSON file per rank (`prof.export_chrome_trace(...)` or the tensorboard handler's
`*.pt.trace.json`, optionally gzipped), a list of such files, a directory of them, or one merged file
holding several CPU processes (one rank per process id). The rank of a file is its
`distributedInfo.rank` (written when torch.distributed is initialised), else a number in its file
name (`rank3`, `rank_3`, `-3.`), else its position in the sorted list.

What is read (complete events, `ph: X`):
- CPU events (`cpu_op`, `user_annotation`, `cuda_runtime`, `cuda_driver`, `python_function`) per
  thread `(pid, tid)`, nested into trees by time (an event inside another's interval is its child);
  `ProfilerStep#N` annotations mark the steps;
- GPU events (`kernel`, `gpu_memcpy`, `gpu_memset`) per stream `(pid, tid)`, with their `correlation`
  id linking them to the runtime call that launched them;
- per event: name, start and duration (us in the file, seconds here) and the args the replay uses
  (`Input Dims`, `Input type`, `Concrete Inputs`, `correlation`, `Collective name`, `In msg nelems`,
  `Out msg nelems`, `dtype`, `Group size`).
Ignored: metadata, instant and counter events, flow arrows (`ph: s/f`; correlation ids carry the same
link), `gpu_user_annotation`, the profiler's own `Trace` spans, events with a non-numeric pid.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sim.errors import ScenarioError
from sim.workloads.trace_replay.ops import OpRecord

CPU_CATS = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function", "cpu_instant_event"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
KEPT_ARGS = (
    "correlation",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Group size",
    "Process Group Ranks",
)
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
TRACE_RANK_RE = re.compile(r"rank[_-]?(\d+)|[_-](\d+)\.(?:pt\.)?trace\.json", re.IGNORECASE)
NEST_TOLERANCE_S = 1e-9  # timestamps are rounded to ns: a child may end that much after its parent


@dataclass
class Event:
    """One complete event: times in seconds from the trace's own clock."""

    name: str
    cat: str
    start_s: float
    dur_s: float
    record: OpRecord
    args: dict = field(default_factory=dict)
    children: list[Event] = field(default_factory=list)
    parent: Event | None = field(default=None, repr=False)

    @property
    def end_s(self) -> float:
        return self.start_s + self.dur_s

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass
class RankTrace:
    rank: int
    source: str
    threads: dict[str, list[Event]]  # top-level CPU events per thread, in time order
    streams: dict[str, list[Event]]  # GPU kernels per stream, in time order
    main_thread: str
    world_size: int | None = None

    @property
    def steps(self) -> list[Event]:
        return [e for e in self.threads.get(self.main_thread, []) if STEP_RE.match(e.name)]

    def events(self):
        for roots in self.threads.values():
            for root in roots:
                yield from root.walk()


def _record(name: str, args: dict) -> OpRecord:
    def tup(v):
        return tuple(v) if isinstance(v, list) else ()

    return OpRecord(name, tup(args.get("Input Dims")), tup(args.get("Input type")), tup(args.get("Concrete Inputs")))


def _event(e: dict) -> Event:
    args = e.get("args") or {}
    return Event(
        name=str(e.get("name", "")),
        cat=str(e.get("cat", "")),
        start_s=float(e["ts"]) * 1e-6,
        dur_s=max(float(e.get("dur", 0.0)), 0.0) * 1e-6,
        record=_record(str(e.get("name", "")), args),
        args={k: args[k] for k in KEPT_ARGS if k in args},
    )


def nest(events: list[Event]) -> list[Event]:
    """Top-level events of one thread with the others as their descendants (by time intervals)."""
    events.sort(key=lambda e: (e.start_s, -e.dur_s))
    roots: list[Event] = []
    stack: list[Event] = []
    for ev in events:
        while stack and not _inside(ev, stack[-1]):
            stack.pop()
        if stack:
            ev.parent = stack[-1]
            stack[-1].children.append(ev)
        else:
            roots.append(ev)
        stack.append(ev)
    return roots


def _inside(ev: Event, outer: Event) -> bool:
    return ev.start_s >= outer.start_s and ev.end_s <= outer.end_s + NEST_TOLERANCE_S


def load_json(path: Path) -> dict | list:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise ScenarioError(
            f"cannot read JSON trace ({type(exc).__name__})", path="workload.trace", value=str(path)
        ) from None


def is_pytorch_trace(data) -> bool:
    events = data.get("traceEvents") if isinstance(data, dict) else data
    return isinstance(events, list) and any(isinstance(e, dict) and "ph" in e for e in events[:50])


def rank_from_name(path: Path) -> int | None:
    m = TRACE_RANK_RE.search(path.name)
    return int(next(g for g in m.groups() if g is not None)) if m else None


def parse(data, source: str = "", default_rank: int = 0) -> list[RankTrace]:
    """The rank traces in one loaded JSON document (several for a merged file of CPU processes)."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    info = (data.get("distributedInfo") or {}) if isinstance(data, dict) else {}
    if not isinstance(events, list):
        raise ScenarioError("not a PyTorch profiler trace (no traceEvents list)", path="workload.trace", value=source)
    cpu: dict[int, dict[str, list[Event]]] = {}
    gpu: dict[str, list[Event]] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or not isinstance(e.get("pid"), int) or "ts" not in e:
            continue
        cat = e.get("cat", "")
        if cat in GPU_CATS:
            gpu.setdefault(f"{e['pid']}/{e.get('tid')}", []).append(_event(e))
        elif cat in CPU_CATS:
            cpu.setdefault(e["pid"], {}).setdefault(f"{e['pid']}/{e.get('tid')}", []).append(_event(e))
    if not cpu:
        raise ScenarioError("the trace holds no CPU operations", path="workload.trace", value=source)
    pids = sorted(cpu, key=lambda p: min(ev.start_s for t in cpu[p].values() for ev in t))
    merged = len(pids) > 1
    if merged and gpu:
        raise ScenarioError(
            "a merged trace with several processes and GPU kernels is ambiguous; give one file per rank",
            path="workload.trace",
            value=source,
        )
    out = []
    for i, pid in enumerate(pids):
        threads = {tid: nest(evs) for tid, evs in cpu[pid].items()}
        rank = i if merged else int(info.get("rank", default_rank))
        out.append(
            RankTrace(
                rank=rank,
                source=source,
                threads=threads,
                streams={s: sorted(evs, key=lambda e: e.start_s) for s, evs in gpu.items()},
                main_thread=_main_thread(threads),
                world_size=len(pids) if merged else info.get("world_size"),
            )
        )
    return out


def _main_thread(threads: dict[str, list[Event]]) -> str:
    """The thread with ProfilerStep annotations, else the one with the most events."""
    stepped = [t for t, roots in threads.items() if any(STEP_RE.match(e.name) for e in roots)]
    if stepped:
        return stepped[0]
    return max(threads, key=lambda t: sum(1 for r in threads[t] for _ in r.walk()))


def trace_files(spec: str | list[str]) -> list[Path]:
    """The files a `trace` value names: a file, a directory (its *.json / *.json.gz, sorted), or a list."""
    items = spec if isinstance(spec, list) else [spec]
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(x for x in p.iterdir() if x.name.endswith((".json", ".json.gz")))
            if not found:
                raise ScenarioError("directory holds no .json traces", path="workload.trace", value=str(p))
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise ScenarioError("no such trace file or directory", path="workload.trace", value=str(p))
    return files


def load_ranks(files: list[Path]) -> list[RankTrace]:
    """Every rank of the PyTorch traces in `files`, sorted by rank (ranks must be distinct)."""
    ranks: list[RankTrace] = []
    for i, path in enumerate(files):
        name_rank = rank_from_name(path)
        ranks += parse(load_json(path), str(path), name_rank if name_rank is not None else i)
    ranks.sort(key=lambda r: r.rank)
    seen = [r.rank for r in ranks]
    if len(set(seen)) != len(seen):
        raise ScenarioError("two traces claim the same rank", path="workload.trace", value=seen)
    return ranks
