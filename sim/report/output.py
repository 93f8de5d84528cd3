"""Writing a run's results to a directory: summary.json, scenario.resolved.yaml, events.parquet,
links.csv, trace.json and PNG plots (sim/report/plots.py `run_plots`: timeline, utilisation, tier bytes,
links, topology and the workload's own plots); summary.json carries the bottleneck report. Every file
is written atomically (temp file + rename) and only inside the directory given.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from sim.energy.plots import power_over_time
from sim.report import plots
from sim.report.result import RunResult, resolved_yaml
from sim.report.trace import chrome_trace


@contextmanager
def atomic_path(path: Path):
    """Yields a temporary path next to `path`; renames it onto `path` if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path, obj, indent: int | None = 2) -> None:
    """`obj` as JSON; `indent=None` writes it compact with the C encoder (json's indented output is
    pure Python: ~10x slower on a trace of millions of events)."""
    text = json.dumps(obj, indent=indent) if indent is not None else json.dumps(obj, separators=(",", ":"))
    write_text(path, text)


def write_run(result: RunResult, out_dir: str | Path, trace_window_s: tuple[float, float] | None = None) -> list[Path]:
    """Write all result files of one run into `out_dir`; returns the paths written. The trace keeps
    the spans starting inside `trace_window_s` (default: all recorded spans)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def target(name: str) -> Path:
        p = out / name
        written.append(p)
        return p

    write_json(target("summary.json"), result.summary())
    write_text(target("scenario.resolved.yaml"), resolved_yaml(result.scenario))
    spans = result.spans
    with atomic_path(target("events.parquet")) as tmp:
        spans.to_parquet(tmp, index=False)
    with atomic_path(target("links.csv")) as tmp:
        result.links.to_csv(tmp, index=False)
    write_json(
        target("trace.json"),
        chrome_trace(spans, window_s=trace_window_s, metadata={"scenario": result.scenario.name}),
        indent=None,
    )
    for name, draw in plots.run_plots(result):
        with atomic_path(target(f"{name}.png")) as tmp:
            draw(path=tmp)
    if result.power is not None:  # sim/energy/meter.py: cluster power over time
        with atomic_path(target("power.png")) as tmp:
            power_over_time(result.power, title=f"{result.scenario.name}: cluster power", path=tmp)
    return written
