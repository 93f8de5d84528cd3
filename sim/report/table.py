"""The terminal tables of `dcsim run`: the run's metrics, its bottleneck report and, on request, the
busiest links (rich tables on stdout). `--json` prints the summary instead and never comes here.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from hardware_models.units import format_bytes, format_rate, format_seconds
from sim.report.bottleneck import summary_rows


def print_run(result, links_top: int = 0) -> None:
    """Print the metrics table of a RunResult (sim/report/result.py) and, if `links_top`, its busiest links."""
    scenario = result.scenario
    metrics = dict(result.metrics)
    jobs = metrics.pop("jobs", None) if scenario.workloads is not None else None  # several jobs: one row each
    rows = [(f"{j}.{k}", _fmt(k, v)) for j, m in (jobs or {}).items() for k, v in m.items()]
    rows += [(k, _fmt(k, v)) for k, v in metrics.items()]
    rows += [
        ("sim_time_s", _fmt("sim_time_s", result.sim_time_s)),
        ("wall_s", f"{result.wall_s:.3f} s"),
        ("events", str(result.events)),
    ]
    rows += summary_rows(result.bottleneck)
    _table(f"{scenario.name} ({scenario.kind})", rows)
    if links_top:
        _links_table(result.links, links_top)


def _table(title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


def _fmt(key: str, value) -> str:
    if isinstance(value, float):
        if key.endswith("_bytes_per_s"):
            return format_rate(value)
        if key.endswith("_bytes") or key == "bytes":
            return format_bytes(value)
        if key.endswith("_s") and not key.endswith("_per_s"):
            return format_seconds(value)
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        text = json.dumps(value)
        return text if len(text) < 60 else f"({len(value)} entries)"
    return str(value)


def _links_table(links, top: int) -> None:
    table = Table(title=f"busiest {top} links", header_style="bold")
    for col in ("link", "kind", "capacity", "bytes", "busy", "utilisation"):
        table.add_column(col, justify="left" if col in ("link", "kind") else "right")
    for row in links.sort_values(["utilisation", "link"], ascending=[False, True]).head(top).itertuples():
        table.add_row(
            row.link,
            row.kind,
            format_rate(row.capacity_bytes_per_s),
            format_bytes(row.bytes),
            format_seconds(row.busy_s),
            f"{row.utilisation:.1%}",
        )
    Console().print(table)
