"""Imports go one way. The layers, bottom to top:

    hardware_models            pure specs and cost functions (no simpy, nothing of sim)
    sim.engine, sim.network,   time and contention (no workload, scenario, report or runner)
    sim.memory, sim.energy ...
    sim.workloads.<kind>       one package per workload kind
    sim.scenario, sim.report   the user's input; what the user sees
    sim.runner, sim.cli ...    entry points
    validation                 on top (the CLI imports it lazily)

Every import counts, also those inside functions. No two units (packages of sim/, top-level modules of
sim/, a workload kind's package) import each other, directly or round a loop; torch is imported only
under validation/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for top in ("sim", "hardware_models", "validation") for p in (ROOT / top).rglob("*.py"))
LOW_LEVEL = ("sim.engine", "sim.network", "sim.memory")
ABOVE_WORKLOADS = (
    "sim.workloads",
    "sim.scenario",
    "sim.report",
    "sim.studies",
    "sim.runner",
    "sim.cli",
    "sim.tenancy",
    "validation",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: frozenset[str] = frozenset()) -> set[str]:
    """Absolute module names imported anywhere in the file (relative imports resolved). `from package
    import submodule` counts the submodule only (among `known` modules), not the package's __init__."""
    tree = ast.parse(path.read_text())
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            subs = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(base)
    return found


def unit(module: str) -> str:
    """The unit a module belongs to: sim.<package or top module>, sim.workloads.<kind>, or a top package."""
    parts = module.split(".")
    if parts[0] != "sim":
        return parts[0]
    if len(parts) >= 3 and parts[1] == "workloads":  # a kind's package, or the shared base
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) > 1 else "sim"


def our_modules() -> dict[str, set[str]]:
    known = frozenset(module_name(p) for p in SOURCES)
    return {module_name(path): {m for m in imports_of(path, known) if m in known} for path in SOURCES}


GRAPH = our_modules()


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def violations(where: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{m} imports {dep}" for m, deps in GRAPH.items() if within(m, where) for dep in deps if within(dep, forbidden)
    )


def test_hardware_models_imports_nothing_of_sim_or_simpy():
    assert violations(("hardware_models",), ("sim", "validation")) == []
    simpy = [str(p) for p in SOURCES if p.is_relative_to(ROOT / "hardware_models") and "simpy" in imports_of(p)]
    assert simpy == []


@pytest.mark.parametrize("layer", LOW_LEVEL)
def test_engine_network_and_memory_import_no_workload_and_nothing_above(layer):
    assert violations((layer,), ABOVE_WORKLOADS) == []


def test_workloads_import_nothing_above_them():
    assert violations(("sim.workloads",), ABOVE_WORKLOADS[1:]) == []


def test_sim_imports_validation_only_lazily_from_the_cli():
    assert [v for v in violations(("sim",), ("validation",)) if not v.startswith("sim.cli ")] == []


# the optional `dcsim[torchrec]` extra's module builds TorchRec's own plan objects (torch types),
# importing torch inside the one function that needs it: `dcsim` still runs without torch
TORCH_EXTRA_MODULES = {"sim/workloads/embedding/torchrec_interop.py"}


def test_torch_only_under_validation():
    users = [
        str(p.relative_to(ROOT)) for p in SOURCES if any(m == "torch" or m.startswith("torch.") for m in imports_of(p))
    ]
    assert [u for u in users if not u.startswith("validation/") and u not in TORCH_EXTRA_MODULES] == []
    for path in TORCH_EXTRA_MODULES:  # never at module level
        top = ast.parse((ROOT / path).read_text()).body
        names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
        assert not any(m == "torch" or m.startswith(("torch.", "torchrec")) for m in names), path


def test_no_two_units_import_each_other_round_a_loop():
    units = nx.DiGraph()
    for module, deps in GRAPH.items():
        for dep in deps:
            a, b = unit(module), unit(dep)
            if a != b and a != "sim" and b != "sim":  # sim/__init__ re-exports the notebook API
                units.add_edge(a, b)
    cycles = [c for c in nx.simple_cycles(units)]
    assert cycles == [], f"import loops between units: {cycles[:10]}"
