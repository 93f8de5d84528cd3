"""Memory per GPU of a 4D-parallel training job, per pipeline stage (the peak over stages must fit).

Per GPU of stage s (parameters P_s = the stage's layers, plus the embedding on the first and the
LM head on the last virtual stage, divided by tp):
- weights: 16-bit copies of P_s, unsharded for the whole iteration (sharded DP without resharding
  after the forward, as Llama 3 ran FSDP with pipeline parallelism - arXiv 2407.21783 §3.3.2), plus
  an 8-bit copy with `gemm_dtype: fp8` (Transformer Engine keeps FP8 weights beside the 16-bit ones);
- gradients: accumulated over the micro-batches in `grad_dtype` (fp32 per Llama 3), unsharded;
- optimizer: fp32 master weights + Adam moments, 12 bytes per parameter, sharded over the dp x cp
  ranks that hold the same weights (`data_parallel: fsdp`), or replicated (`ddp`);
- activations: the layers' saved tensors (sim/models/training_shapes.py, per recompute mode) x the
  most layer-activations the schedule keeps in flight on that stage (training_schedule.in_flight_peak);
- working: one layer's transient tensors (widest intermediate and its gradient, gathered K/V), the
  fp32 logits on the last stage, one layer's full activations while it is recomputed (`full`);
- reserved: CUDA context, NCCL buffers and allocator fragmentation (`reserved_memory`, an assumption).
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware_models.gpu import DTYPE_BYTES
from sim.workloads.training.schedule import in_flight_peak, stage_ops

# Optimizer state *held* per parameter: fp32 master weights + Adam first and second moments, 3 x 4 B
# (mixed-precision Adam, K = 12 in ZeRO, Rajbhandari et al., arXiv 1910.02054 §3.1).
OPTIMIZER_STATE_BYTES_PER_PARAM = 12.0


@dataclass(frozen=True)
class StageMemory:
    stage: int
    params_per_gpu: float
    weights: float
    grads: float
    optimizer: float
    activations: float
    working: float
    reserved: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.working + self.reserved

    def as_dict(self) -> dict[str, float]:
        return {
            "stage": self.stage,
            "params_per_gpu": self.params_per_gpu,
            "weights": self.weights,
            "grads": self.grads,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "working": self.working,
            "reserved": self.reserved,
            "total": self.total,
        }


def stage_params(family, layers_per_vstage: list[int], p: int, stage: int) -> float:
    """Parameters of stage `stage` (all its chunks), whole model (not yet divided by tp)."""
    total = 0.0
    for j in range(stage, len(layers_per_vstage), p):
        total += layers_per_vstage[j] * family.layer_params
        if j == 0:
            total += family.first_params
        if j == len(layers_per_vstage) - 1:
            total += family.last_params
    return total


def stage_memory(config, family, shape, layers_per_vstage: list[int], stage: int) -> StageMemory:
    par = config.parallelism
    p, v = par.pp, config.virtual_stages
    params = stage_params(family, layers_per_vstage, p, stage) / par.tp
    weight_bytes = DTYPE_BYTES[config.dtype] + (1.0 if DTYPE_BYTES[config.gemm] < 2 else 0.0)
    shards = par.dp * par.cp if config.data_parallel == "fsdp" else 1
    chunks = layers_per_vstage[stage::p]
    ops = stage_ops(config.schedule, p, config.micro_batches, v, stage)
    held_layers = in_flight_peak(ops, chunks)
    per_layer = family.saved_bytes_per_token(shape, config.recompute) * shape.tokens
    working = family.working_bytes(shape)
    if config.recompute == "full":
        working += family.saved_bytes_per_token(shape, "none") * shape.tokens
    if stage == (len(layers_per_vstage) - 1) % p:
        working += family.last_working_bytes(shape)
    return StageMemory(
        stage,
        params,
        weights=params * weight_bytes,
        grads=params * DTYPE_BYTES[config.grad_dtype],
        optimizer=params * OPTIMIZER_STATE_BYTES_PER_PARAM / shards,
        activations=held_layers * per_layer,
        working=working,
        reserved=float(config.reserved_memory),
    )


def memory_per_stage(config, family, shape, layers_per_vstage: list[int]) -> list[StageMemory]:
    return [stage_memory(config, family, shape, layers_per_vstage, s) for s in range(config.parallelism.pp)]
