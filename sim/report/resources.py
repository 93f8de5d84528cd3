"""Resources of a run, derived from the recorder's spans: what each span occupied and how busy
every resource was over time. Bottleneck reports, utilisation plots and traces all build on this.

Span -> resource (`resource_of`): a span's `track` names what it ran on, its `component` where:

| span                                        | resource             |
|---------------------------------------------|----------------------|
| kernel on a GPU's `compute` stream          | `compute`            |
| kernel on a GPU's other streams (`comm` ..) | `gpu:<stream>`       |
| kernel on a CPU (`compute`/`cpu` tracks of  | `cpu`                |
| non-GPU components: hosts, pool hosts)      |                      |
| span with category `stall` (data stall)     | `stall`              |
| span with category `bubble`                 | `bubble`             |
| span with category `fault` / `recovery`     | `recovery`           |
| span with category `queue`                  | `queueing`           |
| span with category `fault:<cause>`          | `recovery: <cause>`  |
| span with category `checkpoint`/`useful`    | `checkpoint`/`useful work` (a fault campaign's phases) |
| span with category `page_fault`             | `page faults`        |
| span with category `memory:<tier>` (latency | `memory:<tier>`      |
| of accesses to that tier)                   |                      |
| span on track `memory` of a host CPU        | `cpu` (waiting on memory) |
| span with category wait / idle              | `idle`               |
| flow whose first link is the scale-up link  | `scale_up` (NVLink)  |
| flow whose first link is a NIC              | `nic`                |
| flow over the GPU-host link (PCIe)          | `host` (PCIe)        |
| flow read from a host memory tier `h0/ddr5` | `memory:ddr5`        |
| flow read from a pool's medium `stor0/nvme` | `storage:nvme`       |
| anything else                               | its track            |

A replayed span (a layer a workload replays from a simulated one, category `replayed`) is the
resource of its track, as the span it copies.

An *instance* of a resource is one component (one GPU's compute stream, one NIC, one tier node).
An instance is busy while at least one of its spans is open (overlapping spans count once), so a
NIC that carries two flows at a time is busy, not "200 % busy". Utilisation of a resource over a
window = busy time summed over its instances / (instances x window).

Interval maths is vectorised: per-instance unions by a sort and a running maximum, and the busy
time inside any window from the closed form busy([0, t]) = sum (t - s)^+ - (t - e)^+ over the
merged intervals (s, e).
"""

from __future__ import annotations

import re

import numpy as np

from sim.engine.codes import factorize_rows
from sim.report.columns import Columns, columns_of

_HOST_NODE = re.compile(r"^h\d+/")
_GPU_NODE = re.compile(r"(^|/)g\d+$")
WAIT_CATEGORIES = {"stall": "stall", "bubble": "bubble", "fault": "recovery", "recovery": "recovery"}
WAIT_CATEGORIES |= {"queue": "queueing", "wait": "idle", "idle": "idle"}
PHYSICAL_PREFIXES = ("scale_up", "nic", "host", "fabric", "memory:", "storage:")

LABELS = {
    "compute": "GPU compute",
    "cpu": "CPU (preprocessing)",
    "scale_up": "NVLink / scale-up",
    "nic": "NIC (scale-out)",
    "fabric": "switch fabric",
    "host": "PCIe host link",
    "idle": "idle (before the path: arrivals, start-up)",
    "latency": "latency (waits with nothing recorded running)",
    "unrecorded": "unrecorded (spans dropped by trace_limit)",
    "stall": "data stall",
    "bubble": "pipeline bubble",
    "recovery": "failure recovery",
    "queueing": "queueing",
    "useful work": "useful work (iterations kept)",
    "trainer": "trainer (training step)",
}


def label(resource: str) -> str:
    """Human name of a resource key (`memory:ddr5` -> `memory tier ddr5`)."""
    if resource in LABELS:
        return LABELS[resource]
    kind, _, name = resource.partition(":")
    if kind == "memory":
        return f"memory tier {name}"
    if kind == "storage":
        return f"storage {name}"
    if kind == "gpu":
        return f"GPU {name} stream"
    return resource


