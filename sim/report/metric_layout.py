"""Lay a run's metrics out for the terminal: which go in the main table as one row each, and which
become sub-tables of their own (pure data here; sim/report/table.py draws them with rich).

- Scalars: one row each, value with its unit (sim/report/quantities.py). A `*bound*` metric says what
  it bounds, and names the printed results of its unit that are smaller than it.
- Lists of rows (`per_size`, `ring_steps`): a sub-table, one column per field, each column in one unit
  (nccl-tests style: size, time, algbw, busbw).
- Lists of numbers: written out when short ('3, 4 x 30, 3'); longer lists that share a `_per_<x>`,
  `_by_<x>` or `_each` suffix and a length become one sub-table with a row per <x> (per request, per
  replica, per stage); the others are summarised (min, median, max).
- Breakdowns (`*breakdown*`, `*_by_*`, `memory_per_gpu_bytes`, `all_to_all_bytes_per_iteration`):
  a sub-table with each part's share of the whole (the `total` entry, else the parts' sum, named
  when it equals another metric such as iteration_s); parts that are zero are listed in the note.
- Dicts of numbers with mostly the same keys (embedding's breakdown_s, breakdown_s_critical_gpu and
  planner_estimate_breakdown_s; ingestion's utilisation and stage capacities) share one sub-table,
  a column each. A row whose key is the value of a text metric (ingestion's `bounding_stage`) is marked.
- Dicts of dicts (embedding's per-table `plan`): a sub-table of the largest rows.
- Other dicts: one row per entry, `name.key`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.report.quantities import (
    bound_note,
    column_scale,
    compact_list,
    format_metric,
    format_quantity,
    is_scalar,
    list_summary,
    scaled,
    shares,
    sums_to,
    unit_of,
)

BREAKDOWN = re.compile(r"breakdown|_by_|^memory_per_gpu_bytes$|^all_to_all_bytes_per_iteration$")
LIST_GROUP = re.compile(r"^(?P<base>.+?)_(?:(?:per|by)_(?P<what>[a-z_]+)|(?P<each>each))$")
NOT_PARTS = ("total", "capacity", "stage", "params_per_gpu")  # entries of a breakdown that are not parts
MAX_ROWS = 24
FIRST_COLUMNS = ("bytes", "size", "step", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s")  # nccl-tests order


@dataclass
class Section:
    """A sub-table: title, column headers, rows of text and a note printed under it."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    notes: list[str] = field(default_factory=list)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def header(name: str, unit: str) -> str:
    """Column header: the name without its unit suffix, then the unit: 'algbw_bytes_per_s' -> 'algbw (GB/s)'."""
    short = re.sub(r"_(bytes_per_s|tflop_per_s\w*|flop_per_s|[a-z]+_per_s|bytes|s|j|w|usd|fraction)$", "", name)
    short = "size" if name == "bytes" else short
    return f"{short} ({unit})" if unit and unit not in ("count",) else short


def column(values: list, unit: str, per_cell: bool = False) -> tuple[str, list[str]]:
    """(unit shown in the header, cells): one unit for the column when its values span less than
    three decades, else (or when `per_cell`) every cell with its own unit."""
    numbers = [abs(float(v)) for v in values if _number(v) and v]
    if unit in ("s", "B", "B/s", "J", "W", "W/s", "FLOP", "FLOP/s", "%") and numbers:
        if unit != "%" and (per_cell or max(numbers) / min(numbers) >= 1000):
            return "", [format_quantity(v, unit) for v in values]
        scale, shown = column_scale(values, unit)
        return shown, [scaled(v, scale) for v in values]
    if re.fullmatch(r"[a-z]+(/s)?", unit) and unit not in ("count", "x"):  # counted things: the unit in the header
        return unit, [format_quantity(v, "count") for v in values]
    return unit, [format_quantity(v, unit) for v in values]


