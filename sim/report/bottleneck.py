"""Bottleneck report of a run: the critical path through the recorded spans, the resource that
bounded it, and the utilisation of every resource.

Critical path. Spans carry no explicit dependencies, so the path is reconstructed from the trace
the way one reads a Gantt chart backwards: start from the span that ended last; the activity that
finished last before it started is the one it most plausibly waited for; repeat until time 0.
Among spans ending at the same instant the path takes a flow rather than the span that waits for
it (a GPU's `comm` stream holding a collective, a worker's `read` of a split: resources.is_wrapper),
so communication is charged to what carried it; then the span that started first. A gap between a
span's start and its predecessor's end (nothing recorded ran: latency, host-side waiting) and
spans that are waits (category stall/wait) are charged to `idle`. On lock-step workloads - a
collective whose step ends when its slowest flow ends, a layer that waits for its ring send - this
walk is exactly the chain of slowest activities.

Bounding resource. Every span of the path is charged to its resource (sim/report/resources.py: compute,
NVLink/scale-up, NIC, PCIe, a memory tier, storage, CPU). A network span is charged to the most
utilised link of its route (the one it most likely shared) and takes that link's kind: a flow that
leaves through its NIC but waits on an oversubscribed leaf uplink is `fabric`-bound. The resource
with the most critical-path seconds bounds the run (`replayed` spans - layers a workload replays
from simulated ones - are copies of the simulated part and do not compete); for network resources
the report names the link with the most critical-path seconds and its run-wide utilisation.

Utilisation. `utilisation` is each resource's busy fraction over the run (mean over the instances
that appear in the trace); `links` summarises the link table per link kind (max and mean
utilisation, busiest link); `share_of_critical_path` leaves replayed spans out. When the recorder
dropped spans (`trace_limit`), the path covers the recorded prefix only; `spans_dropped` says so.

The workload's part. `run_bottleneck(result)` adds what the run's workload kind knows about its own
bound (`Workload.bottleneck`, e.g. ingestion's closed-form bounding stage) under `workload`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.report.resources import busy_by_resource, is_wrapper, label, with_resources
from sim.workloads import workload_for

NETWORK_RESOURCES = ("scale_up", "nic", "host", "fabric")


def critical_path(spans: pd.DataFrame) -> pd.DataFrame:
    """The spans of the critical path in time order (rows of `spans` with a `resource` column),
    with `gap_before_s`: idle time between the predecessor's end and this span's start."""
    spans = with_resources(spans)
    live = spans[spans["end_s"] > spans["start_s"]]
    if live.empty:
        return live.assign(gap_before_s=pd.Series(dtype=float))
    # order by end; among equal ends the last row is the one the path takes: a span that is not a
    # wrapper of communication / IO (resources.is_wrapper), then the one that started first
    wrapper = np.array(
        [
            is_wrapper(r, c)
            for r, c in zip(live["resource"].to_numpy(dtype=object), live["category"].to_numpy(dtype=object))
        ],
        dtype=bool,
    )
    order = np.lexsort((-live["start_s"].to_numpy(), ~wrapper, live["end_s"].to_numpy()))
    ends = live["end_s"].to_numpy()[order]
    starts = live["start_s"].to_numpy()[order]
    # predecessor of each span: the last span (in that order) ending at or before its start
    pred = np.searchsorted(ends, starts, side="right") - 1
    path = []
    i = len(order) - 1
    while i >= 0:
        path.append(i)
        i = pred[i]
    path.reverse()
    idx = np.asarray(path)
    prev_end = np.concatenate([[0.0], ends[idx[:-1]]])
    out = live.iloc[order[idx]].copy()
    out["gap_before_s"] = np.maximum(starts[idx] - prev_end, 0.0)
    return out.reset_index(drop=True)


def attribute_links(path: pd.DataFrame, topology, links: pd.DataFrame | None) -> pd.DataFrame:
    """`path` with `link` (the most utilised link of each network span's route; the network names
    flows `... ->dst`) and `resource` refined to that link's kind (a flow that leaves by its NIC
    but is held up on a leaf uplink is `fabric`-bound). Bulk spans (`name (N flows)`) carry no
    destination: they get the run's most utilised network link."""
    path = path.assign(link=None)
    if topology is None or links is None or links.empty or path.empty:
        return path
    util = links["utilisation"].to_numpy()
    kinds = links["kind"].to_numpy()
    network = np.flatnonzero(kinds != "memory")
    hottest = int(network[np.argmax(util[network])]) if len(network) else None
    link_names = links["link"].to_numpy(dtype=object)
    names, resources = [None] * len(path), path["resource"].to_numpy(dtype=object).tolist()
    routes: dict[tuple[str, str], list[int]] = {}
    for i, (comp, name, res) in enumerate(
        zip(path["component"].to_numpy(dtype=object), path["name"].to_numpy(dtype=object), list(resources))
    ):
        if res not in NETWORK_RESOURCES and not res.startswith(("memory:", "storage:")):
            continue
        ids = []
        if "->" in name:
            key = (comp, name.rsplit("->", 1)[1].strip())
            if key not in routes:
                try:
                    routes[key] = [lid for route in topology.routes(*key) for lid in route]
                except (KeyError, ValueError):
                    routes[key] = []
            ids = routes[key]
        elif res in NETWORK_RESOURCES and hottest is not None:
            ids = [hottest]
        if not ids:
            continue
        busiest = ids[int(np.argmax(util[ids]))]
        names[i] = str(link_names[busiest])
        if kinds[busiest] in NETWORK_RESOURCES:
            resources[i] = str(kinds[busiest])
    return path.assign(link=names, resource=resources)


