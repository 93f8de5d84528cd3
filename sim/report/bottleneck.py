"""Bottleneck report of a run: the critical path through the recorded spans, the resource that
bounded it, and the utilisation of every resource.

Critical path. Walked backwards through the causes every span records (sim/report/critical_path.py):
each second of the run, from its start to the end of the span that ended last, is charged to one
span of the path or to the latency between a span and the one it released. Spans recorded without
causes (a table built by hand, an imported trace) get them inferred from their times by
`infer_causes`: the activity that finished last before a span started is the one it waited for
(among equal ends a flow rather than the stream span that waits for it, resources.is_wrapper).

Bounding resource. Every span of the path is charged to its resource (sim/report/resources.py:
compute, NVLink/scale-up, NIC, PCIe, a memory tier, storage, CPU, a data stall ...); a replayed
span (a layer a workload replays from a simulated one) to the resource of what it copies. A
network span is charged to the most utilised link of its route (the one it most likely shared) and
takes that link's kind: a flow that leaves through its NIC but waits on an oversubscribed leaf
uplink is `fabric`-bound. The resource with the most critical-path seconds bounds the run; for
network resources the report names the link with the most critical-path seconds and its
run-wide utilisation. Time where the path waited with nothing recorded running is `latency`; before
its first span, `idle`. A workload kind may name what its own waits were (`Workload.bottleneck`):
training charges the path's time on other pipeline stages to the pipeline bubble, ingestion the
workers' time to the data stall that bounded its trainers; its reasoning goes under `workload`.

Utilisation. `utilisation` is each resource's busy fraction over the run (mean over the instances
that appear in the trace; an instance is busy while one of its spans is open, the definition
sim/report/resources.py gives every report and plot); `links` summarises the link table per link
kind (max and mean utilisation, busiest link). When the recorder dropped spans (`trace_limit`) and
the path reached one, `exact` is false and `partial` says why.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.engine.codes import factorize_rows
from sim.report.columns import Columns, columns_of, concat
from sim.report.critical_path import GAP, START, UNRECORDED, as_seen_by, walk
from sim.report.resources import PHASE_CATEGORIES, WAIT_CATEGORIES, busy_table, is_wrapper, label, with_resources
from sim.workloads import workload_for
from sim.workloads.base import PathReading

NETWORK_RESOURCES = ("scale_up", "nic", "host", "fabric")
RUNNER_UP_SHARE = 0.15  # other resources named in the bottleneck row from this share of the path


def infer_causes(spans) -> Columns:
    """`spans` (Columns or a DataFrame) with `id`, `after` and `until` where it has none (see the
    module docstring): each span waited for the last one (in end order, flows after the stream spans
    waiting for them, then the one that started first) that ended at or before its start."""
    spans = columns_of(spans)
    if {"id", "after", "until"} <= set(spans):
        return spans
    spans = with_resources(spans)
    wrapper = np.array(
        [is_wrapper(r, c) for r, c in zip(spans["resource"].tolist(), spans["category"].tolist())], dtype=bool
    )
    order = np.lexsort((-spans["start_s"], ~wrapper, spans["end_s"]))
    ends = spans["end_s"][order]
    pred = np.searchsorted(ends, spans["start_s"][order], side="right") - 1
    ids = np.empty(spans.rows, dtype=np.int64)
    ids[order] = np.arange(spans.rows)  # ids in end order: the span that ended last has the largest
    cause = np.full(spans.rows, -1, dtype=np.int64)
    cause[order] = np.where(pred >= 0, pred, -1)
    return spans.assign(id=ids, after=cause, until=cause)


def critical_path(spans) -> Columns:
    """The spans of the critical path in time order (with `resource`, `charged_s` and `gap_before_s`)."""
    return with_resources(walk(infer_causes(spans)).spans)


def attribute_links(path: Columns, topology, links: Columns | None) -> Columns:
    """`path` with `link` and `resource` refined by the link table. A flow (named `... ->dst`) is
    charged to the most utilised link of its route and takes that link's kind (a flow that leaves
    by its NIC but is held up on a leaf uplink is `fabric`-bound). A bulk transfer (`name (N flows)`,
    flows everywhere) is charged to the run's most utilised network link; another span on a network
    resource without a destination (a replayed collective) or a stream span waiting for
    communication (resources.is_wrapper) to the most utilised network link leaving its component,
    of its own kind where it names one."""
    path = path.assign(link=None)
    if topology is None or links is None or links.empty or path.empty:
        return path
    util = links["utilisation"].astype(float)
    kinds = links["kind"].astype(object)
    link_names = links["link"].astype(object)
    sources = np.array([str(n).split("->", 1)[0] for n in link_names], dtype=object)
    network = kinds != "memory"
    own_links: dict[str, np.ndarray] = {}  # component -> its network links (out of the loop: 100K+ links)
    net_ids = np.flatnonzero(network)
    if len(net_ids):
        by_source = np.argsort(sources[net_ids], kind="stable")
        src_sorted = sources[net_ids][by_source]
        cuts = np.flatnonzero(src_sorted[1:] != src_sorted[:-1]) + 1
        for part in np.split(net_ids[by_source], cuts):
            own_links[str(sources[part[0]])] = part  # ascending link ids (stable sort)
    no_links = np.zeros(0, dtype=np.int64)
    names, resources = [None] * path.rows, path["resource"].tolist()
    routes: dict[tuple[str, str], list[int]] = {}
    categories = path["category"].tolist()
    for i, (comp, name, res) in enumerate(zip(path["component"].tolist(), path["name"].tolist(), list(resources))):
        wrapper = is_wrapper(res, categories[i])
        if res not in NETWORK_RESOURCES and not res.startswith(("memory:", "storage:")) and not wrapper:
            continue
        ids: list[int] | np.ndarray = []
        if "->" in name and not wrapper:
            key = (comp, name.rsplit("->", 1)[1].strip())
            if key not in routes:
                try:
                    routes[key] = [lid for route in topology.routes(*key) for lid in route]
                except (KeyError, ValueError):
                    routes[key] = []
            ids = routes[key]
        elif res in NETWORK_RESOURCES and name.endswith(" flows)") and network.any():  # a bulk transfer
            ids = [int(np.flatnonzero(network)[np.argmax(util[network])])]  # its flows go everywhere
        elif res in NETWORK_RESOURCES or wrapper:
            ids = own_links.get(comp, no_links)
            if res in NETWORK_RESOURCES and (kinds[ids] == res).any():
                ids = ids[kinds[ids] == res]
        if len(ids) == 0:
            continue
        busiest = ids[int(np.argmax(util[ids]))]
        names[i] = str(link_names[busiest])
        if kinds[busiest] in NETWORK_RESOURCES:
            resources[i] = str(kinds[busiest])
    return path.assign(link=names, resource=resources)


def link_summary(links) -> dict:
    """Per link kind: max and mean utilisation and the busiest link (links that carried bytes)."""
    out: dict[str, dict] = {}
    if links is None:
        return out
    links = columns_of(links)
    if links.empty:
        return out
    used = links.take(links["bytes"] > 0)
    kinds = used["kind"].astype(object)
    for kind in sorted(set(kinds.tolist())):
        mine = used.take(kinds == kind)
        util, names = mine["utilisation"].astype(float), mine["link"].astype(object)
        top = int(np.lexsort((names, -util))[0])  # the most utilised; among equals, the first by name
        out[kind] = {
            "max_utilisation": float(util[top]),
            "mean_utilisation": float(util.mean()),
            "busiest_link": str(names[top]),
            "links_used": mine.rows,
        }
    return out


def bottleneck_report(
    spans,
    links=None,
    topology=None,
    sim_time_s: float | None = None,
    spans_dropped: int = 0,
    read: Callable[[Columns], PathReading] | None = None,
    skeletons=None,
) -> dict:
    """The report stored as `bottleneck` in summary.json (plain JSON types). `spans` and `links`:
    Columns or DataFrames (the recorder's spans, the network's link table). `read(path)`: the
    workload's reading of the path (`Workload.read_critical_path`); `skeletons`: what the spans the
    recorder dropped left (sim/engine/span_skeleton.py), walked with the spans; busy
    times come from the spans kept."""
    spans = columns_of(spans)
    links = columns_of(links) if links is not None else None
    window = float(sim_time_s if sim_time_s else (spans["end_s"].max() if spans.rows else 0.0))
    skeletons = columns_of(skeletons) if skeletons is not None else None
    every = spans if skeletons is None or skeletons.empty else _with_skeletons(spans, skeletons)
    causes = infer_causes(every)
    walked = walk(causes)
    path = attribute_links(with_resources(walked.spans), topology, links)
    reading = read(path) if read is not None else PathReading(path)
    path = columns_of(reading.path)
    if reading.seen_by:
        first = reading.seen_by[0]
        if str(path["component"][-1]) != first:  # the path to its last span instead
            walked = walk(causes, first)
            path = attribute_links(with_resources(walked.spans), topology, links)
        waiting_for = reading.waiting_for or (lambda resource, component, viewer: resource)
        views = [
            as_seen_by(
                path,
                every,
                viewer,
                lambda resource, component, viewer=viewer: waiting_for(resource, component, viewer),
                reading.since_s,
                reading.seen_on_track,
            )
            for viewer in reading.seen_by
        ]
        path = concat(views)
        path["charged_s"] = path["charged_s"] / len(views)
        walked.idle_s += min(reading.since_s, float(path["end_s"].max()) if path.rows else 0.0)
    breakdown = _sums(path["resource"], path["charged_s"])
    breakdown = {str(k): float(v) for k, v in breakdown.items() if v > 0}
    covered = float(path["end_s"].max()) if path.rows else 0.0
    extra = {
        GAP: float(path["gap_before_s"].sum()) if path.rows else 0.0,
        START: walked.idle_s + max(window - covered, 0.0),  # before the path, and after the last span
        UNRECORDED: walked.unrecorded_s,
    }
    for key, seconds in extra.items():
        if seconds > 0:
            breakdown[key] = breakdown.get(key, 0.0) + seconds
    breakdown = dict(sorted(breakdown.items(), key=lambda kv: -kv[1]))
    total = sum(breakdown.values())
    busy_resources = {k: v for k, v in breakdown.items() if k not in (START, UNRECORDED)}
    resource = max(busy_resources, key=busy_resources.__getitem__) if busy_resources else START
    bounding = {k: v for k, v in busy_resources.items() if k not in reading.not_bounds}
    if bounding:
        resource = max(bounding, key=bounding.__getitem__)
    if reading.bounds_run in breakdown:
        resource = reading.bounds_run
    bound = reading.bounded_by.get(resource)
    utilisation = dict(zip(*_utilisation(spans, window)))  # busy while a span is open (links: see `links`)
    utilisation.update(reading.utilisation)
    report = {
        "resource": resource,
        "label": label(resource) + (f", bounded by {label(bound)}" if bound else ""),
        "bounded_by": bound,
        "share_of_critical_path": breakdown.get(resource, 0.0) / total if total > 0 else 0.0,
        "link": None,
        "link_utilisation": None,
        "critical_path_s": total,
        "critical_path": breakdown,
        "critical_path_spans": path.rows,
        "exact": walked.exact,
        "partial": walked.reason or None,
        "utilisation": {r: float(u) for r, u in sorted(utilisation.items())},
        "links": link_summary(links),
        "spans_dropped": int(spans_dropped),
    }
    if reading.notes:
        report["workload"] = reading.notes
    on_resource = path.take(np.asarray(path["resource"] == resource, dtype=bool))
    linked = np.array([link is not None and link == link for link in on_resource["link"].tolist()], dtype=bool)
    per_link = _sums(on_resource["link"][linked], on_resource["charged_s"][linked], sort=True)
    if per_link and links is not None:
        top = max(per_link, key=per_link.__getitem__)  # the most seconds; among equals, the first by name
        report["link"] = str(top)
        report["link_utilisation"] = float(links["utilisation"][np.flatnonzero(links["link"] == top)[0]])
    return report


def _sums(keys: np.ndarray, values: np.ndarray, sort: bool = False) -> dict:
    """Sum of `values` per key, keys in order of first appearance (`sort`: sorted)."""
    codes, distinct = factorize_rows([keys])
    summed = np.bincount(codes, values.astype(float), minlength=len(distinct))
    out = {key: float(v) for (key,), v in zip(distinct, summed.tolist())}
    return dict(sorted(out.items())) if sort else out


def _with_skeletons(spans: Columns, skeletons: Columns) -> Columns:
    """The spans, then the skeletons, in one table."""
    return Columns({col: np.concatenate([spans[col], skeletons[col]]) for col in spans})


def _utilisation(spans: Columns, window: float):
    table = busy_table(spans, window)
    phases = set(WAIT_CATEGORIES.values()) | set(PHASE_CATEGORIES.values())  # waits and phases: not resources
    keep = [r not in phases and not r.startswith("recovery") for r in table["resource"].tolist()]
    table = table.take(np.array(keep, dtype=bool))
    return table["resource"].tolist(), table["utilisation"].tolist()


def summary_rows(report: dict) -> list[tuple[str, str]]:
    """(name, value) rows for the `dcsim run` table: one `bottleneck` row (the bounding resource and
    any other resource with at least RUNNER_UP_SHARE of the path), the path's shares, busy fractions."""
    if not report:
        return []
    total = report["critical_path_s"]
    shares = {k: v / total for k, v in report["critical_path"].items()} if total > 0 else {}
    where = f" on {report['link']} ({report['link_utilisation']:.0%} utilised)" if report.get("link") else ""
    text = f"{report['label']}{where}, {report['share_of_critical_path']:.0%} of critical path"
    others = [
        f"{label(k)} {v:.0%}"
        for k, v in shares.items()
        if k != report["resource"] and k not in (START, UNRECORDED) and v >= RUNNER_UP_SHARE
    ]
    if others:
        text += "; then " + ", ".join(others)
    if shares.get(START, 0.0) > 0.5:
        text += f" (the path is {shares[START]:.0%} idle: waiting for arrivals)"
    rows = [("bottleneck", text)]
    path = ", ".join(f"{label(k)} {v:.0%}" for k, v in shares.items() if v > 0)
    if report.get("partial"):
        path += f" (partial: {report['partial']})"
    rows.append(("critical path", path or "(no spans recorded)"))
    util = ", ".join(f"{label(k)} {v:.0%}" for k, v in sorted(report["utilisation"].items(), key=lambda kv: -kv[1]))
    rows.append(("busy (time with a span open, mean over instances)", util or "-"))
    if report.get("workload"):  # the workload kind's own reading of its path (run_bottleneck)
        rows.append(
            (
                "workload's view",
                ", ".join(
                    f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in report["workload"].items()
                ),
            )
        )
    if report.get("spans_dropped"):
        rows.append(("trace", f"{report['spans_dropped']} spans dropped (trace_limit): the trace holds the prefix"))
    return rows


def run_bottleneck(result) -> dict:
    """The bottleneck report of a RunResult (sim/report/result.py), with the workload's own part under
    `workload` when its kind adds one (`Workload.bottleneck`, sim/workloads/base.py)."""
    config = result.scenario.workload  # None: several jobs
    workload = workload_for(config.kind) if config is not None else None
    skeleton = result.sim.recorder.skeleton
    report = bottleneck_report(
        result.span_columns,
        result.cluster.network.link_columns(result.sim_time_s),
        result.cluster.topology,
        result.sim_time_s,
        result.sim.recorder.dropped,
        read=(lambda path: workload.read_critical_path(result, path)) if workload is not None else None,
        skeletons=skeleton.columns() if len(skeleton) else None,
    )
    if skeleton.lost and not report["exact"]:  # say which spans went, and what to do about it
        report["partial"] = (
            f"the path reached the oldest of the last {len(skeleton):,} dropped spans kept (of "
            f"{result.sim.recorder.dropped:,} dropped past trace_limit): the time before it is unrecorded; "
            "a smaller run (fewer iterations, replicas or layers) is walked whole"
        )
    return report
