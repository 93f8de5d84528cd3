"""The plots of `kind: ingestion` runs.

`ingestion_buffers`: trainer buffer fill and stall fraction over time, and the preprocessing
workers running (autoscaling) with their core utilisation (`dcsim run --out` writes it as
ingestion_buffers.png).
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sim.engine.plotting import finish, time_scale


def ingestion_buffers(metrics: dict, title: str = "Trainer buffers and stalls", path=None):
    """Mean trainer buffer fill and the fraction of trainer time stalled per control interval, and
    the preprocessing workers running, over simulated time."""
    trace = pd.DataFrame(metrics.get("buffer_trace") or [], columns=metrics.get("buffer_trace_columns"))
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, height_ratios=[2, 1])
    if trace.empty:
        ax.text(0.5, 0.5, "no buffer trace in the metrics", ha="center", va="center", transform=ax.transAxes)
        return finish(fig, path)
    scale, unit = time_scale(float(trace["t_s"].max()))
    end = trace["t_s"].to_numpy() * scale
    dt = np.diff(end, prepend=0.0)  # each row covers (end - dt, end]
    t = np.r_[end - dt, end[-1]]  # interval starts, then the last end

    def hold(col, factor=1.0):  # values per interval, repeated for the last edge
        v = trace[col].to_numpy() * factor
        return np.r_[v, v[-1]]

    ax.step(t, hold("buffer_fill", 100), where="post", color="tab:blue", lw=2, label="buffer fill (mean over trainers)")
    ax.fill_between(
        t,
        0,
        hold("stall_fraction", 100),
        step="post",
        color="tab:red",
        alpha=0.35,
        label="trainer time stalled in the interval",
    )
    ax.set_ylim(0, 105)
    ax.set_ylabel("% of buffer slots / of time")
    stall = metrics.get("data_stall_fraction")
    got, want = metrics.get("trainer_samples_per_s"), metrics.get("trainer_demand_samples_per_s")
    detail = f"data stall {stall:.1%}" if stall is not None else ""
    if got and want:
        detail += f", {got:,.0f} of {want:,.0f} samples/s demanded"
    ax.set_title(f"{title}  ({detail})", fontsize=10, pad=22)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    ax.set_xlim(0, float(t.max()))
    ax.grid(alpha=0.3)
    ax2.step(t, hold("workers"), where="post", color="tab:green", label="preprocessing workers")
    ax2.set_ylabel("workers")
    ax2.set_ylim(0, max(float(trace["workers"].max()), 1) * 1.25)
    ax2.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax3 = ax2.twinx()
    ax3.step(
        t, hold("core_utilisation", 100), where="post", color="tab:brown", alpha=0.8, label="worker core utilisation"
    )
    ax3.set_ylabel("core utilisation (%)")
    ax3.set_ylim(0, 105)
    ax2.set_xlabel(f"simulated time ({unit}; one value per control interval)")
    lines = ax2.get_legend_handles_labels()[0] + ax3.get_legend_handles_labels()[0]
    ax2.legend(lines, [h.get_label() for h in lines], fontsize=8, loc="lower left")
    return finish(fig, path)
