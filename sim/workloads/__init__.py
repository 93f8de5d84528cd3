"""Workload kinds: one package per kind, each exporting `WORKLOAD` (sim/workloads/base.py's `Workload`)
from its `kind.py`, and the registry below.

Adding a kind = one package sim/workloads/<kind>/ and one line in WORKLOADS (no import side effects).
Core code reaches a kind only through `workload_for(kind)`: its config class, simulate, metrics,
estimate, plots, bottleneck part and plan.
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from sim.workloads.base import Workload, WorkloadBase, kind_of
from sim.workloads.campaign.kind import WORKLOAD as CAMPAIGN
from sim.workloads.collective.kind import WORKLOAD as COLLECTIVE
from sim.workloads.cp_inference.kind import WORKLOAD as CP_INFERENCE
from sim.workloads.embedding.kind import WORKLOAD as EMBEDDING
from sim.workloads.ingestion.kind import WORKLOAD as INGESTION
from sim.workloads.serving.kind import WORKLOAD as SERVING
from sim.workloads.tiered_memory.kind import WORKLOAD as TIERED_MEMORY
from sim.workloads.trace_replay.kind import WORKLOAD as TRACE_REPLAY
from sim.workloads.training.kind import WORKLOAD as TRAINING

WORKLOADS: tuple[Workload, ...] = (
    COLLECTIVE,
    CP_INFERENCE,
    INGESTION,
    EMBEDDING,
    CAMPAIGN,
    TRAINING,
    TIERED_MEMORY,
    TRACE_REPLAY,
    SERVING,
)

_BY_KIND = {w.kind: w for w in WORKLOADS}

_CONFIGS = tuple(w.config_class for w in WORKLOADS)
WorkloadConfig = (
    Annotated[Union[_CONFIGS], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007
    if len(_CONFIGS) > 1
    else _CONFIGS[0]
)


def kinds() -> list[str]:
    """Every registered kind, sorted."""
    return sorted(_BY_KIND)


def workload_for(kind: str) -> Workload:
    """The Workload of `kind` (KeyError for an unknown kind; scenarios are validated before)."""
    return _BY_KIND[kind]


def config_class(kind: object) -> type[WorkloadBase] | None:
    """The config model of `kind`, None for an unknown kind or a non-string."""
    workload = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return workload.config_class if workload else None


__all__ = [
    "WORKLOADS",
    "Workload",
    "WorkloadBase",
    "WorkloadConfig",
    "config_class",
    "kind_of",
    "kinds",
    "workload_for",
]
