"""Sweeps: many runs of one base scenario over a grid of `--set`-style overrides.

    dcsim sweep scenarios/allreduce-2x8-h100.yaml --grid workload.bytes=64MiB,1GiB \\
        --grid hardware.nodes=2,4 --out runs/ar-sweep            # 4 points on a local process pool

    from sim.studies.sweep import run_sweep
    result = run_sweep("base.yaml", grid={"hardware.nodes": [2, 4]}, out_dir="runs/x", workers=2)
    result.table                                                 # one row per point (pandas)

Concepts
- axis: one swept key and its values. On the command line `KEY=V1,V2,...` is read as a YAML flow
  sequence, so values are typed like `--set` values (`2` is an int, `64 MiB` a string the scenario
  parses with units, `[1, 2],[3]` two lists).
- expansion: `grid` axes multiply (cartesian product, first axis varying slowest); `zipped` axes have
  equal lengths and advance together, forming one more axis of the product.
- point: a mapping {key: value} of overrides. Its id hashes the base scenario's parsed YAML and the
  overrides, so a rerun into the same directory recognises finished points (resume after a crash or
  Ctrl-C) and growing a grid runs only the new points.
- record: what running a point gives (`run_point`): status ok|error, a one-line error, wall time and
  the run's summary JSON (the same object as `dcsim run --json`). Each is written atomically to
  `DIR/points/<id>.json` the moment it arrives; that directory is the sweep's durable state.
- table: one row per point of the current sweep, derived from the records and rewritten atomically
  (at most about once a second while running, and at the end) as `DIR/results.parquet` and
  `DIR/results.csv`. Columns: `point`, each swept key, `overrides` (JSON), `status`, `error`,
  `wall_s`, `sim_time_s`, `events`, then the metrics with nested dicts flattened to dotted names
  (`jobs.a.time_s`) and lists as JSON strings.
- exit status of `dcsim sweep`: 0 when every point is ok; 1 when any point failed (after the table
  is written and the failures are counted on stderr); 2 for bad arguments or an unwritable `--out`,
  checked before any point runs.
- executors (sim/studies/executors.py): in-process, a local process pool or a dask.distributed cluster;
  which one ran a point does not change its row (except `wall_s`).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sim.errors import ScenarioError, check_output_dir
from sim.report.output import atomic_path, write_json
from sim.scenario.model import apply_override, parse_override, read_yaml
from sim.scenario.yaml_text import load_yaml

FIXED_COLUMNS = ("point", "overrides", "status", "error", "wall_s", "sim_time_s", "events")
TABLE_FLUSH_INTERVAL_S = 1.0
MAX_FLATTENED_DICT_KEYS = 32  # a metric dict wider than this stays one JSON column
EXIT_POINTS_FAILED = 1  # `dcsim sweep` when any point ended with an error (bad arguments: 2)


# ---------------------------------------------------------------------------------------------
# axes and expansion


def parse_axis(text: str, flag: str = "--grid") -> tuple[str, list[Any]]:
    """'hardware.nodes=2,4' -> ('hardware.nodes', [2, 4]); values are a YAML flow sequence."""
    try:
        parts, _ = parse_override(text)
    except ScenarioError as err:
        raise ScenarioError(err.message, path=flag, value=text) from None
    raw = text.partition("=")[2]
    try:
        values = load_yaml(f"[{raw}]")
    except yaml.YAMLError:
        raise ScenarioError(
            "values must be a comma-separated YAML list, e.g. key=1,2 or key='64 MiB','1 GiB'", path=flag, value=text
        ) from None
    if not values:
        raise ScenarioError("no values given", path=flag, value=text)
    return ".".join(parts), values


def parse_axes(texts: Sequence[str], flag: str) -> dict[str, list[Any]]:
    axes: dict[str, list[Any]] = {}
    for text in texts:
        key, values = parse_axis(text, flag)
        if key in axes:
            raise ScenarioError("key given twice", path=flag, value=key)
        axes[key] = values
    return axes


def expand(
    grid: Mapping[str, Sequence] | None = None, zipped: Mapping[str, Sequence] | None = None
) -> list[dict[str, Any]]:
    """The sweep's points in order: product of the grid axes and the zipped axes taken together."""
    grid, zipped = dict(grid or {}), dict(zipped or {})
    both = set(grid) & set(zipped)
    if both:
        raise ScenarioError("a key cannot be both in --grid and --zip", path=sorted(both)[0])
    for key, values in {**grid, **zipped}.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ScenarioError("an axis needs a non-empty list of values", path=key, value=values)
    lengths = {key: len(values) for key, values in zipped.items()}
    if len(set(lengths.values())) > 1:
        raise ScenarioError(f"--zip lists must have equal lengths, got {lengths}", path="--zip")
    axes = [[{key: v} for v in values] for key, values in grid.items()]
    if zipped:
        axes.append([dict(zip(zipped, combo)) for combo in zip(*zipped.values())])
    return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)]


