"""Chrome / Perfetto trace export of the recorder's spans.

Layout (open the file in https://ui.perfetto.dev or chrome://tracing):
- one *process* per host (`host 0`, `host 1`, ...; pool hosts such as `storage3` are hosts too;
  anything else - switches, a job master - gets a process named after its component);
- one *thread* per device stream, NIC, memory tier inside it: `g3 compute`, `g3 comm`, `g3 nic`,
  `g3 scale_up` (flows a GPU sends over NVLink), `cpu compute`, `ddr5 memory` (reads from a tier);
- complete events ("X") named as the workload named the kernel or flow, with `args`: resource,
  bytes (and a human `size`), achieved rate for flows, FLOP for kernels, category;
- optional counter tracks (`utilisation`): busy fraction of every resource over time, in a
  `cluster` process.

Size cap: huge runs record millions of spans; a trace keeps the spans that start inside `window_s`
(a (start, end) pair in simulated seconds, e.g. the first iterations) and of those the first
`max_spans` by start time. `otherData` records what was cut.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from hardware_models.units import format_bytes
from sim.report.resources import utilisation_over_time, with_resources

_HOST = re.compile(r"^h(\d+)/(.+)$")
_POOL_HOST = re.compile(r"^([A-Za-z_-]+)(\d+)(?:/(.+))?$")


def process_and_thread(component: str, track: str) -> tuple[str, str, tuple]:
    """(process name, thread name, sort key) of a span's component and track."""
    m = _HOST.match(component)
    if m:
        host, local = int(m.group(1)), m.group(2)
        return f"host {host}", f"{local} {track}", (0, "", host)
    m = _POOL_HOST.match(component)
    if m:
        pool, k, local = m.group(1), int(m.group(2)), m.group(3)
        return f"{pool}{k}", f"{local or pool} {track}", (1, pool, k)
    return component, track, (2, component, 0)


def select_spans(
    spans: pd.DataFrame, max_spans: int | None = 200_000, window_s: tuple[float, float] | None = None
) -> pd.DataFrame:
    """The spans a trace keeps: those starting inside `window_s`, the first `max_spans` by start."""
    rows = spans
    if window_s is not None:
        t0, t1 = window_s
        rows = rows[(rows["start_s"] >= t0) & (rows["start_s"] <= t1)]
    rows = rows.sort_values(["start_s", "end_s"], kind="stable")
    if max_spans is not None:
        rows = rows.head(max_spans)
    return rows


