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
- `read_critical_path(result, path)`: its reading of the run's critical path (a `PathReading`: the
  path's spans renamed to the waits it knows, e.g. a pipeline bubble or a data stall, what bounded
  those waits, busy fractions it measures itself, notes); default: the path as it is;
- `plan_report(scenario)`: its static plan as a table for `dcsim plan` (default: None, it has none).
Core code (scenario, report, runner, studies) reaches a kind only through this interface.
"""

from __future__ import annotations

import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
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
    """What a workload's `plots` and `read_critical_path` may read of a finished run (sim/report/result.py's
    RunResult): the scenario (its `workload` is this kind's config), metrics, spans, link table, cluster."""

    scenario: Any
    metrics: dict
    spans: Any  # pandas DataFrame of recorded spans
    span_columns: Any  # the same spans as Columns (sim/report/columns.py): no pandas
    links: Any  # pandas DataFrame of per-link bytes and utilisation
    cluster: Any


@dataclass
class PathReading:
    """A workload kind's reading of its run's critical path (sim/report/bottleneck.py uses it):
    - `path`: the path, with the `resource` of spans the kind knows to be waits renamed;
    - `seen_by`: components whose view the report takes, averaged (sim/report/critical_path.py
      `as_seen_by`): each one's busy time charged to what it ran, its idle time to what the path did
      meanwhile, renamed by `waiting_for(resource, component, viewer)` (a GPU's wait on another
      pipeline stage is the pipeline bubble, a trainer's wait on the workers a data stall), from
      `since_s` on, along the path to the last span of the first of them;
    - `bounded_by`: such a wait -> the resource that bounded it (the data stall -> `cpu`);
    - `utilisation`: busy fractions the kind measures itself (its metrics' definition), which the
      report shows instead of the span-based ones for those resources;
    - `notes`: what else it knows (plain JSON types), shown as the report's `workload` part;
    - `bounds_run`: the path's resource that bounds the run where that is not the one with the most
      path time (a pipeline that stalls on data is bound by the stall however busy its trainer is);
    - `not_bounds`: resources that are the work itself, never what bounds it (a fault campaign's
      useful iterations: the largest loss bounds it)."""

    path: Any
    seen_by: list[str] = field(default_factory=list)
    waiting_for: Callable[[str, str, str], str] | None = None
    since_s: float = 0.0  # the view starts here (a warm-up its metrics leave out)
    seen_on_track: str | None = None  # only the component's spans on this track are its own
    bounded_by: dict[str, str] = field(default_factory=dict)
    utilisation: dict[str, float] = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    bounds_run: str | None = None
    not_bounds: frozenset[str] = frozenset()


Plot = tuple[str, Callable[..., Any]]  # (file stem, draw function taking `path=` and plot keywords)


def kind_of(config_class: type[BaseModel]) -> str:
    """The value of a config class's `kind` literal."""
    return typing.get_args(config_class.model_fields["kind"].annotation)[0]


class Workload(ABC):
    """One workload kind (see the module docstring). Subclasses set `kind`, `config_class` and
    `metrics`, and implement `simulate` and `estimate`; `plots`, `read_critical_path` and `plan_report`
    default to nothing of their own."""

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

    def read_critical_path(self, result: RunView, path: Any) -> PathReading:
        """This kind's reading of the critical path (its spans with `resource`, `charged_s` ..., as
        `Columns`: sim/report/columns.py, sim/report/critical_path.py); the default reads nothing into it."""
        return PathReading(path)

    def plan_report(self, scenario) -> dict | None:
        """Its static plan for `dcsim plan`: {title, columns, rows, footer, summary}; None: it has none."""
        return None

    def __repr__(self) -> str:
        return f"<workload {self.kind}>"
