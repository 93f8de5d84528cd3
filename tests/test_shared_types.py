"""One of each shared type: one strict config base, no duplicate class names, no disagreeing constants.

Source scans (AST, no imports) over sim/, hardware_models/ and validation/:
- strictness is declared once, in `hardware_models.strict.StrictModel`; every other pydantic model
  derives from it (directly or through e.g. `Spec`, `WorkloadBase`) instead of restating the config;
- two classes in sim/ with one name are one concept written twice (or two concepts sharing a name):
  allowed only where listed below with the reason;
- two module-level constants with one name must have one value (two `OPTIMIZER_BYTES_PER_PARAM`,
  12 and 30, once meant different things under one name).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim", "hardware_models", "validation")
STRICT_BASE = ("hardware_models/strict.py", "StrictModel")

# class name -> why several classes in sim/ may carry it
SHARED_CLASS_NAMES = {
    "Config": "each workload kind's scenario config (sim/workloads/<kind>/), the Workload interface's `config_class`",
}

# constant name -> why modules may give it different values
PER_MODULE_CONSTANTS = {
    "METRICS": "each workload kind's documented metrics (Workload interface)",
    "WORKLOAD": "each workload kind's Workload instance (the registry's entries)",
    "PRESETS": "each model family's named presets (transformer LLMs, DiTs)",
    "PARAMS": "each calibration fit's parameter names (validation scripts)",
    "START": "each calibration fit's starting point",
    "LOWER": "each calibration fit's lower bounds",
    "UPPER": "each calibration fit's upper bounds",
}


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def test_strictness_is_declared_once():
    declared, direct_models = [], []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(
                k.arg == "extra" and isinstance(k.value, ast.Constant) and k.value.value == "forbid"
                for k in node.keywords
            ):
                declared.append(f"{rel}:{node.lineno}")
            if (
                isinstance(node, ast.ClassDef)
                and any(_name(b) == "BaseModel" for b in node.bases)
                and (rel, node.name) != STRICT_BASE
            ):
                direct_models.append(f"{rel}:{node.lineno} {node.name}")
    assert len(declared) == 1 and declared[0].startswith(STRICT_BASE[0] + ":"), declared
    assert not direct_models, f"derive from {STRICT_BASE[1]} instead of BaseModel: {direct_models}"


def test_class_names_in_sim_are_unique():
    where = defaultdict(list)
    for rel, tree in _sources():
        if rel.startswith("sim/"):
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(rel)
    duplicates = {name: files for name, files in where.items() if len(files) > 1 and name not in SHARED_CLASS_NAMES}
    assert not duplicates, f"one concept, one class; distinct concepts, distinct names: {duplicates}"


def _literal(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ("expression", ast.unparse(node))


def test_constants_of_one_name_agree():
    values = defaultdict(dict)
    for rel, tree in _sources():
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    values[target.id][rel] = _literal(value)
    disagreeing = {
        name: by_file
        for name, by_file in values.items()
        if name not in PER_MODULE_CONSTANTS and len({repr(v) for v in by_file.values()}) > 1
    }
    assert not disagreeing, f"one name, one value (give distinct meanings distinct names): {disagreeing}"


def test_the_lists_above_are_still_needed():
    """An allowance nothing uses any more is removed (keeps the lists honest)."""
    classes, constants = defaultdict(int), defaultdict(int)
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and rel.startswith("sim/"):
                classes[node.name] += 1
        for node in tree.body:
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                if isinstance(target, ast.Name):
                    constants[target.id] += 1
    assert all(classes[name] > 1 for name in SHARED_CLASS_NAMES)
    assert all(constants[name] > 1 for name in PER_MODULE_CONSTANTS)
