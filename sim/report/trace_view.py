"""A static "screenshot" of a Chrome/Perfetto trace (trace.json) drawn with matplotlib, for reports
and the README where no browser is at hand.

The layout follows Perfetto's: processes (hosts) top to bottom in their sort order, each with a
header row, then one lane per thread (device stream, NIC, tier) with its slices; slices are coloured
by their resource (`args.resource`, as sim/report/trace.py writes it) and named when wide enough. The busy
counters of the `cluster utilisation` process, if present, are drawn as a strip on top.

    python -m sim.report.trace_view runs/x/trace.json docs/img/trace-cp-70b.png [--window 0:2ms] [--lanes 24]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib.pyplot as plt  # backend: chosen in sim.report.plots
import numpy as np

from sim.report.plots import finish, resource_color, time_scale
from sim.report.resources import label


def _lanes(events: list[dict]):
    procs, threads, psort, tsort = {}, {}, {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["name"] == "process_sort_index":
            psort[e["pid"]] = e["args"]["sort_index"]
        elif e["name"] == "thread_sort_index":
            tsort[(e["pid"], e["tid"])] = e["args"]["sort_index"]
    return procs, threads, psort, tsort


def render_trace(
    trace,
    path=None,
    window_us: tuple[float, float] | None = None,
    max_lanes: int = 24,
    title: str = "trace.json as Perfetto shows it",
):
    """Draw `trace` (a trace dict or a path to trace.json); returns the Figure."""
    if not isinstance(trace, dict):
        trace = json.loads(Path(trace).read_text())
    events = trace["traceEvents"]
    procs, threads, psort, tsort = _lanes(events)
    slices = [e for e in events if e.get("ph") == "X"]
    if window_us is not None:
        slices = [e for e in slices if window_us[0] <= e["ts"] <= window_us[1]]
    counters = defaultdict(list)
    for e in events:
        if e.get("ph") == "C" and (window_us is None or window_us[0] <= e["ts"] <= window_us[1]):
            counters[e["name"]].append((e["ts"], next(iter(e["args"].values()))))
    used = sorted({(e["pid"], e["tid"]) for e in slices}, key=lambda k: (psort.get(k[0], k[0]), tsort.get(k, k[1])))[
        :max_lanes
    ]
    rows: list[tuple[str, object]] = []  # ("proc", name) header or ("lane", (pid, tid))
    for key in used:
        if ("proc", key[0]) not in rows:
            rows.append(("proc", key[0]))
        rows.append(("lane", key))
    y_of = {r[1]: i for i, r in enumerate(rows) if r[0] == "lane"}
    t_end = max((e["ts"] + e["dur"] for e in slices), default=1.0) / 1e6
    scale, unit = time_scale(t_end)
    k = scale / 1e6
    fig, (top, ax) = plt.subplots(
        2, 1, figsize=(12, 0.26 * len(rows) + 2.6), sharex=True, height_ratios=[1, max(len(rows), 4) / 4]
    )
    for name, pts in sorted(counters.items()):
        pts.sort()
        ts, vs = np.array(pts).T
        resource = name.removeprefix("busy ")
        top.step(ts * k, vs, where="post", color=resource_color(resource), label=label(resource), lw=1.2)
    top.set_ylabel("busy %", fontsize=8)
    top.set_ylim(0, 105)
    if counters:
        top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    top.set_title(title, fontsize=10)
    by_res = defaultdict(list)
    for e in slices:
        key = (e["pid"], e["tid"])
        if key in y_of:
            by_res[e["args"].get("resource", e.get("cat", ""))].append(e)
    for resource, evs in sorted(by_res.items()):
        ys = [y_of[(e["pid"], e["tid"])] for e in evs]
        ax.barh(
            ys,
            [e["dur"] * k for e in evs],
            left=[e["ts"] * k for e in evs],
            height=0.8,
            color=resource_color(resource),
            edgecolor="white",
            linewidth=0.3,
            label=label(resource),
        )
    span = (max((e["ts"] + e["dur"] for e in slices), default=1.0) - min((e["ts"] for e in slices), default=0.0)) * k
    for e in slices:
        key = (e["pid"], e["tid"])
        if key in y_of and e["dur"] * k > span / 14:
            ax.text(
                (e["ts"] + e["dur"] / 2) * k,
                y_of[key],
                e["name"][:28],
                ha="center",
                va="center",
                fontsize=5.5,
                color="white",
                clip_on=True,
            )
    labels = []
    for kind, val in rows:
        labels.append(procs.get(val, str(val)) if kind == "proc" else "   " + threads.get(val, str(val)))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    for i, (kind, _) in enumerate(rows):
        if kind == "proc":
            ax.get_yticklabels()[i].set_fontweight("bold")
            ax.axhspan(i - 0.5, i + 0.5, color="0.92", zorder=0)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="resource", title_fontsize=7)
    hidden = len({(e["pid"], e["tid"]) for e in slices}) - len(used)
    if hidden > 0:
        top.set_title(f"{title}  ({hidden} more threads not shown)", fontsize=10)
    return finish(fig, path)


def main(argv: list[str] | None = None) -> None:
    from sim.report.trace import parse_window

    p = argparse.ArgumentParser(prog="python -m sim.report.trace_view", description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("png")
    p.add_argument("--window", help="simulated time window START:END, e.g. 0:2ms")
    p.add_argument("--lanes", type=int, default=24)
    args = p.parse_args(argv)
    window = parse_window(args.window)
    render_trace(args.trace, args.png, tuple(t * 1e6 for t in window) if window else None, args.lanes)


if __name__ == "__main__":
    main()
