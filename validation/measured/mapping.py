"""Measured operations -> dcsim predictions on one target's hardware.

The *target* is the hardware predictions run on: the `--scenario`'s hardware (its device, NICs,
topology), or without one the calibrated CPU profile the harness writes (validation/profiles/: the
device, and the 2-process link as each rank's NIC, on a single switch) - the right target for traces
made on this machine.

Predictors (all dcsim's own models; nothing is fitted to the measured file):
- kernels (`gemm`, `attention`, `embedding`, `elementwise`): the device's cost functions
  (sim/workloads/trace_replay/ops.py `model_time_s`), shapes from the trace's `Input Dims`, priced
  as a recorded op (no launch overhead: the trace keeps that outside the op);
- collectives: sim/network/collectives.py `collective` - what `kind: collective` runs - on the first
  `ranks` devices of the target's cluster (NCCL's protocol model, or lock-step steps for gloo);
- steps: `kind: trace_replay` of the measured trace on the target (its `step_s`);
- a CSV row named after a metric of the scenario (`iteration_s`, `ttft_s`, ...): the scenario's run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from sim.errors import ScenarioError

PROFILES = Path(__file__).resolve().parents[1] / "profiles"
DEFAULT_PROFILE = "intel-xeon-processor-1t"


@dataclass
class MeasuredCase:
    name: str
    category: str  # gemm | attention | embedding | elementwise | collective | step | metric
    measured_s: float  # median over `count` occurrences
    predicted_s: float | None
    count: int = 1
    method: str = ""

    @property
    def rel_error(self) -> float | None:
        if self.predicted_s is None or self.measured_s <= 0:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass
class Unmatched:
    name: str
    count: int
    total_s: float
    why: str = "no dcsim model for this operation"


@dataclass
class Measured:
    """What one measured file gave: its cases, what could not be mapped, where it came from."""

    source: str
    cases: list[MeasuredCase] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def cpu_profile_name() -> str:
    """The calibrated 1-thread profile of this machine's CPU if the harness wrote one, else the shipped one."""
    from validation.timing import cpu_model_name, slug

    own = f"{slug(cpu_model_name())}-1t"
    return own if (PROFILES / f"{own}.yaml").is_file() else DEFAULT_PROFILE


class Target:
    """The hardware predictions run on (see the module docstring)."""

    def __init__(self, scenario_path: str | None = None) -> None:
        self.scenario_path = scenario_path
        if scenario_path is not None:
            from sim.scenario.model import load_scenario

            self.scenario = load_scenario(scenario_path)
            self.label = f"scenario {self.scenario.name}"
        else:
            self.scenario = None
            self.profile = cpu_profile_name()
            self.label = f"calibrated CPU profile {self.profile}"

    def hardware_dict(self, devices: int) -> dict:
        """Default target: `devices` calibrated CPU cores, one per host, joined by the calibrated link."""
        gpu = str(PROFILES / f"{self.profile}.yaml")
        hw = {"gpu": gpu, "host_cpu": gpu, "gpus_per_node": 1, "nodes": max(devices, 1)}
        hw["topology"] = {"kind": "single-switch", "switch_latency": 0}
        link = PROFILES / f"{self.profile}-link.yaml"
        if link.is_file():
            hw["nic"] = str(link)
        return hw

    def hardware(self, devices: int = 1):
        if self.scenario is not None:
            return self.scenario.hardware
        return self._scenario({"kind": "collective", "bytes": 1}, devices).hardware

    @cached_property
    def device(self):
        return self.hardware(1).gpu

    def _scenario(self, workload: dict, devices: int, name: str = "measured"):
        from sim.scenario.model import scenario_from_dict

        if self.scenario is not None:
            data = {"name": name, "hardware": self.scenario.hardware, "workload": workload}
            data["network_model"] = self.scenario.network_model
            return scenario_from_dict(data)
        return scenario_from_dict({"name": name, "hardware": self.hardware_dict(devices), "workload": workload})

    # ---- predictors ------------------------------------------------------------------------------
    def kernel_s(self, record, cat: str) -> float | None:
        from sim.workloads.trace_replay.ops import model_time_s, recorded_op_device

        return model_time_s(recorded_op_device(self.device), record, cat)

    def collective_s(self, op: str, nbytes: float, ranks: int, protocol: str | None = "auto") -> float | None:
        """Time of one collective of `nbytes` on the first `ranks` devices of the target's cluster."""
        from sim.cluster.cluster import Cluster
        from sim.engine.simulation import Simulation
        from sim.network.collectives import OPS, collective

        hw = self.hardware(ranks)
        if ranks < 2 or ranks > hw.num_gpus or op not in OPS or nbytes <= 0:
            return None
        sim = Simulation(seed=0)
        cluster = Cluster.build(sim, hw, self.scenario.network_model if self.scenario else "flow")
        proc, _ = collective(cluster.network, op, cluster.nodes(range(ranks)), nbytes, "auto", protocol=protocol)
        sim.env.run(proc)
        return sim.now

    def replay_steps(self, trace: str | list[str], ranks: int) -> dict[int, float]:
        """`kind: trace_replay` of the measured trace on the target: step number -> replayed step_s."""
        from sim.runner import run

        result = run(self._scenario({"kind": "trace_replay", "trace": trace}, ranks, "measured-replay"), limits=None)
        steps = result.metrics.get("step_s") or []
        measured = result.metrics.get("measured_step_s") or []
        if len(steps) != len(measured):
            raise ScenarioError("replayed and measured steps differ in number", path="--measured", value=str(trace))
        return dict(enumerate(steps))

    def scenario_metric(self, name: str) -> float | None:
        """A metric of the scenario's own run (a CSV row named after it)."""
        if self.scenario is None:
            return None
        value = self.scenario_metrics.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @cached_property
    def scenario_metrics(self) -> dict:
        from sim.runner import run

        return run(self.scenario).metrics if self.scenario is not None else {}