PHASE_CATEGORIES = {"checkpoint": "checkpoint", "useful": "useful work", "page_fault": "page faults"}


def resource_of(component: str, track: str, category: str = "") -> str:
    """The resource key of one span (see the module docstring)."""
    if category in WAIT_CATEGORIES:
        return WAIT_CATEGORIES[category]
    if category in PHASE_CATEGORIES:
        return PHASE_CATEGORIES[category]
    if category.startswith("fault:"):
        return "recovery: " + category[len("fault:") :]
    if category.startswith("memory:"):
        return category
    if track == "memory" and component.endswith("/cpu"):
        return "cpu"
    if track == "memory":
        tier = component.rsplit("/", 1)[-1]
        return f"memory:{tier}" if _HOST_NODE.match(component) else f"storage:{tier}"
    if track in ("scale_up", "nic", "host", "fabric"):
        return track
    if _GPU_NODE.search(component):
        return "compute" if track == "compute" else f"gpu:{track}"
    if track in ("compute", "cpu"):
        return "cpu"
    return track or "other"


def is_wrapper(resource: str, category: str) -> bool:
    """A span that only waits for flows recorded on their own (a GPU's `comm` stream holding a
    collective, a worker's `read` of a split): communication/IO not on a link or tier itself."""
    return category in ("comm", "io") and not resource.startswith(PHYSICAL_PREFIXES)


def resource_column(component, track, category) -> np.ndarray:
    """The resource of each span given by its component, track and category columns (`resource_of`
    once per distinct triple)."""
    codes, triples = factorize_rows([component, track, category])
    names = np.array([resource_of(str(c), str(t), str(g)) for c, t, g in triples] or [""], dtype=object)
    return names[codes]


def with_resources(spans):
    """`spans` (a DataFrame or Columns) with a `resource` column."""
    if "resource" in spans:
        return spans
    return spans.assign(resource=resource_column(spans["component"], spans["track"], spans["category"]))


def merged_intervals(spans, by: list[str]) -> Columns:
    """Union of the [start_s, end_s) intervals within each group of `by` (overlaps counted once), in
    the order of a sort by `by` and then start."""
    spans = columns_of(spans)
    start, end = spans["start_s"].astype(float), spans["end_s"].astype(float)
    keep = end > start
    keys = [np.asarray(spans[c], dtype=object)[keep] for c in by]
    start, end = start[keep], end[keep]
    if not len(start):
        return Columns({**{c: np.zeros(0, dtype=object) for c in by}, "start_s": np.zeros(0), "end_s": np.zeros(0)})
    codes, distinct = factorize_rows(keys)
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[sorted(range(len(distinct)), key=distinct.__getitem__)] = np.arange(len(distinct))
    group = rank[codes]
    order = np.lexsort((start, group))  # stable: equal starts keep the spans' order
    group, start, end = group[order], start[order], end[order]
    first_of_group = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    reach = np.empty_like(end)  # the furthest end so far within the group
    for a, b in zip(first_of_group.tolist(), np.r_[first_of_group[1:], len(end)].tolist()):
        reach[a:b] = np.maximum.accumulate(end[a:b])
    new_block = np.r_[True, group[1:] != group[:-1]] | (start > np.r_[-np.inf, reach[:-1]])
    first = np.flatnonzero(new_block)
    last = np.r_[first[1:], len(start)] - 1
    out = Columns({c: k[order][first] for c, k in zip(by, keys)})
    out["start_s"], out["end_s"] = start[first], reach[last]
    return out


