"""Plot of a run's power over time (sim/energy/meter.py `PowerReport`): cluster power stacked by class
(GPUs, CPUs, DRAM, chassis, NICs, switches, memory tiers, facility), PNG via matplotlib.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _power_scale(watts: float) -> tuple[float, str]:
    for factor, unit in ((1e6, "MW"), (1e3, "kW")):
        if watts >= factor:
            return 1.0 / factor, unit
    return 1.0, "W"


def _time_scale(seconds: float) -> tuple[float, str]:
    for factor, unit in ((3600.0, "h"), (1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= 2 * factor or unit == "us":
            return 1.0 / factor, unit
    return 1.0, "s"


def power_over_time(report, title: str = "Cluster power", max_points: int = 2048, path=None):
    """Stacked cluster power by class over simulated time; returns the Figure."""
    df = report.class_power()
    df = df.loc[:, df.abs().sum() > 0]
    if len(df) > max_points:  # average adjacent bins for the picture only
        k = int(np.ceil(len(df) / max_points))
        df = df.groupby(np.arange(len(df)) // k).mean().set_index(df.index[::k][: (len(df) + k - 1) // k])
    total = df.sum(axis=1)
    p_scale, p_unit = _power_scale(float(total.max()) if len(total) else 0.0)
    t_scale, t_unit = _time_scale(report.duration_s)
    t = np.r_[df.index.to_numpy(), report.duration_s] * t_scale
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bottom = np.zeros(len(df))
    for column in df.columns:
        values = df[column].to_numpy() * p_scale
        ax.stairs(bottom + values, t, baseline=bottom, fill=True, label=column, alpha=0.85)
        bottom = bottom + values
    ax.stairs(bottom, t, color="black", linewidth=0.8, label="total")
    ax.set_xlabel(f"simulated time ({t_unit})")
    ax.set_ylabel(f"power ({p_unit})")
    ax.set_title(f"{title} (energy {report.energy_j / 3.6e6:.3g} kWh, bins of {report.bin_s:.3g} s)")
    ax.set_xlim(0, report.duration_s * t_scale)
    ax.set_ylim(0, max(float(bottom.max()) if len(bottom) else 0.0, 1e-12) * 1.08)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110, format="png")
        plt.close(fig)
    return fig
