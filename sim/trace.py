"""Chrome / Perfetto trace export of the recorder's spans.

One process per host (or per component group: switch, pool), one thread per component and track
(e.g. `h0/g3 compute`, `h0/g3 nic`), complete events ("X") with the span's name, bytes and FLOP.
Open the file in https://ui.perfetto.dev or chrome://tracing.
"""
from __future__ import annotations

import json

import pandas as pd


def _process_of(component: str) -> str:
    return component.split("/")[0] if "/" in component else component.rstrip("0123456789") or component


def chrome_trace(spans: pd.DataFrame, max_events: int | None = 200_000) -> dict:
    events = []
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    rows = spans if max_events is None else spans.head(max_events)
    for comp, track, name, start, end, nbytes, flop in zip(rows["component"], rows["track"], rows["name"],
                                                           rows["start_s"], rows["end_s"], rows["bytes"], rows["flop"]):
        proc = _process_of(comp)
        if proc not in pids:
            pids[proc] = len(pids)
            events.append({"ph": "M", "name": "process_name", "pid": pids[proc], "args": {"name": proc}})
        key = (comp, track)
        if key not in tids:
            tids[key] = len(tids)
            events.append({"ph": "M", "name": "thread_name", "pid": pids[proc], "tid": tids[key],
                           "args": {"name": f"{comp} {track}"}})
        args = {}
        if nbytes:
            args["bytes"] = float(nbytes)
        if flop:
            args["flop"] = float(flop)
        events.append({"ph": "X", "name": name, "pid": pids[proc], "tid": tids[key], "ts": float(start) * 1e6,
                       "dur": max(float(end - start) * 1e6, 0.0), "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(spans: pd.DataFrame, path, max_events: int | None = 200_000) -> None:
    with open(path, "w") as f:
        json.dump(chrome_trace(spans, max_events), f)
