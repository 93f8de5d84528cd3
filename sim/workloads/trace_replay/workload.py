"""`kind: trace_replay` - replay a measured trace's dependency graph on the modelled hardware.

    workload:
      kind: trace_replay
      trace: traces/cpu-mlp-rank0.json     # a file, a list of files (one per rank) or a directory
      format: auto                         # auto | pytorch | chakra
      retime: {gemm: auto, elementwise: measured}   # per category: auto | model | measured
      scale: {other: 1.0, gap: 1.0}        # factors on the times kept as measured, per category
      collectives: network                 # network | measured
      algorithm: auto                      # the collectives' algorithm (as `kind: collective`)
      protocol: auto                       # NCCL protocol; auto: the tuner's, gloo: lock-step steps

Rank r of the trace runs on device r of the cluster (`hardware.nodes x gpus_per_node` must hold
every rank). Compute ops of a modelled category are re-timed by the device model (`model`) or kept
as measured (`measured`) and multiplied by `scale.<category>`; the rest of the recorded time
(framework overhead `other`, gaps between a thread's ops `gap`) is kept as measured x its scale;
collectives run through the network (`network`) or take their measured time (`measured`).
So "this step I measured, with another GPU / faster NICs" is this trace on other hardware.

Metrics: `step_s` (one per ProfilerStep: first begin to last end over the ranks), `iteration_s`
(their mean; with no steps, the whole replay), the trace's own `measured_step_s` and
`measured_iteration_s` and `replay_error` (iteration_s / measured - 1), `time_by_category_s`
(replayed seconds per category, mean over ranks; a collective counts from its rank's arrival),
`measured_time_by_category_s`, `ranks`, `nodes`, `collectives`, `unpriced_ops` (ops of a modelled
category kept as measured because their shapes or dtype were not recorded), `makespan_s`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from hardware_models.strict import StrictModel
from sim.errors import ScenarioError
from sim.workloads.base import WorkloadBase
from sim.workloads.trace_replay import chakra_trace, pytorch_trace
from sim.workloads.trace_replay.graph import Node, RankGraph, from_pytorch
from sim.workloads.trace_replay.ops import CATEGORIES, MODELLED, default_timing, model_time_s, recorded_op_device
from sim.workloads.trace_replay.replay import Replay

Timing = Literal["auto", "model", "measured"]


class Retime(StrictModel):
    """Per category: `model` (the device model), `measured` (as recorded x scale) or `auto` (the model,
    except elementwise ops on a CPU device: ops.default_timing)."""

    gemm: Timing = "auto"
    attention: Timing = "auto"
    embedding: Timing = "auto"
    elementwise: Timing = "auto"


class Scale(StrictModel):
    gemm: float = Field(1.0, gt=0, description="factor on measured GEMM time (with retime.gemm: measured)")
    attention: float = Field(1.0, gt=0, description="factor on measured attention time")
    embedding: float = Field(1.0, gt=0, description="factor on measured embedding time")
    elementwise: float = Field(1.0, gt=0, description="factor on measured elementwise time")
    other: float = Field(1.0, gt=0, description="factor on framework time (ops' own time outside modelled ops)")
    gap: float = Field(1.0, gt=0, description="factor on the gaps between a thread's top-level ops (Python)")


class Config(WorkloadBase):
    kind: Literal["trace_replay"]
    trace: str | list[str] = Field(description="trace file, list of per-rank files, or a directory")
    format: Literal["auto", "pytorch", "chakra"] = Field(
        "auto", description="torch.profiler Chrome/Kineto JSON or Chakra execution-graph JSON (auto: by content)"
    )
    retime: Retime = Field(Retime(), description="per op category: device model or measured time")
    scale: Scale = Field(Scale(), description="factors on the times kept as measured, per category")
    collectives: Literal["network", "measured"] = Field(
        "network", description="collectives through the network, or their measured durations"
    )
    algorithm: Literal["ring", "tree", "hierarchical", "direct", "auto"] = Field(
        "auto", description="the collectives' algorithm (as kind: collective)"
    )
    protocol: Literal["auto", "LL", "LL128", "Simple", "lockstep"] = Field(
        "auto", description="NCCL protocol (auto: the tuner's choice; gloo collectives: lockstep steps)"
    )

    @field_validator("trace")
    @classmethod
    def _relative_to_scenario(cls, v, info: ValidationInfo):
        base_dir = (info.context or {}).get("base_dir")

        def resolve(p: str) -> str:
            if base_dir and not Path(p).is_absolute() and not Path(p).exists() and (Path(base_dir) / p).exists():
                return str(Path(base_dir) / p)
            return p

        return [resolve(p) for p in v] if isinstance(v, list) else resolve(v)

    def files(self) -> list[Path]:
        return pytorch_trace.trace_files(self.trace)

    def check(self, hardware) -> None:
        files = self.files()
        if self.format != "chakra" and len(files) > hardware.num_gpus:
            raise ScenarioError(
                f"{len(files)} trace files (ranks) but the cluster has {hardware.num_gpus} devices",
                path="workload.trace",
                value=self.trace,
            )


def load_graphs(config: Config) -> tuple[list[RankGraph], list[str]]:
    """The rank graphs of the configured trace and the names of what was ignored."""
    graphs, ignored = [], []
    for i, path in enumerate(config.files()):
        data = pytorch_trace.load_json(path)
        fmt = config.format
        if fmt == "auto":
            fmt = "chakra" if chakra_trace.is_chakra(data) else "pytorch"
        if fmt == "chakra":
            if not chakra_trace.is_chakra(data):
                raise ScenarioError(
                    "not a Chakra execution graph (no nodes list)", path="workload.trace", value=str(path)
                )
            named = chakra_trace.rank_from_name(path)
            graph, skipped = chakra_trace.parse(data, str(path), named if named is not None else i)
            graphs.append(graph)
            ignored += skipped
        else:
            if not pytorch_trace.is_pytorch_trace(data):
                raise ScenarioError("not a PyTorch profiler trace", path="workload.trace", value=str(path))
            named = pytorch_trace.rank_from_name(path)
            graphs += [from_pytorch(t) for t in pytorch_trace.parse(data, str(path), named if named is not None else i)]
    graphs.sort(key=lambda g: g.rank)
    if len({g.rank for g in graphs}) != len(graphs):
        raise ScenarioError("two traces claim the same rank", path="workload.trace", value=[g.rank for g in graphs])
    return graphs, ignored


def _timing(config: Config, spec):
    cache: dict[int, float | None] = {}
    unpriced: set[int] = set()
    device = recorded_op_device(spec)
    modelled = {
        c
        for c in MODELLED
        if (getattr(config.retime, c) if getattr(config.retime, c) != "auto" else default_timing(c, spec.kind))
        == "model"
    }

    def duration_s(node: Node) -> float:
        cat = node.category
        if node.kind == "op" and cat in modelled:
            key = id(node.op)
            if key not in cache:
                cache[key] = model_time_s(device, node.op, cat)
            if cache[key] is not None:
                return cache[key] * node.share
            unpriced.add(node.id)
        return node.measured_s * getattr(config.scale, cat, 1.0)

    return duration_s, unpriced


def simulate(sim, cluster, config: Config):
    graphs, ignored = load_graphs(config)
    if len(graphs) > cluster.num_gpus:
        raise ScenarioError(
            f"the trace has {len(graphs)} ranks but the cluster {cluster.num_gpus} devices",
            path="workload.trace",
            value=config.trace,
        )
    duration_s, unpriced = _timing(config, cluster.hardware.gpu)
    replay = Replay(sim, cluster, graphs, duration_s, config.algorithm, config.collectives, config.protocol)
    start = sim.now
    times = yield sim.process(replay.run())
    return metrics(graphs, times, sim.now - start, len(unpriced), ignored)


def metrics(graphs: list[RankGraph], times, makespan_s: float, unpriced: int, ignored: list[str]) -> dict:
    steps = sorted({int(m.split(":")[1]) for t in times for m in t.marks if m.startswith("step_begin:")})
    step_s = []
    for s in steps:
        begins = [t.marks[f"step_begin:{s}"] for t in times if f"step_begin:{s}" in t.marks]
        ends = [t.marks[f"step_end:{s}"] for t in times if f"step_end:{s}" in t.marks]
        step_s.append(max(ends) - min(begins) if begins and ends else 0.0)
    measured = [max(g.measured_steps_s.get(s, 0.0) for g in graphs) for s in steps]
    iteration = sum(step_s) / len(step_s) if step_s else makespan_s
    measured_iteration = sum(measured) / len(measured) if measured else None
    n = len(graphs)
    by_cat = {c: sum(t.by_category_s.get(c, 0.0) for t in times) / n for c in (*CATEGORIES, "gap")}
    measured_cat = {c: 0.0 for c in by_cat}
    for g in graphs:
        for node in g.nodes:
            measured_cat[node.category] = measured_cat.get(node.category, 0.0) + node.measured_s / n
    return {
        "step_s": step_s,
        "iteration_s": iteration,
        "measured_step_s": measured,
        "measured_iteration_s": measured_iteration,
        "replay_error": iteration / measured_iteration - 1.0 if measured_iteration else None,
        "time_by_category_s": by_cat,
        "measured_time_by_category_s": measured_cat,
        "ranks": n,
        "nodes": sum(len(g.nodes) for g in graphs),
        "collectives": sum(1 for g in graphs for node in g.nodes if node.kind in ("collective", "send", "recv")),
        "unpriced_ops": unpriced,
        "ignored": sorted(set(ignored)),
        "makespan_s": makespan_s,
    }