def link_summary(links: pd.DataFrame) -> dict:
    """Per link kind: max and mean utilisation and the busiest link (links that carried bytes)."""
    out = {}
    if links is None or links.empty:
        return out
    used = links[links["bytes"] > 0]
    for kind, df in used.groupby("kind", sort=True):
        top = df.sort_values(["utilisation", "link"], ascending=[False, True]).iloc[0]
        out[kind] = {
            "max_utilisation": float(top["utilisation"]),
            "mean_utilisation": float(df["utilisation"].mean()),
            "busiest_link": str(top["link"]),
            "links_used": len(df),
        }
    return out


def bottleneck_report(
    spans: pd.DataFrame,
    links: pd.DataFrame | None = None,
    topology=None,
    sim_time_s: float | None = None,
    spans_dropped: int = 0,
) -> dict:
    """The report stored as `bottleneck` in summary.json (plain JSON types)."""
    spans = with_resources(spans)
    window = float(sim_time_s if sim_time_s else (spans["end_s"].max() if len(spans) else 0.0))
    path = attribute_links(critical_path(spans), topology, links)
    per_resource = path.groupby("resource")["duration_s"].sum()
    idle = float(path["gap_before_s"].sum()) if len(path) else 0.0
    covered = float(path["end_s"].iloc[-1]) if len(path) else 0.0
    tail = max(window - covered, 0.0) if not spans_dropped else 0.0
    breakdown = {str(k): float(v) for k, v in per_resource.sort_values(ascending=False, kind="stable").items()}
    if idle + tail > 0:
        breakdown["idle"] = breakdown.get("idle", 0.0) + idle + tail
    total = sum(breakdown.values())
    busy_resources = {k: v for k, v in breakdown.items() if k not in ("idle", "replayed")}
    resource = max(busy_resources, key=busy_resources.get) if busy_resources else "idle"
    report = {
        "resource": resource,
        "label": label(resource),
        "share_of_critical_path": _share(breakdown, resource),
        "link": None,
        "link_utilisation": None,
        "critical_path_s": total,
        "critical_path": breakdown,
        "critical_path_spans": len(path),
        "utilisation": {r: float(u) for r, u in zip(*_utilisation(spans, window))},
        "links": link_summary(links),
        "spans_dropped": int(spans_dropped),
    }
    per_link = path[path["resource"] == resource].groupby("link")["duration_s"].sum()
    if len(per_link):
        top = per_link.sort_values(ascending=False, kind="stable").index[0]
        report["link"] = str(top)
        report["link_utilisation"] = float(links.loc[links["link"] == top, "utilisation"].iat[0])
    return report


def _share(breakdown: dict, resource: str) -> float:
    """`resource`'s share of the critical path, replayed spans left out (they copy the rest)."""
    simulated = sum(v for k, v in breakdown.items() if k != "replayed")
    return breakdown.get(resource, 0.0) / simulated if simulated > 0 else 0.0


def _utilisation(spans: pd.DataFrame, window: float):
    table = busy_by_resource(spans, window)
    table = table[table["resource"] != "idle"]
    return table["resource"].tolist(), table["utilisation"].tolist()


def summary_rows(report: dict) -> list[tuple[str, str]]:
    """(name, value) rows for the `dcsim run` table."""
    if not report:
        return []
    where = f" on {report['link']} ({report['link_utilisation']:.0%} utilised)" if report.get("link") else ""
    text = f"{report['label']}{where}, {report['share_of_critical_path']:.0%} of critical path"
    idle = report["critical_path"].get("idle", 0.0) / report["critical_path_s"] if report["critical_path_s"] else 0.0
    if idle > 0.5:
        text += f" (the path is {idle:.0%} idle: waiting for arrivals or latency)"
    rows = [("bottleneck", text)]
    path = ", ".join(
        f"{label(k)} {v / report['critical_path_s']:.0%}"
        for k, v in report["critical_path"].items()
        if report["critical_path_s"] > 0 and v > 0
    )
    rows.append(("critical path", path or "(no spans recorded)"))
    util = ", ".join(f"{label(k)} {v:.0%}" for k, v in sorted(report["utilisation"].items(), key=lambda kv: -kv[1]))
    rows.append(("busy (mean over instances)", util or "-"))
    if report.get("workload"):  # the workload kind's own part (run_bottleneck)
        rows.append(
            (
                "workload's own bound",
                ", ".join(
                    f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in report["workload"].items()
                ),
            )
        )
    if report.get("spans_dropped"):
        rows.append(
            ("trace", f"{report['spans_dropped']} spans dropped (trace_limit): report covers the recorded prefix")
        )
    return rows


def run_bottleneck(result) -> dict:
    """The bottleneck report of a RunResult (sim/report/result.py), with the workload's own part under
    `workload` when its kind adds one (`Workload.bottleneck`, sim/workloads/base.py)."""
    report = bottleneck_report(
        result.spans, result.links, result.cluster.topology, result.sim_time_s, result.sim.recorder.dropped
    )
    config = result.scenario.workload  # None: several jobs
    extra = workload_for(config.kind).bottleneck(result) if config is not None else {}
    if extra:
        report["workload"] = extra
    return report
