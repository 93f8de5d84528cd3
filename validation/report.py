"""Comparison report: predicted vs measured per case, error figures overall and per family, a plot.

The relative error of a case is (predicted - measured) / measured; the error figures use its absolute
value: median, maximum and MAPE (mean absolute percentage error, as a fraction). Cases marked
`excluded` (published figures some model was fitted to) are listed but never counted, and cases
without a prediction are listed as such.

`summary_json(cases)` is the `dcsim validate --json` contract object (README.md, "Contracts"):
`{"cases": [{"name", "family", "predicted_s", "measured_s", "rel_error"}...], "median_rel_error",
"max_rel_error", "mape"}` (rel_error absolute there, counted cases only).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FAMILIES = ("primitive", "composition", "published")


def counted(cases: list) -> list:
    return [c for c in cases if not c.excluded and c.predicted_s is not None]


def error_figures(cases: list) -> dict:
    errs = np.abs([c.rel_error for c in counted(cases)])
    if errs.size == 0:
        return {"cases": 0, "median_rel_error": None, "max_rel_error": None, "mape": None}
    return {
        "cases": int(errs.size),
        "median_rel_error": float(np.median(errs)),
        "max_rel_error": float(errs.max()),
        "mape": float(errs.mean()),
    }


def by_family(cases: list) -> dict[str, dict]:
    return {
        f: error_figures([c for c in cases if c.family == f])
        for f in FAMILIES
        if any(c.family == f for c in counted(cases))
    }


def summary_json(cases: list) -> dict:
    overall = error_figures(cases)
    return {
        "cases": [
            {
                "name": c.name,
                "family": c.family,
                "predicted_s": c.predicted_s,
                "measured_s": c.measured_s,
                "rel_error": abs(c.rel_error),
            }
            for c in counted(cases)
        ],
        "median_rel_error": overall["median_rel_error"],
        "max_rel_error": overall["max_rel_error"],
        "mape": overall["mape"],
    }


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_report(cases: list, title: str = "dcsim validate", console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    from hardware_models.units import format_seconds

    console = console or Console(stderr=False)
    table = Table(title=title, header_style="bold")
    for col, just in (
        ("case", "left"),
        ("family", "left"),
        ("measured", "right"),
        ("predicted", "right"),
        ("error", "right"),
        ("method", "left"),
    ):
        table.add_column(col, justify=just)
    for c in cases:
        err = "n/a" if c.rel_error is None else f"{100 * c.rel_error:+.1f}%"
        if c.excluded:
            err += " (calib.)"
        table.add_row(
            c.name,
            c.family,
            format_seconds(c.measured_s),
            "-" if c.predicted_s is None else format_seconds(c.predicted_s),
            err,
            c.method,
        )
    console.print(table)
    fam = Table(title="relative error by family (absolute; calibration figures excluded)", header_style="bold")
    for col in ("family", "cases", "median", "max", "MAPE"):
        fam.add_column(col, justify="left" if col == "family" else "right")
    for name, f in {**by_family(cases), "all": error_figures(cases)}.items():
        fam.add_row(name, str(f["cases"]), _pct(f["median_rel_error"]), _pct(f["max_rel_error"]), _pct(f["mape"]))
    console.print(fam)


def scatter_plot(cases: list, path, title: str = "dcsim validate: predicted vs measured") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [c for c in cases if c.predicted_s is not None]
    fig, ax = plt.subplots(figsize=(6.5, 6))
    if pts:
        lo = min(min(c.measured_s, c.predicted_s) for c in pts) / 2
        hi = max(max(c.measured_s, c.predicted_s) for c in pts) * 2
        xs = np.geomspace(lo, hi, 50)
        ax.fill_between(xs, xs * 0.65, xs * 1.35, color="0.92", label="±35%")
        ax.fill_between(xs, xs * 0.85, xs * 1.15, color="0.82", label="±15%")
        ax.plot(xs, xs, color="0.4", lw=1, label="predicted = measured")
        styles = {"primitive": ("tab:blue", "o"), "composition": ("tab:red", "s"), "published": ("tab:green", "^")}
        for fam, (color, marker) in styles.items():
            sel = [c for c in pts if c.family == fam]
            if not sel:
                continue
            calib = [c for c in sel if c.excluded]
            used = [c for c in sel if not c.excluded]
            if used:
                ax.scatter(
                    [c.measured_s for c in used],
                    [c.predicted_s for c in used],
                    color=color,
                    marker=marker,
                    label=fam,
                    zorder=3,
                    s=28,
                )
            if calib:
                ax.scatter(
                    [c.measured_s for c in calib],
                    [c.predicted_s for c in calib],
                    facecolors="none",
                    edgecolors=color,
                    marker=marker,
                    label=f"{fam} (used for calibration)",
                    zorder=3,
                    s=36,
                )
        for i, c in enumerate(c for c in pts if c.family == "composition"):
            ax.annotate(
                "/".join(c.name.split("/")[:2]),
                (c.measured_s, c.predicted_s),
                fontsize=6,
                xytext=(5, -9 + 7 * (i % 3)),
                textcoords="offset points",
            )
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    label_scatter_axes(ax, title, fontsize=10)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    from sim.report.output import atomic_path  # atomic: temp file + rename

    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def label_scatter_axes(ax, title: str, fontsize: float) -> None:
    """The log-log axes of a predicted-vs-measured scatter: scales, labels with units, title, legend."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured time (s)")
    ax.set_ylabel("predicted time (s)")
    ax.set_title(title, fontsize=fontsize)
    ax.legend(fontsize=7, loc="upper left")