def table_of_rows(title: str, rows: list[Mapping], doc: str | None = None, index: str | None = None) -> Section:
    """Rows of dicts (a list of records, or a dict of dicts with `index` naming its keys) as a sub-table."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    keys.sort(key=lambda k: (k not in FIRST_COLUMNS, FIRST_COLUMNS.index(k) if k in FIRST_COLUMNS else 0))
    headers, cells = ([index] if index else []), []
    for k in keys:
        shown, col = column([r.get(k) for r in rows], unit_of(k), per_cell=k in ("bytes", "size"))
        headers.append(header(k, shown))
        cells.append(col)
    body = [list(row) for row in zip(*cells)] if cells else []
    return Section(title, headers, body, note=_meaning(doc))


def _meaning(doc: str | None) -> str:
    """A documented meaning without its trailing unit ("..., s" or "...; s")."""
    if not doc:
        return ""
    return doc.rsplit(";", 1)[0] if ";" in doc else doc.rsplit(",", 1)[0]


def breakdown(name: str, parts: Mapping, doc: str | None, siblings: Mapping) -> Section:
    """One breakdown dict: its parts (largest first) with their share of the whole."""
    unit = unit_of(name, doc)
    own = {k: v for k, v in parts.items() if _number(v) and unit_of(k) in ("", "count", unit) and k not in NOT_PARTS}
    total = parts.get("total") if _number(parts.get("total")) else None
    whole = float(total) if total is not None else float(sum(own.values()))
    share = shares(own, whole)
    zero = [k for k, v in own.items() if v == 0]
    ordered = sorted((k for k in own if own[k] != 0), key=lambda k: -own[k])
    shown, cells = column([own[k] for k in ordered] + [whole], unit)
    rows = [[k, cells[i], format_quantity(share.get(k, 0.0), "%")] for i, k in enumerate(ordered)]
    rows.append(["total" if total is not None else "sum", cells[-1], format_quantity(1.0, "%") if whole else "-"])
    notes = []
    counts = ("", "count")
    same = sums_to(
        whole,
        {k: v for k, v in siblings.items() if k != name and (unit_of(k) == unit or {unit_of(k), unit} <= set(counts))},
    )
    if same:
        notes.append(f"sum = {same}")
    rest = {k: v for k, v in parts.items() if k not in own and k != "total"}
    for k, v in rest.items():
        text = format_quantity(v, unit if k in ("total", "capacity") else (unit_of(k) or "count"))
        if k == "capacity" and _number(v) and v:
            text += f" (the total is {format_quantity(whole / v, '%')} of it)"
        notes.append(f"{k} {text}")
    if zero:
        notes.append(f"zero: {', '.join(zero)}")
    return Section(name, ["part", header(name, shown) if shown else "value", "share"], rows, _meaning(doc), notes)


def merged(names: list[str], metrics: Mapping, docs: Mapping, marks: Mapping[str, str]) -> Section:
    """Dicts with mostly the same keys side by side (a column each; shares in parentheses for breakdowns)."""
    keys = list(dict.fromkeys(k for n in names for k in metrics[n]))
    first = metrics[names[0]]
    if BREAKDOWN.search(names[0]):  # largest part first, `total` last
        keys.sort(key=lambda k: (k == "total", -float(first.get(k) or 0.0)))
    keys = [k for k in keys if any(metrics[n].get(k) for n in names)] + [
        k for k in keys if not any(metrics[n].get(k) for n in names) and k == "total"
    ]
    zero = [k for k in dict.fromkeys(k for n in names for k in metrics[n]) if k not in keys]
    headers, columns, notes = ["entry"], [], []
    for n in names:
        d, unit = metrics[n], unit_of(n, docs.get(n))
        shown, cells = column([d.get(k) for k in keys], unit)
        cells = [c if k in d else "" for c, k in zip(cells, keys)]
        if BREAKDOWN.search(n):
            parts = {k: v for k, v in d.items() if _number(v) and k not in NOT_PARTS}
            share = shares(parts, d.get("total") if _number(d.get("total")) else None)
            cells = [f"{c} ({format_quantity(share[k], '%')})" if k in share and c else c for c, k in zip(cells, keys)]
        headers.append(header(n, shown))
        columns.append(cells)
        if docs.get(n):
            notes.append(f"{n}: {_meaning(docs[n])}")
    rows = [[k, *(col[i] for col in columns)] for i, k in enumerate(keys)]
    if any(k in marks for k in keys):
        headers.append("")
        rows = [[*r, marks.get(r[0], "")] for r in rows]
    if zero:
        notes.append(f"zero everywhere: {', '.join(zero)}")
    return Section(" / ".join(names), headers, rows, notes=notes)


def list_group(what: str, names: list[str], metrics: Mapping, docs: Mapping) -> Section:
    """Lists of one length, one per metric, as a sub-table with a row per item (per request ...)."""
    n = len(metrics[names[0]])
    headers, columns = [what], []
    for name in names:
        short = split_list_name(name)[0]
        shown, cells = column(list(metrics[name]), unit_of(short, docs.get(name)) or unit_of(name, docs.get(name)))
        headers.append(header(short, shown))
        columns.append(cells)
    rows = [[str(i), *(col[i] for col in columns)] for i in range(min(n, MAX_ROWS))]
    note = f"first {MAX_ROWS} of {n} rows; all in --json" if n > MAX_ROWS else ""
    return Section(f"per {what}", headers, rows, note)


def _merge_groups(dicts: Mapping[str, Mapping]) -> list[list[str]]:
    """Names of numeric dicts grouped when their keys overlap by at least half of the smaller set."""
    groups: list[list[str]] = []
    for name, d in dicts.items():
        for g in groups:
            ref = set(dicts[g[0]])
            if len(ref & set(d)) * 2 >= min(len(ref), len(d)) and len(d) >= 3:
                g.append(name)
                break
        else:
            groups.append([name])
    return [g for g in groups if len(g) > 1]


def layout(metrics: Mapping, docs: Mapping[str, str] | None = None) -> tuple[list[tuple[str, str]], list[Section]]:
    """(main-table rows, sub-tables) of one metrics dict; `docs` maps names to "meaning, unit"."""
    docs = docs or {}
    scalars = {k: v for k, v in metrics.items() if is_scalar(v)}
    marks = {v: f"<- {k}" for k, v in scalars.items() if isinstance(v, str)}
    numeric_dicts = {
        k: v for k, v in metrics.items() if isinstance(v, dict) and v and all(_number(x) for x in v.values())
    }
    groups = {g[0]: g for g in _merge_groups(numeric_dicts)}
    in_group = {n for g in groups.values() for n in g}
    lists = _list_groups(metrics)
    rows: list[tuple[str, str]] = []
    sections: list[Section] = []
    done: set[str] = set()
    for name, value in metrics.items():
        if name in done:
            continue
        doc = docs.get(name)
        if is_scalar(value):
            text = format_metric(name, value, doc)
            note = bound_note(name, value, doc, scalars)
            rows.append((name, f"{text} ({note})" if note else text))
        elif isinstance(value, dict) and not value:
            rows.append((name, "none"))
        elif name in groups:
            sections.append(merged(groups[name], metrics, docs, marks))
            done.update(groups[name])
        elif name in in_group:
            continue
        elif name in numeric_dicts and BREAKDOWN.search(name):
            sections.append(breakdown(name, value, doc, scalars))
        elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            sections.append(_dict_of_dicts(name, value, doc))
        elif isinstance(value, dict):
            rows.extend(_flat(name, value, doc, metrics))
        elif isinstance(value, list):
            if name in lists:
                what, names = lists[name]
                sections.append(list_group(what, names, metrics, docs))
                done.update(names)
            elif value and all(isinstance(v, dict) for v in value):
                sections.append(table_of_rows(name, value, doc))
            else:
                rows.append((name, _list_text(name, value, doc, metrics)))
    return rows, sections


def _list_text(name: str, value: list, doc: str | None, metrics: Mapping) -> str:
    if not value:
        return "none"
    unit = unit_of(name, doc)
    if all(is_scalar(v) for v in value):
        return compact_list(value, unit) or list_summary(value, unit)
    cols = metrics.get(f"{name}_columns")
    return f"{len(value)} rows" + (f" of {', '.join(map(str, cols))}" if cols else "") + " (all in --json)"


def _flat(name: str, value: Mapping, doc: str | None, metrics: Mapping) -> list[tuple[str, str]]:
    """Rows `name.key` of a dict of mixed entries, each with its own unit (else the dict's)."""
    parent = unit_of(name, doc)  # entries have their own units (a dict of totals holds counts and bytes)
    if len(value) <= 4 and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()) and not parent:
        return [(name, ", ".join(f"{k} {v:,}" for k, v in value.items()))]  # e.g. parallelism: tp 8, cp 1 ...
    out = []
    for k, v in value.items():
        unit = unit_of(k) or unit_of(name) or "count"  # a name's unit holds for its entries (op_s); a doc's may not
        if isinstance(v, list):
            out.append((f"{name}.{k}", _list_text(k, v, None, value)))
        elif isinstance(v, dict):
            out.append((f"{name}.{k}", ", ".join(f"{kk} {format_metric(kk, vv)}" for kk, vv in v.items())))
        else:
            out.append((f"{name}.{k}", format_quantity(v, unit)))
    return out


