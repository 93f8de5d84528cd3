"""Helpers every plot of dcsim shares, from the core plots (sim/report/plots.py) to a workload
kind's own (sim/workloads/<kind>/plots.py): the matplotlib backend, a readable time unit and the
finish step that lays a figure out and saves it.

Importing this module chooses the backend: scripts and the CLI draw off-screen (Agg); inside a
notebook kernel matplotlib keeps its inline backend.
"""

from __future__ import annotations

import sys

import matplotlib

if "ipykernel" not in sys.modules:  # scripts and the CLI draw off-screen; notebooks keep inline
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def time_scale(t_max: float) -> tuple[float, str]:
    """Multiplier and unit that make `t_max` readable (s, ms, us)."""
    if t_max >= 1:
        return 1.0, "s"
    if t_max >= 1e-3:
        return 1e3, "ms"
    return 1e6, "us"


def finish(fig, path=None):
    """Lay out, save to `path` (PNG) if given, and close the figure when saved."""
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110, format="png")
        plt.close(fig)
    return fig
