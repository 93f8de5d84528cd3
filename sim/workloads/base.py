"""What every workload kind shares: its config base class and the `Workload` interface core code calls.

A workload kind is one package sim/workloads/<kind>/ whose `kind.py` exports `WORKLOAD`, an instance
of a `Workload` subclass, listed once in the registry (sim/workloads/__init__.py). It brings:
- `kind` and `config_class`: the scenario's `workload.kind` and the frozen pydantic model with that
  `kind` literal (one member of the scenario's discriminated union, a `WorkloadBase`), whose
  optional `check(hardware)` cross-checks raise `ScenarioError` with a key path and whose
  `host_pools(hardware)` lists extra hosts it attaches to the network;
- `simulate(sim, cluster, config)`: a SimPy generator that runs the workload on the cluster and
  returns its metrics dict (the runner starts it as a process and runs the clock until it returns;
  nothing in a workload may assume it is the only job on the cluster);
- `metrics`: the metrics it documents, name -> one-line meaning with the unit;
- `estimate(config, hardware, network_model)`: its resource `Estimate` (sim/engine/cost.py) for the
  limits `run` enforces and `dcsim check` prints (sim/scenario/estimate.py adds the topology terms);
- `plots(result)`: its own plots of a run, as (file stem, draw function taking `path=`);
- `bottleneck(result)`: its part of the run's bottleneck report (default: nothing extra);
- `plan_report(scenario)`: its static plan as a table for `dcsim plan` (default: None, it has none).
Core code (scenario, report, runner, studies) reaches a kind only through this interface.
"""

from __future__ import annotations

import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Mapping
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from hardware_models.strict import StrictModel
from sim.engine.cost import Estimate


class WorkloadBase(StrictModel):
    def check(self, hardware) -> None:  # noqa: D401 - hook
        """Cross-checks against the hardware; raise ScenarioError(path=..., value=...) on failure."""

    def host_pools(self, hardware) -> list:
        """Extra host pools (hardware_models.topology.HostPool) this workload attaches."""
        return []


class RunView(Protocol):
    """What a workload's `plots` and `bottleneck` may read of a finished run (sim/report/result.py's
    RunResult): the scenario (its `workload` is this kind's config), metrics, spans, link table, cluster."""

    scenario: Any
    metrics: dict
    spans: Any  # pandas DataFrame of recorded spans
    links: Any  # pandas DataFrame of per-link bytes and utilisation
    cluster: Any


Plot = tuple[str, Callable[..., Any]]  # (file stem, draw function taking `path=` and plot keywords)


def kind_of(config_class: type[BaseModel]) -> str:
    """The value of a config class's `kind` literal."""
    return typing.get_args(config_class.model_fields["kind"].annotation)[0]


class Workload(ABC):
    """One workload kind (see the module docstring). Subclasses set `kind`, `config_class` and
    `metrics`, and implement `simulate` and `estimate`; `plots` and `bottleneck` default to nothing."""

    kind: ClassVar[str]
    config_class: ClassVar[type[WorkloadBase]]
    metrics: ClassVar[Mapping[str, str]]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if hasattr(cls, "config_class") and kind_of(cls.config_class) != cls.kind:
            raise TypeError(f"{cls.__name__}.kind {cls.kind!r} is not its config's kind {kind_of(cls.config_class)!r}")

    @abstractmethod
    def simulate(self, sim, cluster, config) -> Generator[Any, Any, dict]:
        """Run `config` on `cluster` (a SimPy generator); returns the metrics dict."""

    @abstractmethod
    def estimate(self, config, hardware, network_model: str) -> Estimate:
        """Events, flows, kernels, spans and extra memory of one run of `config` on `hardware`."""

    def plots(self, result: RunView) -> list[Plot]:
        """This kind's own plots of a run: (file stem, draw function taking `path=`)."""
        return []

    def bottleneck(self, result: RunView) -> dict:
        """This kind's part of the bottleneck report (plain JSON types); empty: nothing to add."""
        return {}

    def plan_report(self, scenario) -> dict | None:
        """Its static plan for `dcsim plan`: {title, columns, rows, footer, summary}; None: it has none."""
        return None

    def __repr__(self) -> str:
        return f"<workload {self.kind}>"