def busy_until(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time in [0, t] of disjoint-or-not intervals, for every t (vectorised)."""
    t = np.asarray(t, dtype=float)
    return _ramp(np.sort(starts), t) - _ramp(np.sort(ends), t)


def _ramp(points: np.ndarray, t: np.ndarray) -> np.ndarray:
    """sum over points p of max(0, t - p), for each t."""
    k = np.searchsorted(points, t, side="right")
    prefix = np.concatenate([[0.0], np.cumsum(points)])
    return k * t - prefix[k]


def instances(spans) -> dict[str, int]:
    """Number of distinct components per resource, resources in sorted order."""
    spans = with_resources(columns_of(spans))
    _, pairs = factorize_rows([spans["resource"], spans["component"]])
    count: dict[str, int] = {}
    for resource, _ in pairs:
        count[resource] = count.get(resource, 0) + 1
    return dict(sorted(count.items()))


def busy_table(spans, window_s: float | None = None) -> Columns:
    """Per resource (sorted): instances, busy seconds (summed over instances), utilisation over
    `window_s` (default: the end of the last span)."""
    spans = with_resources(columns_of(spans))
    n = instances(spans)
    resources = np.array(list(n), dtype=object)
    count = np.array(list(n.values()), dtype=float)
    busy = np.zeros(len(n))
    if len(n):
        window = float(window_s if window_s is not None else spans["end_s"].max())
        merged = merged_intervals(spans, ["resource", "component"])
        position = {r: i for i, r in enumerate(n)}
        where = np.array([position[r] for r in merged["resource"].tolist()], dtype=np.int64)
        busy = np.bincount(where, merged["end_s"] - merged["start_s"], minlength=len(n))
        utilisation = busy / (count * window) if window > 0 else np.zeros(len(n))
    else:
        utilisation = np.zeros(0)
    return Columns(
        {"resource": resources, "instances": count.astype(np.int64), "busy_s": busy, "utilisation": utilisation}
    )


def busy_by_resource(spans, window_s: float | None = None):
    """`busy_table` as a DataFrame (columns resource, instances, busy_s, utilisation)."""
    return busy_table(spans, window_s).frame()


def utilisation_over_time(spans, bins: int = 200, window_s: float | None = None):
    """Busy fraction of every resource (mean over its instances) in `bins` equal time bins.

    Returns a DataFrame indexed by bin centre (`time_s`), one column per resource, values in [0, 1].
    """
    import pandas as pd

    spans = with_resources(columns_of(spans))
    if spans.empty:
        return pd.DataFrame(index=pd.Index([], name="time_s"))
    end = float(window_s if window_s is not None else spans["end_s"].max())
    edges = np.linspace(0.0, end, bins + 1)
    width = edges[1] - edges[0] if end > 0 else 1.0
    merged = merged_intervals(spans, ["resource", "component"])
    n = instances(spans)
    columns = {}
    for resource in sorted(set(merged["resource"].tolist())):
        mine = merged["resource"] == resource
        cum = busy_until(merged["start_s"][mine], merged["end_s"][mine], edges)
        columns[resource] = np.clip(np.diff(cum) / (width * n[resource]), 0.0, 1.0)
    return pd.DataFrame(columns, index=pd.Index((edges[:-1] + edges[1:]) / 2, name="time_s"))


def _is_tier_node(node: str) -> bool:
    """Tier/media nodes (`h0/ddr5`, `storage3/hdd`) hang below a host CPU (`h0/cpu`) or a pool host."""
    return "/" in node and not node.endswith("/cpu")


def tier_bytes(links):
    """Bytes read from and written to every memory/storage tier, summed over hosts, from the link
    table (a DataFrame; a tier's read link leaves the tier node, its write link enters it)."""
    import pandas as pd

    mem = links[links["kind"] == "memory"]
    rows = []
    for link, nbytes in zip(mem["link"], mem["bytes"]):
        src, dst = link.split("->")
        read = _is_tier_node(src)  # read links leave the tier node
        node = src if read else dst
        host, tier = node.rsplit("/", 1)
        where = "host" if re.match(r"^h\d+$", host) else re.sub(r"\d+$", "", host)
        rows.append((tier, where, "read" if read else "write", float(nbytes)))
    df = pd.DataFrame(rows, columns=["tier", "where", "direction", "bytes"])
    if df.empty:
        return pd.DataFrame(columns=["tier", "where", "read_bytes", "write_bytes"])
    table = df.pivot_table(index=["tier", "where"], columns="direction", values="bytes", aggfunc="sum", fill_value=0.0)
    table = table.reindex(columns=["read", "write"], fill_value=0.0)
    return table.rename(columns={"read": "read_bytes", "write": "write_bytes"}).reset_index()
