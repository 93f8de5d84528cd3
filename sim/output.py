"""Writing a run's results to a directory: summary.json, scenario.resolved.yaml, events.parquet,
links.csv, trace.json and PNG plots. Every file is written atomically (temp file + rename) and only
inside the directory given.
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from sim import plots
from sim.runner import RunResult, resolved_yaml
from sim.trace import chrome_trace


@contextmanager
def atomic_path(path: Path):
    """Yields a temporary path next to `path`; renames it onto `path` if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2))


def write_run(result: RunResult, out_dir: str | Path) -> list[Path]:
    """Write all result files of one run into `out_dir`; returns the paths written."""
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
    write_json(target("trace.json"), chrome_trace(spans))
    with atomic_path(target("timeline.png")) as tmp:
        plots.timeline(spans, title=f"{result.scenario.name}: timeline", path=str(tmp) + ".png")
        os.replace(str(tmp) + ".png", tmp)
    with atomic_path(target("links.png")) as tmp:
        plots.link_utilisation(result.links, title=f"{result.scenario.name}: busiest links", path=str(tmp) + ".png")
        os.replace(str(tmp) + ".png", tmp)
    return written
