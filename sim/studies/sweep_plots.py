"""Plots of sweep tables (matplotlib PNG): any metric against any swept key.

Axis labels carry units read from the column name's suffix (README.md's naming contract: `_s`, `_bytes`,
`_bytes_per_s`, `_flop_per_s`, `_per_s`, `_j`, `_w`, `_usd`). Swept values written with units
("64 MiB", "400 Gbit/s") are converted to SI numbers with hardware_models.units, so the axis is
numeric and labelled in the base unit, with ticks written with unit prefixes (500 µs, 132 GB/s,
64 MiB; sim/report/quantities.py); values that are neither numbers nor quantities (algorithm names,
'on' / 'off', booleans) become categories: one tick per value in the order they first appear. Other
swept keys split the points into one line per combination; lines differ in marker and linestyle and
categorical points are offset a little per line, so no line hides another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from hardware_models.units import parse_quantity  # noqa: E402
from sim.errors import ScenarioError  # noqa: E402
from sim.report.output import atomic_path  # noqa: E402
from sim.report.quantities import format_quantity  # noqa: E402
from sim.report.quantities import unit_of as quantity_unit  # noqa: E402

# (pattern on the last dotted part of a column name, unit); first match wins
_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    (r"(^|_)bytes_per_s$", "B/s"),
    (r"(^|_)tflop_per_s_per_gpu$", "TFLOP/s per GPU"),
    (r"(^|_)flop_per_s$", "FLOP/s"),
    (r"(^|_)s_per_(\w+)$", r"s/\2"),
    (r"(^|_)(\w+?)_per_s$", r"\2/s"),
    (r"(^|_)bytes(_\w+)?$", "B"),
    (r"(^|_)s$", "s"),
    (r"(^|_)j$", "J"),
    (r"(^|_)w$", "W"),
    (r"(^|_)usd$", "USD"),
    (r"(^|_)(fraction|mfu)$", "fraction"),
)
_QUANTITY_UNITS = {"bytes": "B", "bytes_per_s": "B/s", "seconds": "s", "flop_per_s": "FLOP/s", "watts": "W"}


def unit_of(name: str) -> str:
    """'busbw_bytes_per_s' -> 'B/s', 'hardware.nodes' -> '' (a count)."""
    last = str(name).split(".")[-1]
    for pattern, unit in _UNIT_SUFFIXES:
        match = re.search(pattern, last)
        if match:
            return match.expand(unit)
    return ""


def label(name: str, unit: str | None = None) -> str:
    unit = unit_of(name) if unit is None else unit
    return f"{name} [{unit}]" if unit else str(name)


def numeric_axis(values: pd.Series, name: str) -> tuple[pd.Series | None, str]:
    """Values as SI floats and their unit, or (None, '') when they are categories."""
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.notna().all() and not values.map(lambda v: isinstance(v, bool)).any():
        return numbers.astype(float), unit_of(name)
    for dimension, unit in _QUANTITY_UNITS.items():
        try:
            return values.map(lambda v: parse_quantity(v, dimension)).astype(float), unit
        except ValueError:
            continue
    return None, ""


_TICK_UNITS = {"s": "s", "B": "B", "B/s": "B/s", "J": "J", "W": "W", "FLOP/s": "FLOP/s", "fraction": "%"}
_STYLES = (("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("P", "--"), ("X", "-."), ("*", ":"))


def tick_formatter(unit: str):
    """Tick labels with unit prefixes for a physical unit (None: plain numbers)."""
    shown = _TICK_UNITS.get(unit)
    if shown is None:
        return None
    return FuncFormatter(lambda v, _pos: format_quantity(float(v), shown))


def _format_axis(axis, unit: str, log: bool) -> None:
    formatter = tick_formatter(unit)
    if formatter is None:
        return
    if log and unit == "B":
        axis.set_major_locator(LogLocator(base=4))  # 1 MiB, 4 MiB, 16 MiB ...
    axis.set_major_formatter(formatter)
    if log:
        axis.set_minor_formatter(NullFormatter())


def categories(values: pd.Series) -> list[str]:
    """Distinct values as text, in the order they first appear (booleans as 'on' / 'off')."""
    return list(dict.fromkeys(_category(v) for v in values))


def _category(v) -> str:
    return ("on" if v else "off") if isinstance(v, (bool, np.bool_)) else str(v)


def plot_metric(
    df: pd.DataFrame,
    metric: str,
    key: str,
    by: Sequence[str] = (),
    title: str | None = None,
    path: str | Path | None = None,
):
    """`metric` against swept `key`, one line per combination of the `by` keys; ok rows only."""
    for col in (metric, key, *by):
        if col not in df.columns:
            raise ScenarioError(
                f"no such column; columns are {', '.join(map(str, df.columns))}", path="plot", value=col
            )
    rows = df[(df["status"] == "ok") if "status" in df.columns else slice(None)].dropna(subset=[metric, key])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x_num, x_unit = numeric_axis(rows[key], key) if len(rows) else (None, "")
    cats = categories(rows[key]) if x_num is None else []
    x = x_num if x_num is not None else rows[key].map(lambda v: float(cats.index(_category(v))))
    groups = list(rows.groupby(list(by), sort=False, dropna=False)) if by else [((), rows)]
    width = 0.3 if len(groups) > 1 else 0.0  # categorical points of the lines side by side
    for k, (group, part) in enumerate(groups):
        group = group if isinstance(group, tuple) else (group,)
        order = x[part.index].sort_values(kind="stable").index
        name = ", ".join(f"{k}={_category(v)}" for k, v in zip(by, group)) or None
        shift = (k / max(len(groups) - 1, 1) - 0.5) * width if x_num is None else 0.0
        marker, linestyle = _STYLES[k % len(_STYLES)]
        ax.plot(
            x[order] + shift,
            pd.to_numeric(part.loc[order, metric], errors="coerce"),
            marker=marker,
            linestyle=linestyle,
            alpha=0.85,
            label=name,
        )
    log_x = bool(x_num is not None and len(x_num) and x_num.min() > 0 and x_num.max() / x_num.min() >= 100)
    if log_x:
        ax.set_xscale("log")
    if x_num is None:
        ax.set_xticks(range(len(cats)), cats)
        ax.set_xlim(-0.5, len(cats) - 0.5)
    else:
        _format_axis(ax.xaxis, x_unit if x_unit in _TICK_UNITS else quantity_unit(key), log_x)
    _format_axis(ax.yaxis, unit_of(metric), False)
    ax.set_xlabel(label(key, x_unit if x_num is not None else ""))
    ax.set_ylabel(label(metric))
    ax.set_title(title or f"{metric} vs {key}")
    ax.grid(True, alpha=0.3)
    if by and len(rows):
        ax.legend(fontsize="small")
    fig.tight_layout()
    _save(fig, path)
    return fig


def plot_sweep_metrics(
    table: pd.DataFrame, metrics: Sequence[str], keys: Sequence[str], out_dir: str | Path
) -> list[Path]:
    """One PNG per metric against the first swept key (other keys as lines): `METRIC-vs-KEY.png`."""
    if not keys:
        raise ScenarioError("needs at least one --grid or --zip key", path="--plot")
    written = []
    for metric in metrics:
        if metric not in table.columns:
            raise ScenarioError(
                f"no such column in the results; columns are {', '.join(map(str, table.columns))}",
                path="--plot",
                value=metric,
            )
        name = re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{metric}-vs-{keys[0]}")  # keys are user text: one plain name
        path = Path(out_dir) / f"{name}.png"
        plt.close(plot_metric(table, metric, keys[0], by=keys[1:], path=path))
        written.append(path)
    return written


def _save(fig, path: str | Path | None) -> None:
    if path is None:
        return
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
