"""Matplotlib plots of a run (PNG). Every function takes data (spans, the link table, metrics),
returns the Figure and writes nothing unless given a `path`; `dcsim run --out` writes them through
`run_plots`, notebooks call them through `result.plot.<name>()` (`RunPlots`).

Generic plots (every workload kind):
- `timeline`: Gantt chart of the first part of the run, one lane per device stream / NIC / tier,
  coloured by resource;
- `utilisation`: busy time of every resource over time (sim/report/resources.py), beside the link
  table's two utilisations of the busiest link of every kind;
- `tier_bytes`: bytes read and written per memory/storage tier (HBM from kernels' bytes);
- `link_utilisation`: the busiest links, each with both utilisations of the link table.
Both plots use the link table's definitions, labelled on the axes: bytes over capacity
(bytes / (capacity x run time), how much of the link's bandwidth was used) and busy time (busy time /
run time, how long it carried at least one flow); the bottleneck report's link (`bounding_link`)
is always drawn and named. Lines differ in colour, linestyle, marker and width, so none hides another;
- `topology` (sim/report/plot_topology.py): the switch graph with hosts aggregated, links coloured by
  utilisation.
A kind's own plots live with it (sim/workloads/<kind>/plots.py) and come through its `plots(result)`
(sim/workloads/base.py); `time_scale` and `finish` are shared from sim/engine/plotting.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sim.engine.plotting import finish, time_scale  # the backend is chosen there
from sim.report.resources import label, utilisation_over_time, with_resources
from sim.report.resources import tier_bytes as _tier_bytes
from sim.report.trace import process_and_thread, select_spans
from sim.workloads import workload_for

_BASE_COLORS = {
    "compute": "tab:blue",
    "cpu": "tab:brown",
    "scale_up": "tab:green",
    "nic": "tab:orange",
    "host": "tab:purple",
    "fabric": "tab:red",
    "idle": "lightgray",
}
_FAMILY_CMAPS = {"gpu": "Blues", "memory": "RdPu", "storage": "Greys"}


def resource_color(resource: str):
    """A stable colour per resource (families such as memory:* share a hue)."""
    if resource in _BASE_COLORS:
        return _BASE_COLORS[resource]
    family, _, name = resource.partition(":")
    if family in _FAMILY_CMAPS:
        shade = 0.45 + 0.4 * (sum(map(ord, name)) % 7) / 7
        return plt.get_cmap(_FAMILY_CMAPS[family])(shade)
    return plt.get_cmap("tab20")((sum(map(ord, resource)) % 20) / 20)


def default_window(spans: pd.DataFrame, max_spans: int = 4000) -> tuple[float, float] | None:
    """The time window holding the first `max_spans` spans (None: the whole run fits)."""
    if len(spans) <= max_spans:
        return None
    first = spans.sort_values("start_s", kind="stable").head(max_spans)
    return 0.0, float(first["end_s"].max())


def timeline(
    spans: pd.DataFrame,
    max_rows: int = 32,
    title: str = "Timeline",
    path=None,
    window_s: tuple[float, float] | None = None,
    max_spans: int = 4000,
):
    """Gantt chart: one lane per (component, track), bars coloured by resource.

    Shows spans that start inside `window_s` (default: the window of the first `max_spans` spans,
    i.e. the first iterations/layers of a long run) and at most `max_rows` lanes (hosts in order).
    """
    spans = with_resources(spans)
    window = window_s if window_s is not None else default_window(spans, max_spans)
    rows = select_spans(spans, None, window)
    lanes_all = sorted(
        dict.fromkeys(zip(rows["component"], rows["track"])),
        key=lambda ct: (process_and_thread(*ct)[2], process_and_thread(*ct)[1]),
    )
    lanes = lanes_all[:max_rows]
    fig, ax = plt.subplots(figsize=(11, 0.28 * max(len(lanes), 4) + 1.6))
    if rows.empty:
        ax.text(0.5, 0.5, "no spans recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return finish(fig, path)
    index = {lane: i for i, lane in enumerate(lanes)}
    scale, unit = time_scale(float(rows["end_s"].max()))
    lane_of = np.array([index.get(ct, -1) for ct in zip(rows["component"], rows["track"])])
    shown = rows[lane_of >= 0].assign(_lane=lane_of[lane_of >= 0])
    for resource, df in shown.groupby("resource", sort=True):
        width = np.maximum((df["end_s"] - df["start_s"]).to_numpy() * scale, 0.0)
        ax.barh(
            df["_lane"],
            width,
            left=df["start_s"] * scale,
            height=0.72,
            color=resource_color(resource),
            label=label(resource),
            edgecolor="white",
            linewidth=0.3,
        )
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"{c} {t}" for c, t in lanes], fontsize=7)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("component and stream / link")
    if window is not None:
        ax.set_xlim(window[0] * scale, window[1] * scale)
    hidden = len(lanes_all) - len(lanes)
    note = []
    if window is not None:
        note.append(f"window {window[0] * scale:.4g}-{window[1] * scale:.4g} {unit}")
    if hidden:
        note.append(f"{hidden} more lanes not shown")
    ax.set_title(title + (f"  ({'; '.join(note)})" if note else ""), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="resource", title_fontsize=8)
    return finish(fig, path)


BYTES_OVER_CAPACITY = "bytes / (capacity x run time)"
BUSY_TIME = "busy time / run time"
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")


def line_style(k: int) -> dict:
    """Style of the k-th line of a plot: linestyle, marker and width all differ between neighbours,
    and earlier (wider) lines stay visible under later ones with the same values."""
    return {
        "linestyle": _LINESTYLES[k % len(_LINESTYLES)],
        "marker": _MARKERS[k % len(_MARKERS)],
        "linewidth": max(3.0 - 0.4 * k, 1.0),
        "alpha": 0.85,
        "markersize": 4,
    }


def run_time_of(links: pd.DataFrame) -> float | None:
    """The run time the link table's utilisation was computed over (bytes / (capacity x run time))."""
    used = links[(links["utilisation"] > 0) & (links["bytes"] > 0)]
    if used.empty:
        return None
    row = used.iloc[0]
    return float(row["bytes"] / (row["capacity_bytes_per_s"] * row["utilisation"]))


