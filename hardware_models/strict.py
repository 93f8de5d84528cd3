"""The one strict base of every configuration model: hardware specs, scenarios and workload configs.

Configs are written by hand in YAML, so a misspelt key must be an error, not a silently ignored
line (`extra="forbid"`); and one parsed config is shared between simulations, sweeps and reports,
so it must not change once built (`frozen=True`). It lives at the bottom of the import order
(hardware_models imports nothing of sim) so that every package can derive from it. A model that
needs another policy (e.g. free-form parameters, `extra="allow"`) says so explicitly next to it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A frozen pydantic model that rejects unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)
