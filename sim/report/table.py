"""The terminal tables of `dcsim run`: the run's metrics, its bottleneck report and, on request, the
busiest links (rich tables on stdout). `--json` prints the summary instead and never comes here.

What goes where is decided in sim/report/metric_layout.py (main-table rows and sub-tables: the
per-size collective table, breakdowns with shares, per-request / per-stage / per-tier rows) and how a
value is written in sim/report/quantities.py (units from metric names and the kind's documented
metrics, `Workload.metrics`). Runs of several jobs (`workloads:`) get one row per job, then each
job's own metrics and sub-tables. The bottleneck rows are `sim.report.bottleneck.summary_rows`,
drawn as they come.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from sim.report.bottleneck import summary_rows
from sim.report.metric_layout import Section, column, header, layout
from sim.report.quantities import format_metric, format_percent, format_quantity, format_rate, format_time, unit_of

_NUMBER = re.compile(r"^[-+]?[\d.,]+( |%|$)")
JOB_COLUMNS = ("kind", "gpus", "hosts", "completion_s", "alone_completion_s", "slowdown_vs_alone")
JOB_HEADERS = {"alone_completion_s": "alone", "slowdown_vs_alone": "slowdown"}  # short: one table row per job


def literal_console(**options) -> Console:
    """A rich Console that prints text as it is: no console markup (a name such as `ring [nvlink]`
    keeps its brackets) and no emoji codes (`:x:` stays); `options` as Console takes them."""
    return Console(markup=False, emoji=False, **options)


def print_run(result, links_top: int = 0, console: Console | None = None) -> None:
    """Print the metrics of a RunResult (sim/report/result.py) and, if `links_top`, its busiest links."""
    (console or literal_console()).print(Group(*run_tables(result, links_top)))


def render_run(result, links_top: int = 0, width: int = 100) -> str:
    """The text `print_run` prints, for a terminal `width` columns wide (tests, notebooks)."""
    console = literal_console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_run(result, links_top, console)
    return console.export_text()


def docs_of(kind: str) -> Mapping[str, str]:
    """The kind's documented metrics (name -> "meaning, unit"); none for an unknown kind."""
    from sim.workloads import workload_for

    try:
        return workload_for(kind).metrics
    except Exception:  # 'multi' and kinds without documentation
        return {}


def run_tables(result, links_top: int = 0) -> list:
    """The rich renderables of one run, in print order."""
    scenario = result.scenario
    metrics = dict(result.metrics)
    jobs = metrics.pop("jobs", None) if scenario.workloads is not None else None
    out = metric_tables(f"{scenario.name} ({scenario.kind})", metrics, docs_of(scenario.kind))
    if jobs:
        out.append(jobs_table(jobs))
        for name, job in jobs.items():
            kind = job.get("kind", "")
            own = {k: v for k, v in job.items() if k not in JOB_COLUMNS}
            out += metric_tables(f"job {name} ({kind})", own, docs_of(kind))
    run_rows = [
        ("sim_time_s", format_time(result.sim_time_s)),
        ("wall_s", format_time(result.wall_s)),
        ("events", format_quantity(result.events, "count")),
    ]
    out.append(rows_table("run and bottleneck report", run_rows + list(summary_rows(result.bottleneck))))
    if links_top:
        out.append(links_table(result.links, links_top, result.sim_time_s))
    return out


def metric_tables(title: str, metrics: Mapping, docs: Mapping[str, str]) -> list:
    """The main table of `metrics` followed by its sub-tables."""
    rows, sections = layout(metrics, docs)
    return [rows_table(title, rows), *(section_table(s) for s in sections)]


def rows_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=True, header_style="bold", title_style="bold")
    table.add_column("metric", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    for k, v in rows:
        table.add_row(k, v)
    return table


def section_table(section: Section) -> Group:
    """A sub-table (first column left-aligned, numbers right-aligned) and its notes below it."""
    table = Table(title=section.title, header_style="bold", title_justify="left", title_style="bold")
    for i, name in enumerate(section.columns):
        numeric = all(_NUMBER.match(row[i]) for row in section.rows if row[i])
        table.add_column(name, justify="right" if i and numeric else "left", overflow="fold")
    for row in section.rows:
        table.add_row(*row)
    notes = [n for n in [section.note, *section.notes] if n]
    return Group(table, *(Text(f"  {n}", style="dim") for n in notes), Text(""))


def jobs_table(jobs: Mapping[str, Mapping]) -> Table:
    """One row per job of a multi-job run: kind, placement, completion time with the other jobs and
    alone, and the slowdown (completion over alone completion)."""
    names = list(jobs)
    table = Table(title="jobs", header_style="bold", title_justify="left")
    table.add_column("job")
    cells = {}
    for key in JOB_COLUMNS:
        values = [jobs[n].get(key) for n in names]
        if key == "hosts":
            shown, col = "", [_hosts(v) for v in values]
        else:
            shown, col = column(values, unit_of(key))
        cells[key] = col
        table.add_column(
            header(JOB_HEADERS.get(key, key), shown), justify="left" if key in ("kind", "hosts") else "right"
        )
    for i, n in enumerate(names):
        table.add_row(n, *(cells[k][i] for k in JOB_COLUMNS))
    return table


def _hosts(value) -> str:
    if not isinstance(value, list) or not value:
        return format_metric("hosts", value)
    if value == list(range(value[0], value[0] + len(value))):
        return f"h{value[0]}-h{value[-1]}" if len(value) > 1 else f"h{value[0]}"
    return ", ".join(f"h{h}" for h in value)


def links_table(links, top: int, sim_time_s: float | None = None) -> Table:
    """The `top` busiest links: bytes over capacity (the link table's `utilisation`) and busy time."""
    table = Table(title=f"busiest {top} links", header_style="bold", title_justify="left")
    for col in ("link", "kind", "capacity", "bytes", "busy", "bytes / (capacity x run)", "busy / run"):
        table.add_column(col, justify="left" if col in ("link", "kind") else "right")
    for row in links.sort_values(["utilisation", "link"], ascending=[False, True]).head(top).itertuples():
        busy = row.busy_s / sim_time_s if sim_time_s else None
        table.add_row(
            row.link,
            row.kind,
            format_rate(row.capacity_bytes_per_s),
            format_quantity(float(row.bytes), "B"),
            format_time(row.busy_s),
            format_percent(row.utilisation),
            format_percent(busy) if busy is not None else "-",
        )
    return table
