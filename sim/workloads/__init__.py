"""Workload kinds. Each module contributes `Config` (with a `kind` literal) and `simulate`.

Adding a kind = writing one module and listing it in MODULES below (no import side effects).
"""
from __future__ import annotations

from types import ModuleType
from typing import Annotated, Union

from pydantic import Field

from sim.workloads import campaign, collective, cp_inference, embedding, ingestion, tiered_memory, training

MODULES: tuple[ModuleType, ...] = (collective, cp_inference, ingestion, embedding, campaign, training,
                                   tiered_memory)

_BY_KIND = {m.Config.model_fields["kind"].annotation.__args__[0]: m for m in MODULES}

_CONFIGS = tuple(m.Config for m in MODULES)
WorkloadConfig = (Annotated[Union[_CONFIGS], Field(discriminator="kind")]  # type: ignore[valid-type]
                  if len(_CONFIGS) > 1 else _CONFIGS[0])


def kinds() -> list[str]:
    return sorted(_BY_KIND)


def module_for(kind: str) -> ModuleType:
    return _BY_KIND[kind]


def config_class(kind: object):
    module = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return module.Config if module else None
