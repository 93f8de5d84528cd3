"""The scenario reference in Markdown, generated from the pydantic models (`dcsim schema --markdown`,
docs/scenario-reference.md), so the documentation cannot drift from the code.

The page walks `Scenario`: one table per model (key path, type, default, description), nested
models as their own sections under their key path (`hardware.topology`), the keys a job of
`workloads:` adds, then one section per workload kind of the registry (sim/workloads/__init__.py)
with the first paragraph of its package docstring, its fields, its nested mappings under their
`workload.` key paths with headings prefixed by the kind (`training: workload.parallelism` and
`cp_inference: workload.parallelism` are different sections), and the metrics it documents; the
catalog names a hardware field accepts. Types with units say which strings they accept (`"96 GiB"`,
`"400 Gbit/s"`, `"2 us"`).
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from hardware_models import catalog, units
from sim.workloads.kind_union import KindUnion

_UNITS = {
    "Bytes": 'bytes (`"96 GiB"`, number)',
    "BytesPerS": 'bytes/s (`"400 Gbit/s"`, `"2.4 TB/s"`)',
    "Seconds": 'seconds (`"2 us"`, `"1.5 ms"`)',
    "FlopPerS": 'FLOP/s (`"800 TFLOP/s"`)',
    "Watts": 'watts (`"700 W"`)',
}
_CATALOG_SECTION = {"DeviceSpec": "device", "LinkSpec": "link", "MemoryTierSpec": "tier"}


def _unit_validators() -> dict[int, str]:
    out = {}
    for name in _UNITS:
        ann = getattr(units, name)
        for meta in getattr(ann, "__metadata__", ()):
            out[id(meta)] = name
    return out


def _models_in(ann: Any, in_list: bool = False) -> list[tuple[type[BaseModel], bool]]:
    """Models inside an annotation, each with whether it sits inside a list."""
    kind_union = next((m for m in getattr(ann, "__metadata__", ()) if isinstance(m, KindUnion)), None)
    if kind_union is not None:  # the lazy union of workload kinds (sim/workloads/kind_union.py)
        ann = kind_union.plain_union()
    if inspect.isclass(ann) and issubclass(ann, BaseModel):
        return [(ann, in_list)]
    in_list = in_list or typing.get_origin(ann) in (list, tuple)
    return [m for a in typing.get_args(ann) for m in _models_in(a, in_list)]


def type_name(ann: Any, metadata=(), unit_of: dict[int, str] | None = None) -> str:
    """A readable type: `'ring' \\| 'tree'`, `bytes (...) or list of ...`, `int`, `TopologySpec`."""
    unit_of = unit_of if unit_of is not None else _unit_validators()
    for meta in metadata:
        if id(meta) in unit_of:
            return _UNITS[unit_of[id(meta)]]
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return type_name(args[0], args[1:], unit_of)
    if origin is Literal:
        return " \\| ".join(f"`{a!r}`" if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        parts = list(dict.fromkeys(type_name(a, (), unit_of) for a in args if a is not type(None)))
        text = " or ".join(parts)
        return text + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list of {type_name(args[0], (), unit_of)}" if args else "list"
    if origin is dict:
        return "mapping"
    if inspect.isclass(ann):
        if issubclass(ann, BaseModel):
            section = _CATALOG_SECTION.get(ann.__name__)
            return f"catalog name, spec file or mapping ({ann.__name__})" if section else f"mapping ({ann.__name__})"
        return ann.__name__
    return str(ann).replace("typing.", "")


def _default(field) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
    elif field.default is PydanticUndefined:
        return "**required**"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return f"`{value.name}`" if hasattr(value, "name") and isinstance(value.name, str) else "(see below)"
    if value == [] or value == {}:
        return f"`{value}`"
    if value is None:
        return "null"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _constraints(field) -> str:
    parts = []
    for meta in field.metadata:
        for op, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            v = getattr(meta, op, None)
            if v is not None:
                parts.append(f"{sym} {v}")
        if getattr(meta, "min_length", None):
            parts.append(f"min length {meta.min_length}")
    return f" ({', '.join(parts)})" if parts else ""


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def _table(
    model: type[BaseModel], path: str, unit_of: dict[int, str], found: list, only: tuple[str, ...] = ()
) -> list[str]:
    """The field table of `model` (keys relative to `path`; `only`: just these fields); nested models
    go to `found`."""
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if only and name not in only:
            continue
        key = f"{path}.{name}" if path else name
        desc = (field.description or "").replace("|", "\\|") + _constraints(field)
        kind = type_name(field.annotation, field.metadata, unit_of)
        if name == "workload" and not path:
            kind = "mapping: one of the [workload kinds](#workload-kinds), chosen by `kind`"
        elif name == "workloads" and not path:
            kind = (
                "list of jobs: a workload of any kind plus `name` and `hosts` ([several jobs](#several-jobs-workloads))"
            )
        else:
            found.extend((f"{key}[]" if in_list else key, sub) for sub, in_list in _models_in(field.annotation))
        lines.append(f"| `{name}` | {kind} | {_default(field)} | {desc} |")
    return lines + [""]


def _nested_sections(
    found: list, unit_of: dict[int, str], documented: dict, level: str = "###", label: str = ""
) -> list[str]:
    """One section per model type (breadth first), listing every key path that uses it; headings
    at `level`, prefixed with `label` (the workload kind) so that no two sections share a heading."""
    out = []
    queue = list(found)
    while queue:
        uses: dict[type, list[str]] = {}
        for key, sub in queue:
            if sub not in documented and key not in uses.get(sub, []):
                uses.setdefault(sub, []).append(key)
        queue = []
        for sub, keys in uses.items():
            documented[sub] = keys
            out += [f"{level} {label}{', '.join(f'`{k}`' for k in keys)} ({sub.__name__})", ""]
            section = _CATALOG_SECTION.get(sub.__name__)
            if section:
                out += [
                    f"A catalog name, a path to a YAML spec, or a mapping with `base: NAME` and the fields to "
                    f"override (`name` is then optional). Catalog names: "
                    f"{', '.join(f'`{n}`' for n in catalog.names(section))}.",
                    "",
                ]
            elif sub.__doc__:
                doc = _first_paragraph(sub.__doc__)
                if doc and not doc.startswith(("!!!", "Usage docs", "A base class")):
                    out += [doc, ""]
            out += _table(sub, keys[0], unit_of, queue)
    return out


def _metrics_table(kind: str, metrics) -> list[str]:
    """The metrics a kind documents (its `metrics`: name -> meaning, unit), as a table."""
    rows = [f"| `{name}` | {meaning.replace('|', '/')} |" for name, meaning in metrics.items()]
    return [f"#### {kind}: metrics", "", "| metric | meaning, unit |", "|---|---|", *rows, ""]


def scenario_reference_markdown() -> str:
    """The whole reference page: the top level and `hardware`, the jobs of `workloads:`, then one
    section per workload kind holding its fields and every nested mapping under its own key paths."""
    from sim.scenario.jobs import JobConfig
    from sim.scenario.model import Scenario
    from sim.workloads import WORKLOADS

    unit_of = _unit_validators()
    documented: dict = {}
    out = [
        "# Scenario reference",
        "",
        "Generated from the pydantic models by `dcsim schema --markdown > docs/scenario-reference.md`; "
        "do not edit by hand (tests/report/test_visuals.py checks it is up to date).",
        "",
        'Quantities accept units (`"400 Gbit/s"`, `"96 GiB"`, `"2 us"`, `"800 TFLOP/s"`). Unknown '
        "keys are errors. Any key can be overridden from the command line with `--set key.path=value`; "
        "`[]` in a key path marks a list of mappings. Model presets (`workload.model: NAME`): "
        "docs/models.md.",
        "",
        "## Scenario (top level)",
        "",
    ]
    found: list = []
    out += _table(Scenario, "", unit_of, found)
    out += _nested_sections(found, unit_of, documented)
    jobs = [m for m, _ in _models_in(JobConfig)]
    out += [
        "## Several jobs (`workloads:`)",
        "",
        "Instead of `workload:`, `workloads:` lists jobs that share the cluster. Each job is a workload of one "
        "of the kinds below, written with the same keys as under `workload:` (its key paths read "
        "`workloads[].KEY` where a kind's section says `workload.KEY`), plus:",
        "",
    ]
    found = []
    out += _table(jobs[0], "workloads[]", unit_of, found, only=("name", "hosts")) if jobs else []
    out += _nested_sections(found, unit_of, documented)
    out += [
        "## Workload kinds",
        "",
        "`workload.kind` selects one of the kinds below; each has its own fields, nested mappings and metrics.",
        "",
    ]
    for workload in sorted(WORKLOADS, key=lambda w: w.kind):
        package = type(workload).__module__.rsplit(".", 1)[0]  # sim/workloads/<kind>/
        doc = _first_paragraph(sys.modules[package].__doc__)
        out += [f"### kind: `{workload.kind}`", "", f"Module `{package}`. {doc}", ""]
        found = []
        out += _table(workload.config_class, "workload", unit_of, found)
        # the kind's own mappings (a model shared with another kind is repeated there); hardware specs
        # (a worker's `nic`, `gpu`) refer to their section above
        out += _nested_sections(found, unit_of, dict(documented), level="####", label=f"{workload.kind}: ")
        out += _metrics_table(workload.kind, workload.metrics)
    return "\n".join(out).rstrip() + "\n"
