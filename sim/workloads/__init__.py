"""Workload kinds: one package per kind, each exporting `WORKLOAD` (sim/workloads/base.py's `Workload`)
from its `kind.py`, and the registry below.

Adding a kind = one package sim/workloads/<package>/ and one line in KINDS (no import side effects):
the kind's name -> the module that defines its config class `Config` (the scenario's union member);
its `WORKLOAD` is in the same package's `kind.py`. Packages are imported when a kind is asked for,
not before: a run imports the kind it runs, `dcsim --help` none (start-up, issue 26).
Core code reaches a kind only through `workload_for(kind)`: its config class, simulate, metrics,
estimate, plots, bottleneck part and plan.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Annotated, Any

from sim.workloads.base import Workload, WorkloadBase, kind_of
from sim.workloads.kind_union import KindUnion

KINDS: dict[str, str] = {  # kind -> module of its config class `Config`; order: the union's
    "collective": "sim.workloads.collective.workload",
    "cp_inference": "sim.workloads.cp_inference.workload",
    "ingestion": "sim.workloads.ingestion.config",
    "embedding_training": "sim.workloads.embedding.workload",
    "training_campaign": "sim.workloads.campaign.workload",
    "training": "sim.workloads.training.workload",
    "tiered_memory": "sim.workloads.tiered_memory.workload",
    "trace_replay": "sim.workloads.trace_replay.workload",
    "serving": "sim.workloads.serving.config",
}


def kinds() -> list[str]:
    """Every registered kind, sorted."""
    return sorted(KINDS)


@cache
def workload_for(kind: str) -> Workload:
    """The Workload of `kind` (KeyError for an unknown kind; scenarios are validated before)."""
    package = KINDS[kind].rpartition(".")[0]
    workload = importlib.import_module(f"{package}.kind").WORKLOAD
    assert isinstance(workload, Workload) and workload.kind == kind, f"{package}.kind.WORKLOAD is not kind {kind!r}"
    return workload


def config_class(kind: object) -> type[WorkloadBase] | None:
    """The config model of `kind`, None for an unknown kind or a non-string."""
    if not isinstance(kind, str) or kind not in KINDS:
        return None
    return _config_class(kind)


@cache
def _config_class(kind: str) -> type[WorkloadBase]:
    config = importlib.import_module(KINDS[kind]).Config
    assert issubclass(config, WorkloadBase) and kind_of(config) == kind, f"{KINDS[kind]}.Config is not kind {kind!r}"
    return config


# The scenario's `workload`: the discriminated union on `kind` of every kind's config class,
# validated by dispatch so that only the named kind is imported (sim/workloads/kind_union.py).
WorkloadConfig = Annotated[WorkloadBase, KindUnion(config_class, lambda: list(KINDS))]


def __getattr__(name: str) -> Any:
    if name == "WORKLOADS":  # every kind's Workload, in registry order (imports every kind)
        return tuple(workload_for(kind) for kind in KINDS)
    raise AttributeError(f"module 'sim.workloads' has no attribute {name!r}")


__all__ = [
    "KINDS",
    "WORKLOADS",
    "Workload",
    "WorkloadBase",
    "WorkloadConfig",
    "config_class",
    "kind_of",
    "kinds",
    "workload_for",
]
