"""Base class of every hardware spec: frozen, strict pydantic models.

Specs are written in catalog YAML files and inline in scenarios with human units; the models parse
them into SI floats (see units.py). `extra="forbid"` turns a misspelt key into an error, frozen
makes a spec safe to share between simulations. Field names are the YAML names of DESIGN.md
(`memory`, `bandwidth`, `latency`), each documented with its unit.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hardware_models.units import Watts


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PowerSpec(Spec):
    """Electrical power of a component: idle and maximum draw, and a rental price.

    `source` says where the figures come from, or marks them as assumptions with their reasoning.
    """
    idle: Watts = Field(0.0, ge=0, description="idle power, W")
    max: Watts = Field(0.0, ge=0, description="power at full activity, W")
    price_per_hour: float = Field(0.0, ge=0, description="rental/amortised price, USD per hour")
    source: str = ""
