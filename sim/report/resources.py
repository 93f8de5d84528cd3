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
import pandas as pd

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


def with_resources(spans: pd.DataFrame) -> pd.DataFrame:
    """`spans` with a `resource` column (computed once per distinct component/track/category)."""
    if "resource" in spans.columns:
        return spans
    groups = spans.groupby(["component", "track", "category"], sort=False, dropna=False)
    codes = groups.ngroup().to_numpy()
    names = np.array([resource_of(str(c), str(t), str(g)) for c, t, g in groups.size().index], dtype=object)
    out = spans.copy()
    out["resource"] = names[codes] if len(codes) else np.array([], dtype=object)
    return out


def merged_intervals(spans: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Union of the [start_s, end_s) intervals within each group of `by` (overlaps counted once)."""
    df = spans.loc[spans["end_s"] > spans["start_s"], by + ["start_s", "end_s"]]
    if df.empty:
        return pd.DataFrame(columns=by + ["start_s", "end_s"])
    df = df.sort_values(by + ["start_s"], kind="stable")
    reach = df.groupby(by, sort=False)["end_s"].cummax()
    prev_reach = reach.groupby([df[c] for c in by], sort=False).shift()
    block = (prev_reach.isna() | (df["start_s"] > prev_reach)).cumsum()
    return (
        df.assign(_block=block.values, end_s=reach.values)
        .groupby(by + ["_block"], sort=False)
        .agg(start_s=("start_s", "min"), end_s=("end_s", "max"))
        .reset_index()
        .drop(columns="_block")
    )


def busy_until(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time in [0, t] of disjoint-or-not intervals, for every t (vectorised)."""
    t = np.asarray(t, dtype=float)
    return _ramp(np.sort(starts), t) - _ramp(np.sort(ends), t)


def _ramp(points: np.ndarray, t: np.ndarray) -> np.ndarray:
    """sum over points p of max(0, t - p), for each t."""
    k = np.searchsorted(points, t, side="right")
    prefix = np.concatenate([[0.0], np.cumsum(points)])
    return k * t - prefix[k]


def instances(spans: pd.DataFrame) -> pd.Series:
    """Number of distinct components per resource."""
    return with_resources(spans).groupby("resource")["component"].nunique()


def busy_by_resource(spans: pd.DataFrame, window_s: float | None = None) -> pd.DataFrame:
    """Per resource: instances, busy seconds (summed over instances), utilisation over `window_s`
    (default: the end of the last span)."""
    spans = with_resources(spans)
    cols = ["resource", "instances", "busy_s", "utilisation"]
    if spans.empty:
        return pd.DataFrame(columns=cols)
    window = float(window_s if window_s is not None else spans["end_s"].max())
    merged = merged_intervals(spans, ["resource", "component"])
    busy = (merged["end_s"] - merged["start_s"]).groupby(merged["resource"]).sum()
    n = instances(spans)
    df = pd.DataFrame({"instances": n, "busy_s": busy.reindex(n.index).fillna(0.0)})
    df["utilisation"] = df["busy_s"] / (df["instances"] * window) if window > 0 else 0.0
    return df.reset_index(names="resource")[cols].sort_values("resource", ignore_index=True)


def utilisation_over_time(spans: pd.DataFrame, bins: int = 200, window_s: float | None = None) -> pd.DataFrame:
    """Busy fraction of every resource (mean over its instances) in `bins` equal time bins.

    Returns a DataFrame indexed by bin centre (`time_s`), one column per resource, values in [0, 1].
    """
    spans = with_resources(spans)
    if spans.empty:
        return pd.DataFrame(index=pd.Index([], name="time_s"))
    end = float(window_s if window_s is not None else spans["end_s"].max())
    edges = np.linspace(0.0, end, bins + 1)
    width = edges[1] - edges[0] if end > 0 else 1.0
    merged = merged_intervals(spans, ["resource", "component"])
    n = instances(spans)
    columns = {}
    for resource, df in merged.groupby("resource", sort=True):
        cum = busy_until(df["start_s"].to_numpy(), df["end_s"].to_numpy(), edges)
        columns[resource] = np.clip(np.diff(cum) / (width * n[resource]), 0.0, 1.0)
    return pd.DataFrame(columns, index=pd.Index((edges[:-1] + edges[1:]) / 2, name="time_s"))


def _is_tier_node(node: str) -> bool:
    """Tier/media nodes (`h0/ddr5`, `storage3/hdd`) hang below a host CPU (`h0/cpu`) or a pool host."""
    return "/" in node and not node.endswith("/cpu")


def tier_bytes(links: pd.DataFrame) -> pd.DataFrame:
    """Bytes read from and written to every memory/storage tier, summed over hosts, from the link
    table (a tier's read link leaves the tier node, its write link enters it)."""
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