def point_id(base: Mapping, overrides: Mapping[str, Any]) -> str:
    """Stable id of a point: hash of the base scenario data and the overrides (order-independent)."""
    text = json.dumps({"base": base, "set": sorted(overrides.items())}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# running one point (executes on workers: everything it needs travels in the task)


@dataclass(frozen=True)
class PointTask:
    point: str
    overrides: dict[str, Any]
    base: dict = field(repr=False)
    base_dir: str = "."
    file: str = ""


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def error_record(task: PointTask, message: str, wall_s: float = 0.0) -> dict:
    return {
        "point": task.point,
        "overrides": task.overrides,
        "status": "error",
        "error": one_line(message),
        "wall_s": wall_s,
        "summary": None,
    }


def run_point(task: PointTask) -> dict:
    """Apply the overrides, validate, run; never raises for a bad point (the error is recorded)."""
    from sim.runner import run
    from sim.scenario.model import scenario_from_dict

    start = time.perf_counter()
    try:
        data = copy.deepcopy(task.base)
        for key, value in sorted(task.overrides.items()):  # parents ('a.b') sort before children ('a.b.c')
            apply_override(data, key.split("."), value)
        summary = run(scenario_from_dict(data, base_dir=task.base_dir)).summary()
    except ScenarioError as err:
        return error_record(task, str(err.with_file(task.file) if task.file else err), time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - a bug hit by one point must not stop the sweep
        return error_record(task, f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
    return {
        "point": task.point,
        "overrides": task.overrides,
        "status": "ok",
        "error": "",
        "wall_s": time.perf_counter() - start,
        "summary": summary,
    }


# ---------------------------------------------------------------------------------------------
# records -> table


def _cell(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def flatten_metrics(metrics: Mapping, prefix: str = "") -> dict[str, Any]:
    """{'jobs': {'a': {'time_s': 1}}, 'per_size': [...]} -> {'jobs.a.time_s': 1, 'per_size': '[...]'}."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and 0 < len(value) <= MAX_FLATTENED_DICT_KEYS:
            out.update(flatten_metrics(value, prefix=f"{name}."))
        else:
            out[name] = _cell(value)
    return out


def table_row(record: Mapping, keys: Sequence[str]) -> dict[str, Any]:
    summary = record.get("summary") or {}
    row: dict[str, Any] = {"point": record["point"]}
    row.update({key: _cell(record["overrides"].get(key)) for key in keys})
    row.update(
        overrides=json.dumps(record["overrides"], sort_keys=True),
        status=record["status"],
        error=record["error"],
        wall_s=record["wall_s"],
        sim_time_s=summary.get("sim_time_s"),
        events=summary.get("events"),
    )
    for name, value in flatten_metrics(summary.get("metrics") or {}).items():
        row[f"metrics.{name}" if name in row else name] = value
    return row


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def results_frame(rows: Sequence[Mapping]) -> pd.DataFrame:
    """Rows -> DataFrame whose columns each hold one kind of value (numbers, bools or text)."""
    frame = pd.DataFrame(list(rows))
    for col in frame.columns:
        values = [row.get(col) for row in rows]
        present = [v for v in values if not _missing(v)]
        if len({_kind(v) for v in present}) > 1:
            frame[col] = pd.Series([None if _missing(v) else str(v) for v in values], dtype=object)
        elif present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            frame[col] = pd.array([None if _missing(v) else v for v in values], dtype="Int64")
    return frame


def _well_formed(record: Any, point: str) -> bool:
    """What `run_point` writes: the point's id, its overrides, ok|error, a one-line error, wall time
    and (when ok) the run's summary with its metrics."""
    if not isinstance(record, dict) or record.get("point") != point:
        return False
    status, summary = record.get("status"), record.get("summary")
    return (
        status in ("ok", "error")
        and isinstance(record.get("overrides"), dict)
        and isinstance(record.get("error"), str)
        and isinstance(record.get("wall_s"), (int, float))
        and not isinstance(record.get("wall_s"), bool)
        and (
            summary is None
            if status == "error"
            else isinstance(summary, dict) and isinstance(summary.get("metrics"), dict)
        )
    )


class SweepStore:
    """A sweep directory: `points/<id>.json` records (durable state) and the derived results tables."""

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.points_dir = self.dir / "points"
        self.points_dir.mkdir(parents=True, exist_ok=True)

    def load(self, point: str) -> dict | None:
        """The finished record of `point`, or None if missing or not a well-formed record (a damaged
        file is treated as unfinished: the point runs again and its record is rewritten)."""
        path = self.points_dir / f"{point}.json"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return record if _well_formed(record, point) else None

    def save(self, record: Mapping) -> None:
        write_json(self.points_dir / f"{record['point']}.json", record)

    def write_table(self, records: Sequence[Mapping], keys: Sequence[str]) -> pd.DataFrame:
        frame = results_frame([table_row(r, keys) for r in records])
        if frame.empty:
            frame = pd.DataFrame(columns=["point", *keys, *FIXED_COLUMNS[1:]])
        with atomic_path(self.dir / "results.parquet") as tmp:
            frame.to_parquet(tmp, index=False)
        with atomic_path(self.dir / "results.csv") as tmp:
            frame.to_csv(tmp, index=False)
        return frame


# ---------------------------------------------------------------------------------------------
# the sweep


@dataclass
class SweepResult:
    table: pd.DataFrame
    points: int  # points in the sweep
    ran: int  # points run by this call
    skipped: int  # points already finished in the directory
    failed: int  # points with status error (in the whole table)
    wall_s: float
    out_dir: Path

    @property
    def points_per_s(self) -> float:
        return self.ran / self.wall_s if self.wall_s > 0 else 0.0

    def report(self) -> str:
        ok = int((self.table["status"] == "ok").sum()) if len(self.table) else 0
        text = (
            f"{self.points} points: {ok} ok, {self.failed} failed ({self.ran} run now, {self.skipped} finished "
            f"before) in {self.wall_s:.1f} s ({self.points_per_s:.2f} points/s); table: "
            f"{self.out_dir / 'results.parquet'} and results.csv"
        )
        return "\n".join([text, *(f"  error: {e}" for e in self.first_errors())])

    def first_errors(self, n: int = 3) -> list[str]:
        errors = self.table.loc[self.table["status"] == "error", "error"] if len(self.table) else []
        return list(dict.fromkeys(errors))[:n]


def load_base(scenario: str | Path) -> dict:
    data = read_yaml(scenario)
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", value=type(data).__name__, file=str(scenario))
    return data


def plan_sweep(scenario: str | Path, grid=None, zipped=None, fixed: Sequence[str] = ()) -> list[PointTask]:
    """The sweep's tasks in order (no running): base scenario (+ `fixed` --set overrides) x points."""
    base = load_base(scenario)
    try:
        for text in fixed:
            apply_override(base, *parse_override(text))
    except ScenarioError as err:
        raise err.with_file(str(scenario)) from None
    return [
        PointTask(
            point=point_id(base, p), overrides=p, base=base, base_dir=str(Path(scenario).parent), file=str(scenario)
        )
        for p in expand(grid, zipped)
    ]


def run_sweep(
    scenario: str | Path,
    grid: Mapping[str, Sequence] | None = None,
    zipped: Mapping[str, Sequence] | None = None,
    out_dir: str | Path = "sweep",
    workers: int | None = None,
    dask: Any = None,
    retry_failed: bool = False,
    progress: bool = True,
    fixed: Sequence[str] = (),
) -> SweepResult:
    """Run every point not yet finished in `out_dir`; returns the table of the whole sweep.

    `workers`: 1 runs in this process, N>1 a local process pool (default: CPU count). `dask`: a
    scheduler address ('tcp://host:8786'), 'local' for a LocalCluster of `workers` processes, or a
    `distributed.Client`. A failing point becomes a row with status 'error'; Ctrl-C keeps every
    finished point (rerun the same command to finish the rest). From a script (not a notebook),
    call it under `if __name__ == "__main__":`, as any multiprocessing or dask LocalCluster code.
    """
    from sim.studies.executors import make_executor

    start = time.perf_counter()
    tasks = plan_sweep(scenario, grid, zipped, fixed)
    check_output_dir(out_dir)  # before any point runs
    keys = list(dict.fromkeys(k for t in tasks for k in t.overrides))
    store = SweepStore(out_dir)
    write_json(
        store.dir / "sweep.json",
        {
            "scenario": str(scenario),
            "set": list(fixed),
            "grid": dict(grid or {}),
            "zip": dict(zipped or {}),
            "points": len(tasks),
        },
    )
    done: dict[str, dict] = {}
    for task in tasks:
        record = store.load(task.point)
        if record and (record["status"] == "ok" or not retry_failed):
            done[task.point] = record
    pending = [t for t in tasks if t.point not in done]
    skipped = len(tasks) - len(pending)

    def finished() -> list[dict]:
        return [done[t.point] for t in tasks if t.point in done]

    bar = _progress_bar(len(pending), skipped, enabled=progress)
    ok = failed = 0
    last_flush = time.perf_counter()
    try:
        if pending:
            executor = make_executor(workers=workers, dask=dask, points=len(pending))
            for record in executor.run(run_point, pending):
                record = json.loads(json.dumps(record, default=str))  # exactly what a resume reads back
                store.save(record)
                done[record["point"]] = record
                ok, failed = ok + (record["status"] == "ok"), failed + (record["status"] != "ok")
                if bar is not None:
                    bar.set_postfix_str(f"ok={ok} failed={failed}", refresh=False)
                    bar.update(1)
                if time.perf_counter() - last_flush > TABLE_FLUSH_INTERVAL_S:
                    store.write_table(finished(), keys)
                    last_flush = time.perf_counter()
    finally:
        if bar is not None:
            bar.close()
        table = store.write_table(finished(), keys)
    return SweepResult(
        table=table,
        points=len(tasks),
        ran=ok + failed,
        skipped=skipped,
        failed=int((table["status"] == "error").sum()) if len(table) else 0,
        wall_s=time.perf_counter() - start,
        out_dir=store.dir,
    )


def _progress_bar(total: int, skipped: int, enabled: bool):
    if not enabled or total == 0 or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=f"sweep ({skipped} done before)" if skipped else "sweep",
        unit="pt",
        file=sys.stderr,
        dynamic_ncols=True,
    )


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def sweep_command(args) -> int:
    """`dcsim sweep` (see sim/cli.py for the flags)."""
    result = run_sweep(
        args.scenario,
        grid=parse_axes(args.grid, "--grid"),
        zipped=parse_axes(args.zip, "--zip"),
        out_dir=args.out,
        workers=args.workers,
        dask=args.dask,
        retry_failed=args.retry_failed,
        progress=not args.quiet,
        fixed=args.set,
    )
    written = []
    if args.plot:
        from sim.studies.sweep_plots import plot_sweep_metrics

        written = plot_sweep_metrics(
            result.table,
            args.plot,
            keys=list(dict.fromkeys([*parse_axes(args.grid, "--grid"), *parse_axes(args.zip, "--zip")])),
            out_dir=result.out_dir,
        )
    if not args.quiet:
        print(result.report())
        for path in written:
            print(f"plot: {path}")
    if result.failed:  # the table is written; the exit code tells scripts that not every point ran
        print(
            f"dcsim sweep: {result.failed} of {result.points} points failed (status 'error' in "
            f"{result.out_dir / 'results.csv'}; rerun with --retry-failed after fixing)",
            file=sys.stderr,
        )
        return EXIT_POINTS_FAILED
    return 0
