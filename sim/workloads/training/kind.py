"""`kind: training` as a `Workload` (sim/workloads/base.py): large-model training with 4D parallelism."""

from __future__ import annotations

from sim.workloads.base import PathReading, Workload
from sim.workloads.training.sizing import training_estimate
from sim.workloads.training.workload import Config, simulate

METRICS = {
    "iteration_s": "iteration time, mean over iterations, s",
    "iteration_s_each": "time of every iteration, list of s",
    "tokens_per_s": "training tokens per second, tokens/s",
    "tokens_per_iteration": "tokens of one global batch, tokens",
    "tflop_per_s_per_gpu": "model FLOPs (6 x matmul params x tokens + attention) per second per GPU, TFLOP/s",
    "mfu": "model FLOP/s over the GPU's dense BF16 peak, fraction",
    "hfu": "executed FLOP/s (recomputation included) over that peak, fraction",
    "model_flop_per_iteration": "model FLOPs of one iteration, FLOP",
    "bubble_fraction": "pipeline bubble time over the iteration, fraction",
    "exposed_comm_fraction": "time GPUs wait for communication not hidden under kernels, fraction",
    "breakdown_s": "per iteration: kernels, exposed communication (exposed_ep_s: MoE all-to-alls), bubble and the rest; s",
    "peak_memory_per_gpu_bytes": "memory of the fullest GPU (weights, gradients, optimizer, activations), bytes",
    "memory_per_gpu_bytes": "breakdown of the fullest stage's memory per GPU, bytes",
    "memory_per_stage_bytes": "memory per GPU of every pipeline stage, list of bytes",
    "op_s": "one forward / backward pass per virtual stage (e.g. 'F v0'), s",
    "micro_batches": "micro-batches per iteration and pipeline, count",
    "layers_per_virtual_stage": "transformer layers per virtual pipeline stage, count",
    "simulated_ranks": "fidelity: ranks simulated (all or representative)",
    "replica_classes": "fidelity: equivalence classes of data-parallel replicas simulated, count",
    "replay": "fidelity: whether identical layers were replayed, bool",
    "model": "the model's name",
    "params": "model parameters, count",
    "parallelism": "tp, cp, pp, dp degrees (and ep for expert parallelism)",
    "moe": (
        "mixture-of-experts models only: experts, top-k, ep, capacity factor, active params, one GPU's dispatch "
        "all-to-all bytes per layer and micro-batch (all, and sent to other GPUs), exposed all-to-all s per iteration"
    ),
    "schedule": "pipeline schedule, name",
    "sequence_length": "tokens per sequence, tokens",
    "recompute": "activation recomputation (none, selective, full), name",
    "gemm_dtype": "datatype of the GEMMs, name",
}


class TrainingWorkload(Workload):
    kind = "training"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return training_estimate(config, hardware, network_model)

    def read_critical_path(self, result, path):
        """The run as its GPUs lived it, averaged over the simulated stage-group drivers (as the
        breakdown_s metric is): their kernels and exposed communication, and while one idled, what
        the path did meanwhile - on a GPU of another pipeline stage, the fill or drain it waited
        through (the pipeline bubble, which more micro-batches or virtual stages shrink)."""
        config = result.scenario.workload
        par = config.parallelism
        if path.empty:
            return PathReading(path)
        per_stage = par.tp * par.cp
        devices = getattr(result.cluster, "devices", [])
        stage_of = {dev.node: (i // per_stage) % par.pp for i, dev in enumerate(devices)}
        last = str(path["component"][-1])
        spans = result.span_columns
        if "track" not in spans:
            return PathReading(path)
        computing = spans["component"][spans["track"] == "compute"]
        drivers = sorted({str(c) for c in set(computing.tolist())} & set(stage_of))
        if last not in stage_of or not drivers:
            return PathReading(path)

        def waiting_for(resource: str, component: str, viewer: str) -> str:
            stage = stage_of.get(component)
            return "bubble" if stage is not None and stage != stage_of[viewer] else resource

        return PathReading(
            path,
            seen_by=[last] + [d for d in drivers if d != last],
            waiting_for=waiting_for,
            notes={"seen_by": f"{len(drivers)} stage-group drivers (mean)", "finished_last": last},
        )


WORKLOAD = TrainingWorkload()
