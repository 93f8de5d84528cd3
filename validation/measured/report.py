"""`dcsim validate --measured FILE [--scenario S.yaml] [--json] [--out DIR]`: read, predict, report.

The format is recognised from the file: a directory or a `.json`/`.json.gz` file is a PyTorch
profiler trace (pytorch_profile.py), a `.csv` a plain table (csv_table.py), a text file with the
nccl-tests table header (`out-of-place`, `algbw`, `busbw`) nccl-tests output (nccl_tests.py).

Output: the side-by-side table (case, category, count, measured, predicted, error, method), the
relative error per category (median and max of |predicted - measured| / measured), the unmatched
operations (listed, never dropped) and notes; with `--json` exactly one JSON object on stdout:

    {"source", "target", "cases": [{"name", "category", "count", "predicted_s", "measured_s",
     "rel_error" (absolute), "signed_rel_error", "method"}...], "by_category": {category:
     {"cases", "median_rel_error", "max_rel_error"}}, "median_rel_error", "max_rel_error",
     "unmatched": [{"name", "count", "total_s", "why"}...], "notes": [...]}

With `--out DIR`: DIR/measured.json (that object), DIR/cases.csv and DIR/scatter.png (predicted vs
measured, log-log, one colour per category).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from sim.errors import ScenarioError
from validation.measured.mapping import Measured, Target
from validation.report import label_scatter_axes

CATEGORY_ORDER = ("step", "gemm", "attention", "embedding", "elementwise", "collective", "metric")


def read_measured(path: str, target: Target) -> Measured:
    p = Path(path)
    if not p.exists():
        raise ScenarioError("no such file or directory", path="--measured", value=path)
    if p.is_dir() or p.name.endswith((".json", ".json.gz")):
        from validation.measured import pytorch_profile

        return pytorch_profile.read(p, target)
    if p.suffix.lower() == ".csv":
        from validation.measured import csv_table

        return csv_table.read(p, target)
    from validation.measured import nccl_tests

    if nccl_tests.looks_like(p.read_text(errors="replace")):
        return nccl_tests.read(p, target)
    raise ScenarioError(
        "unknown format: expected a torch.profiler trace (.json, or a directory), nccl-tests output or a CSV",
        path="--measured",
        value=path,
    )


def _errors(cases) -> dict:
    errs = [abs(c.rel_error) for c in cases if c.rel_error is not None]
    return {
        "cases": len(errs),
        "median_rel_error": statistics.median(errs) if errs else None,
        "max_rel_error": max(errs) if errs else None,
    }


def summary(measured: Measured, target: Target) -> dict:
    def order(cat: str) -> int:
        return (CATEGORY_ORDER + (cat,)).index(cat)

    cats = sorted({c.category for c in measured.cases}, key=order)
    cases = sorted(measured.cases, key=lambda c: order(c.category))  # steps first, then kernels, collectives
    overall = _errors(cases)
    return {
        "source": measured.source,
        "target": target.label,
        "cases": [
            {
                "name": c.name,
                "category": c.category,
                "count": c.count,
                "predicted_s": c.predicted_s,
                "measured_s": c.measured_s,
                "rel_error": None if c.rel_error is None else abs(c.rel_error),
                "signed_rel_error": c.rel_error,
                "method": c.method,
            }
            for c in cases
        ],
        "by_category": {cat: _errors([c for c in cases if c.category == cat]) for cat in cats},
        "median_rel_error": overall["median_rel_error"],
        "max_rel_error": overall["max_rel_error"],
        "unmatched": [u.__dict__ for u in measured.unmatched],
        "notes": measured.notes,
    }


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_report(data: dict, console) -> None:
    from rich.table import Table

    from hardware_models.units import format_seconds

    table = Table(title=f"{data['source']} vs dcsim on {data['target']}", header_style="bold")
    for col, just in (("case", "left"), ("category", "left"), ("count", "right"), ("measured", "right")):
        table.add_column(col, justify=just)
    for col, just in (("predicted", "right"), ("error", "right"), ("method", "left")):
        table.add_column(col, justify=just)
    for c in data["cases"]:
        err = c["signed_rel_error"]
        table.add_row(
            c["name"],
            c["category"],
            str(c["count"]),
            format_seconds(c["measured_s"]),
            "-" if c["predicted_s"] is None else format_seconds(c["predicted_s"]),
            "n/a" if err is None else f"{100 * err:+.1f}%",
            c["method"],
        )
    console.print(table)
    cat = Table(title="relative error by category (|predicted - measured| / measured)", header_style="bold")
    for col in ("category", "cases", "median", "max"):
        cat.add_column(col, justify="left" if col == "category" else "right")
    rows = {**data["by_category"], "all": {k: data[k] for k in ("median_rel_error", "max_rel_error")}}
    rows["all"]["cases"] = sum(v["cases"] for v in data["by_category"].values())
    for name, f in rows.items():
        cat.add_row(name, str(f["cases"]), _pct(f["median_rel_error"]), _pct(f["max_rel_error"]))
    console.print(cat)
    if data["unmatched"]:
        un = Table(title="unmatched (no dcsim prediction; own time, outside modelled ops)", header_style="bold")
        for col in ("operation", "count", "total", "why"):
            un.add_column(col, justify="right" if col in ("count", "total") else "left")
        for u in data["unmatched"]:
            un.add_row(u["name"], str(u["count"]), format_seconds(u["total_s"]), u["why"])
        console.print(un)
    for note in data["notes"]:
        console.print(f"note: {note}")


def scatter_plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    pts = [c for c in data["cases"] if c["predicted_s"] is not None and c["measured_s"] > 0]
    fig, ax = plt.subplots(figsize=(6.5, 6))
    if pts:
        lo = min(min(c["measured_s"], c["predicted_s"]) for c in pts) / 2
        hi = max(max(c["measured_s"], c["predicted_s"]) for c in pts) * 2
        xs = np.geomspace(lo, hi, 50)
        ax.fill_between(xs, xs * 0.85, xs * 1.15, color="0.85", label="±15%")
        ax.plot(xs, xs, color="0.4", lw=1, label="predicted = measured")
        for cat in data["by_category"]:
            sel = [c for c in pts if c["category"] == cat]
            if sel:
                ax.scatter([c["measured_s"] for c in sel], [c["predicted_s"] for c in sel], label=cat, s=26, zorder=3)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    label_scatter_axes(ax, f"{Path(data['source']).name} vs dcsim ({data['target']})", fontsize=9)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    from sim.report.output import atomic_path  # atomic: temp file + rename

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def write_outputs(data: dict, out: Path) -> None:
    import pandas as pd

    from sim.report.output import atomic_path, write_json

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "measured.json", data)
    with atomic_path(out / "cases.csv") as tmp:
        pd.DataFrame(data["cases"]).to_csv(tmp, index=False)
    scatter_plot(data, out / "scatter.png")


def main(args) -> int:
    """`dcsim validate --measured` (validation/harness.py hands over when --measured is given)."""
    target = Target(args.scenario)
    measured = read_measured(args.measured, target)
    data = summary(measured, target)
    out = Path(args.out or "dcsim-validate-measured")
    write_outputs(data, out)
    if args.json:
        print(json.dumps(data))
        return 0
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=170)
    print_report(data, console)
    print(f"measured.json, cases.csv and scatter.png in {out}/")
    return 0
