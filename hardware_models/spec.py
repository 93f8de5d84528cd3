"""Base class of every hardware spec: frozen, strict pydantic models (hardware_models.strict).

Specs are written in catalog YAML files and inline in scenarios with human units; the models parse
them into SI floats (see units.py). Strictness turns a misspelt key into an error, frozenness
makes a spec safe to share between simulations. Field names are the YAML names
(`memory`, `bandwidth`, `latency`), each documented with its unit.
"""

from __future__ import annotations

from pydantic import Field

from hardware_models.strict import StrictModel
from hardware_models.units import Watts


class Spec(StrictModel):
    """A hardware spec (device, memory tier, link, topology, power): a strict model of the catalog."""


class PowerSpec(Spec):
    """Electrical power of a component: idle and maximum draw, and a rental price.

    `source` says where the figures come from, or marks them as assumptions with their reasoning.
    """

    idle: Watts = Field(0.0, ge=0, description="idle power, W")
    max: Watts = Field(0.0, ge=0, description="power at full activity, W")
    price_per_hour: float = Field(0.0, ge=0, description="rental/amortised price, USD per hour")
    source: str = ""