def link_kind_summary(links: pd.DataFrame, sim_time_s: float | None = None) -> pd.DataFrame:
    """Per link kind that carried bytes, its busiest link by bytes over capacity: `link`,
    `bytes_over_capacity` (the link table's utilisation) and `busy_fraction` (busy time / run time)."""
    run_s = sim_time_s or run_time_of(links)
    used = links[links["bytes"] > 0].sort_values(["utilisation", "link"], ascending=[False, True])
    top = used.groupby("kind", sort=True).head(1)
    busy = top["busy_s"] / run_s if run_s else np.nan
    return pd.DataFrame(
        {"kind": top["kind"], "link": top["link"], "bytes_over_capacity": top["utilisation"], "busy_fraction": busy}
    ).reset_index(drop=True)


def utilisation(
    spans: pd.DataFrame,
    bins: int = 200,
    title: str = "Utilisation per resource",
    path=None,
    window_s: float | None = None,
    links: pd.DataFrame | None = None,
    bounding_link: str | None = None,
):
    """Left: busy time of every resource over time (share of its instances with a span open). Right,
    from the link table (the numbers links.png draws): for every link kind its busiest link's bytes
    over capacity and busy time over the run, so links that never appear as spans (the switch fabric)
    are shown too; `bounding_link` (the bottleneck report's link) is named."""
    util = utilisation_over_time(spans, bins=bins, window_s=window_s)
    fig, axes = plt.subplots(
        1,
        2 if links is not None else 1,
        figsize=(13, 4.2),
        gridspec_kw={"width_ratios": [3, 1.3]} if links is not None else None,
    )
    ax = axes[0] if links is not None else axes
    if util.empty:
        ax.text(0.5, 0.5, "no spans recorded", ha="center", va="center", transform=ax.transAxes)
    else:
        scale, unit = time_scale(float(util.index.max()))
        for k, resource in enumerate(util.columns):
            ax.plot(
                util.index * scale,
                util[resource] * 100,
                drawstyle="steps-mid",
                label=label(resource),
                color=resource_color(resource),
                markevery=(k % 7 * max(len(util) // 40, 1), max(len(util) // 6, 1)),
                **line_style(k),
            )
        ax.set_xlabel(f"simulated time ({unit})")
        ax.set_ylim(-2, 105)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="busy time", title_fontsize=8)
        ax.grid(alpha=0.3)
    ax.set_ylabel("busy time (% of instances with a span open)")
    ax.set_title(title, fontsize=10)
    if links is not None:
        _link_kind_bars(axes[1], links, window_s, bounding_link)
    return finish(fig, path)


def _link_kind_bars(ax, links: pd.DataFrame, sim_time_s: float | None, bounding_link: str | None) -> None:
    summary = link_kind_summary(links, sim_time_s)
    if bounding_link and bounding_link in set(links["link"]) and bounding_link not in set(summary["link"]):
        row = links[links["link"] == bounding_link].iloc[0]
        run_s = sim_time_s or run_time_of(links)
        extra = {
            "kind": row["kind"],
            "link": bounding_link,
            "bytes_over_capacity": row["utilisation"],
            "busy_fraction": row["busy_s"] / run_s if run_s else np.nan,
        }
        summary = pd.concat([summary, pd.DataFrame([extra])], ignore_index=True)
    if summary.empty:
        ax.text(0.5, 0.5, "no link carried bytes", ha="center", va="center", transform=ax.transAxes)
    y = np.arange(len(summary))
    ax.barh(y - 0.2, summary["bytes_over_capacity"] * 100, height=0.4, label=BYTES_OVER_CAPACITY, color="tab:blue")
    ax.barh(
        y + 0.2, summary["busy_fraction"] * 100, height=0.4, label=BUSY_TIME, color="tab:gray", hatch="//", alpha=0.7
    )
    names = [
        f"{'memory tier' if k == 'memory' else label(k)}: {link}"
        + ("\n(bounds the run)" if link == bounding_link else "")
        for k, link in zip(summary["kind"], summary["link"])
    ]
    ax.set_yticks(y, names, fontsize=7)
    ax.set_ylim(len(summary) - 0.5, -0.5)
    ax.set_xlim(0, 105)
    ax.set_xlabel("% of the run (busiest link of each kind)")
    ax.set_title("links over the run (link table)", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16))


