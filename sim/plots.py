"""Matplotlib plots of a run (PNG). Each function takes data, returns the Figure, writes nothing
unless given a path.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

_COLORS = {"compute": "tab:blue", "comm": "tab:orange", "memory": "tab:green", "io": "tab:purple", "": "tab:gray"}


def timeline(spans: pd.DataFrame, max_rows: int = 32, title: str = "Timeline", path=None):
    """Gantt chart: one row per (component, track), bars coloured by category."""
    fig, ax = plt.subplots(figsize=(11, 0.3 * min(max_rows, max(4, spans.groupby(["component", "track"]).ngroups)) + 1.5))
    if spans.empty:
        ax.text(0.5, 0.5, "no spans recorded", ha="center", va="center", transform=ax.transAxes)
    else:
        lanes = list(dict.fromkeys(zip(spans["component"], spans["track"])))[:max_rows]
        index = {lane: i for i, lane in enumerate(lanes)}
        scale, unit = _time_scale(float(spans["end_s"].max()))
        for cat, df in spans.groupby("category"):
            keep = [ (c, t) in index for c, t in zip(df["component"], df["track"])]
            df = df[keep]
            if df.empty:
                continue
            ys = [index[(c, t)] for c, t in zip(df["component"], df["track"])]
            ax.barh(ys, (df["end_s"] - df["start_s"]) * scale, left=df["start_s"] * scale, height=0.7,
                    color=_COLORS.get(cat, "tab:gray"), label=cat or "other", edgecolor="none")
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels([f"{c} {t}" for c, t in lanes], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"simulated time ({unit})")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def link_utilisation(links: pd.DataFrame, top: int = 20, title: str = "Busiest links", path=None):
    """Horizontal bars of the `top` links by utilisation."""
    df = links.sort_values("utilisation", ascending=False).head(top)
    fig, ax = plt.subplots(figsize=(9, 0.3 * max(len(df), 4) + 1.5))
    ax.barh(range(len(df)), df["utilisation"] * 100, color="tab:orange")
    ax.set_yticks(range(len(df)))
    ax.set_yticklabels(df["link"], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("utilisation over the run (% of capacity)")
    ax.set_title(title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def _time_scale(t_max: float) -> tuple[float, str]:
    if t_max >= 1:
        return 1.0, "s"
    if t_max >= 1e-3:
        return 1e3, "ms"
    return 1e6, "us"