def _dict_of_dicts(name: str, value: Mapping, doc: str | None, top: int = 10) -> Section:
    """Largest rows first by the first time-like field (e.g. a plan's estimated_s)."""
    keys = list(value)
    first = next(iter(value.values()))
    by = next((k for k, v in first.items() if _number(v) and unit_of(k) == "s"), None)
    if by:
        keys.sort(key=lambda k: -float(value[k].get(by) or 0.0))
    section = table_of_rows(name, [value[k] for k in keys[:top]], doc, index="entry")
    for row, k in zip(section.rows, keys[:top]):
        row.insert(0, k)
    if len(keys) > top:
        section.notes.append(f"{top} of {len(keys)} rows" + (f", largest {by} first" if by else "") + "; all in --json")
    return section


def _list_groups(metrics: Mapping) -> dict[str, tuple[str, list[str]]]:
    """First member -> (what, members): lists of numbers or text with one `_per_<what>` / `_by_<what>` /
    `_each` suffix and one length, when at least one of them is too long to write out in a row."""
    found: dict[tuple[str, int], list[str]] = {}
    for name, value in metrics.items():
        if isinstance(value, list) and value and all(is_scalar(v) for v in value) and LIST_GROUP.match(name):
            found.setdefault((split_list_name(name)[1], len(value)), []).append(name)
    return {
        names[0]: (what, names)
        for (what, _), names in found.items()
        if any(compact_list(metrics[n], unit_of(n)) is None for n in names)
    }


def split_list_name(name: str) -> tuple[str, str]:
    """'ttft_s_per_request' -> ('ttft_s', 'request'); 'memory_per_stage_bytes' -> ('memory_bytes', 'stage');
    'iteration_s_each' -> ('iteration_s', 'iteration')."""
    m = LIST_GROUP.match(name)
    if m is None:
        return name, "item"
    base, what = m.group("base"), m.group("what") or "iteration"
    unit = re.search(r"_(bytes_per_s|bytes|s|j|w)$", what)
    if unit:
        base, what = f"{base}_{unit.group(1)}", what[: unit.start()]
    return base, what.replace("_", " ")