def tier_bytes(links: pd.DataFrame, spans: pd.DataFrame | None = None, title: str = "Bytes per memory tier", path=None):
    """Bytes read from and written to every tier (host tiers and pool media from the link table;
    HBM from the bytes that GPU kernels recorded, reads and writes together)."""
    table = _tier_bytes(links)
    rows = [
        (f"{t} ({w})", r, wr, 0.0)
        for t, w, r, wr in zip(table["tier"], table["where"], table["read_bytes"], table["write_bytes"])
    ]
    if spans is not None and len(spans):
        gpu = with_resources(spans)
        hbm = float(gpu.loc[(gpu["resource"] == "compute") | gpu["resource"].str.startswith("gpu:"), "bytes"].sum())
        if hbm > 0:
            rows.insert(0, ("HBM (GPU kernels)", 0.0, 0.0, hbm))
    fig, ax = plt.subplots(figsize=(8, 0.5 * max(len(rows), 3) + 1.6))
    if not rows:
        ax.text(0.5, 0.5, "no memory-tier traffic in this run", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("bytes (GiB)")
    else:
        values = np.array([r[1:] for r in rows])
        scale, unit = _bytes_scale(values.max())
        y = np.arange(len(rows))
        for k, (what, color, offset) in enumerate(
            (
                ("read", "tab:pink", -0.2),
                ("written", "tab:cyan", 0.2),
                ("kernel traffic (read + write)", "tab:blue", 0.0),
            )
        ):
            if values[:, k].any():
                ax.barh(y + offset, values[:, k] / scale, height=0.4, label=what, color=color)
        ax.set_yticks(y)
        ax.set_yticklabels([r[0] for r in rows], fontsize=8)
        ax.invert_yaxis()
        positive = values[values > 0]
        if positive.size and positive.max() / positive.min() > 100:
            ax.set_xscale("log")
            ax.set_xlim(positive.min() / scale / 3, positive.max() / scale * 2)
        ax.set_xlabel(f"bytes over the run ({unit}, summed over hosts)")
        ax.legend(fontsize=8, loc="best")
    ax.set_title(title)
    return finish(fig, path)


def _bytes_scale(n: float) -> tuple[float, str]:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return float(scale), unit
    return 1.0, "B"


def link_utilisation(
    links: pd.DataFrame,
    top: int = 16,
    per_kind: int = 4,
    title: str = "Busiest links",
    path=None,
    sim_time_s: float | None = None,
    bounding_link: str | None = None,
):
    """The busiest links: the `per_kind` busiest of every link kind (NIC, NVLink, fabric, PCIe,
    memory), then the busiest others up to `top`, and always `bounding_link`. Two bars per link, the
    two utilisations of the link table: bytes over capacity (solid, coloured by kind) and busy time
    over the run (hatched grey: the link carried at least one flow)."""
    ranked = links[links["bytes"] > 0].sort_values(["utilisation", "link"], ascending=[False, True])
    chosen = ranked.groupby("kind", sort=False).head(per_kind)
    rest = ranked.drop(chosen.index).head(max(top - len(chosen), 0))
    df = pd.concat([chosen, rest]).sort_values(["utilisation", "link"], ascending=[False, True]).head(max(top, 1))
    if bounding_link and bounding_link not in set(df["link"]) and bounding_link in set(links["link"]):
        df = pd.concat([df, links[links["link"] == bounding_link]])
    run_s = sim_time_s or run_time_of(links)
    fig, ax = plt.subplots(figsize=(12, 0.42 * max(len(df), 4) + 1.6))
    if df.empty:
        ax.text(0.5, 0.5, "no link carried bytes", ha="center", va="center", transform=ax.transAxes)
    y_of = {i: k for k, i in enumerate(df.index)}
    for kind, part in df.groupby("kind", sort=True):
        y = np.array([y_of[i] for i in part.index])
        ax.barh(
            y - 0.18,
            part["utilisation"] * 100,
            height=0.36,
            color=resource_color("memory:x" if kind == "memory" else kind),
            label=f"{label(kind) if kind != 'memory' else 'memory tier'}: {BYTES_OVER_CAPACITY}",
        )
    if run_s and len(df):
        ax.barh(
            np.arange(len(df)) + 0.18,
            df["busy_s"] / run_s * 100,
            height=0.36,
            color="lightgray",
            edgecolor="dimgray",
            hatch="//",
            label=f"all kinds: {BUSY_TIME}",
        )
    ax.set_yticks(range(len(df)))
    ax.set_yticklabels([f"{n}  (bounds the run)" if n == bounding_link else n for n in df["link"]], fontsize=7)
    ax.set_ylim(len(df) - 0.5, -0.5)
    ax.set_xlim(0, 105)
    ax.set_xlabel(f"% of the run: {BYTES_OVER_CAPACITY} (solid), {BUSY_TIME} (hatched)")
    if len(df):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="link kind", title_fontsize=8)
    ax.set_title(title)
    return finish(fig, path)