def chrome_trace(
    spans: pd.DataFrame,
    max_events: int | None = 200_000,
    window_s: tuple[float, float] | None = None,
    utilisation: bool = True,
    counter_bins: int = 200,
    metadata: dict | None = None,
) -> dict:
    """Trace Event Format dict of `spans` (see the module docstring). `max_events` caps the spans."""
    rows = with_resources(select_spans(spans, max_events, window_s))
    events: list[dict] = []
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    lanes = {}
    for comp, track in dict.fromkeys(zip(rows["component"], rows["track"])):
        lanes[(comp, track)] = process_and_thread(comp, track)
    for proc, _, _key in sorted(lanes.values(), key=lambda v: (v[2], v[1])):
        if proc not in pids:
            pids[proc] = len(pids) + 1
            events.append({"ph": "M", "name": "process_name", "pid": pids[proc], "args": {"name": proc}})
            events.append(
                {"ph": "M", "name": "process_sort_index", "pid": pids[proc], "args": {"sort_index": pids[proc]}}
            )
    for lane, (proc, thread, _) in sorted(lanes.items(), key=lambda kv: (kv[1][2], kv[1][1])):
        tids[lane] = len(tids) + 1
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pids[proc], "tid": tids[lane], "args": {"name": thread}}
        )
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pids[proc],
                "tid": tids[lane],
                "args": {"sort_index": tids[lane]},
            }
        )
    sizes: dict[float, str] = {}  # format_bytes per distinct size (flows of a collective repeat them)
    columns = ("component", "track", "name", "start_s", "end_s", "bytes", "flop", "category", "resource")
    for comp, track, name, start, end, nbytes, flop, cat, res in zip(
        *(
            rows[c]
            .to_numpy(dtype=object if c in ("component", "track", "name", "category", "resource") else float)
            .tolist()
            for c in columns
        )
    ):
        dur = max(end - start, 0.0)
        args: dict = {"resource": res}
        if cat:
            args["category"] = cat
        if nbytes:
            args["bytes"] = nbytes
            size = sizes.get(nbytes)
            args["size"] = size if size is not None else sizes.setdefault(nbytes, format_bytes(nbytes))
            if cat == "comm" and dur > 0:
                args["rate_GB_per_s"] = round(nbytes / dur / 1e9, 3)
        if flop:
            args["flop"] = flop
            if dur > 0:
                args["tflop_per_s"] = round(flop / dur / 1e12, 3)
        proc = lanes[(comp, track)][0]
        events.append(
            {
                "ph": "X",
                "name": name,
                "cat": cat or res,
                "pid": pids[proc],
                "tid": tids[(comp, track)],
                "ts": start * 1e6,
                "dur": dur * 1e6,
                "args": args,
            }
        )
    if utilisation and len(rows):
        events.extend(_counter_events(rows, counter_bins, len(pids) + 1))
    other = {
        "spans_total": len(spans),
        "spans_in_trace": len(rows),
        "window_s": list(window_s) if window_s else None,
        **(metadata or {}),
    }
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def _counter_events(rows: pd.DataFrame, bins: int, pid: int) -> list[dict]:
    """Counter track per resource: busy fraction (mean over instances) in `bins` time bins."""
    start = float(rows["start_s"].min())
    util = utilisation_over_time(rows, bins=bins)
    util = util[util.index >= start - (util.index[1] - util.index[0] if len(util) > 1 else 0)]
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "cluster utilisation"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": 0}},
    ]
    if util.empty:
        return events
    half = (util.index[1] - util.index[0]) / 2 if len(util) > 1 else 0.0
    for resource in util.columns:
        values = util[resource].to_numpy()
        keep = np.r_[True, np.diff(values) != 0]  # only changes (Perfetto holds the value)
        for t, v in zip(util.index[keep] - half, values[keep]):
            events.append(
                {
                    "ph": "C",
                    "name": f"busy {resource}",
                    "pid": pid,
                    "ts": round(max(float(t), 0.0) * 1e6, 6),
                    "args": {"busy_percent": round(float(v) * 100, 2)},
                }
            )
    return events


def write_chrome_trace(
    spans: pd.DataFrame, path, max_events: int | None = 200_000, window_s: tuple[float, float] | None = None, **kwargs
) -> None:
    from pathlib import Path

    from sim.report.output import atomic_path  # lazy: sim.report.output imports this module; atomic: temp + rename

    with atomic_path(Path(path)) as tmp, open(tmp, "w") as f:
        json.dump(chrome_trace(spans, max_events, window_s, **kwargs), f)


def parse_window(text: str | None) -> tuple[float, float] | None:
    """`"START:END"` in simulated time with units (`"0:2ms"`, `"1 ms:3 ms"`) -> seconds, or None."""
    if not text:
        return None
    from hardware_models.units import parse_quantity
    from sim.errors import ScenarioError

    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError("expected START:END")
        start, end = (parse_quantity(p.strip() if any(c.isalpha() for c in p) else float(p), "seconds") for p in parts)
    except ValueError as exc:
        raise ScenarioError(
            f"{exc}; expected START:END in simulated time, e.g. 0:2ms", path="--trace-window", value=text
        ) from None
    if not 0 <= start < end:
        raise ScenarioError("expected 0 <= START < END", path="--trace-window", value=text)
    return start, end
