"""dcsim's engine and workloads.

Notebook API:
    from sim import load_scenario, run
    result = run(load_scenario("scenarios/allreduce-2x8-h100.yaml", ["workload.bytes=1GiB"]))
    result.metrics, result.spans, result.links

The names below are imported on first use (PEP 562 module `__getattr__`), so `import sim` and
`import sim.cli` cost nothing: `dcsim --help` does not load the engine, pandas or the workloads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.runner import RunResult, run
    from sim.scenario.model import Scenario, load_scenario, scenario_from_dict

_EXPORTS = {  # public name -> module that defines it
    "RunResult": "sim.runner",
    "run": "sim.runner",
    "Scenario": "sim.scenario.model",
    "load_scenario": "sim.scenario.model",
    "scenario_from_dict": "sim.scenario.model",
}

__all__ = ["RunResult", "Scenario", "load_scenario", "run", "scenario_from_dict"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sim' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