class RunPlots:
    """`result.plot`: the plots of one RunResult, e.g. `result.plot.timeline()`; each method takes
    the plot function's keyword arguments (`path=` saves a PNG)."""

    def __init__(self, result) -> None:
        self._r = result

    def _title(self, what: str) -> str:
        return f"{self._r.scenario.name}: {what}"

    def timeline(self, **kw):
        return timeline(self._r.spans, **{"title": self._title("timeline"), **kw})

    def utilisation(self, **kw):
        defaults = {
            "title": self._title("utilisation per resource"),
            "window_s": self._r.sim_time_s,
            "links": self._r.links,
            "bounding_link": self._bounding_link(),
        }
        return utilisation(self._r.spans, **{**defaults, **kw})

    def _bounding_link(self) -> str | None:
        report = self._r.bottleneck or {}
        return report.get("link")

    def tier_bytes(self, **kw):
        return tier_bytes(self._r.links, self._r.spans, **{"title": self._title("bytes per memory tier"), **kw})

    def links(self, **kw):
        defaults = {
            "title": self._title("busiest links"),
            "sim_time_s": self._r.sim_time_s,
            "bounding_link": self._bounding_link(),
        }
        return link_utilisation(self._r.links, **{**defaults, **kw})

    def topology(self, **kw):
        from sim.report.plot_topology import topology

        return topology(self._r.cluster.topology, self._r.links, **{"title": self._title("topology"), **kw})

    def workload(self, **kw):
        """The kind-specific plots of this run (embedding plan load, ingestion buffers ...), if any."""
        return [draw(**kw) for _, draw in workload_plots(self._r)]


def workload_plots(result) -> list:
    """(file stem, draw function taking `path=`) of the workload's own plots of one run (none for
    several jobs: their metrics are per job)."""
    config = result.scenario.workload
    return [] if config is None else workload_for(config.kind).plots(result)


def run_plots(result) -> list[tuple[str, object]]:
    """(file stem, draw function taking `path=`) of every plot `dcsim run --out` writes."""
    p = RunPlots(result)
    has_tiers = bool(
        (result.links["kind"] == "memory").any()
        and result.links.loc[result.links["kind"] == "memory", "bytes"].sum() > 0
    )
    return [
        ("timeline", p.timeline),
        ("utilisation", p.utilisation),
        *([("tier_bytes", p.tier_bytes)] if has_tiers else []),
        ("links", p.links),
        ("topology", p.topology),
        *workload_plots(result),
    ]
