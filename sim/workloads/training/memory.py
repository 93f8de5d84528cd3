"""Memory per GPU of a 4D-parallel training job, per pipeline stage (the peak over stages must fit).

What is live *when*: a stage's ops (sim/workloads/training/schedule.py) are walked in order and the
bytes held after each forward and at the start of each backward are added up; the peak of that walk
is the stage's need. Per GPU of stage s (P_c = parameters of chunk c: its layers, plus the embedding
on the first and the LM head on the last virtual stage, divided by tp):

- weights: 16-bit copies, 2 B x P_c ([ZeRO] §3.1: 2Ψ), plus an 8-bit copy with `gemm_dtype: fp8`
  (Transformer Engine keeps FP8 weights beside the 16-bit ones). `data_parallel: fsdp`: a chunk's
  weights are all-gathered before its first forward and kept until the end of the iteration (no
  resharding after the forward, as Llama 3 ran FSDP with pipelining, [Llama 3] §3.3.2); `ddp`: held
  all the time.
- grads: the accumulator over the micro-batches in `grad_dtype` (fp32 in Llama 3, [Llama 3] §3.3.2;
  Megatron's `grad_reduce_in_fp32` buffer), grad_bytes x P_c. `fsdp`: allocated by the chunk's first
  backward and reduce-scattered after its last one, leaving its 1/(dp x cp) shard (PyTorch FSDP
  allocates gradients in the backward and frees the unsharded ones after the reduce-scatter);
  `ddp`: preallocated buckets, held all the time. When every chunk is in its backward window the
  stage holds (2 + 4) B x P_s, Megatron's distributed optimizer's "6 + 12/d" bytes per parameter.
- optimizer: fp32 master weights + Adam moments, K = 12 B per parameter ([ZeRO] §3.1), sharded
  over the dp x cp ranks that hold the same weights (`fsdp`: [ZeRO] P_os, 12Ψ/N_d; also what
  Megatron's distributed optimizer and Llama 3's FSDP shard), replicated with `ddp`.
- activations: the tensors one layer saves for its backward, per micro-batch (the family's
  `saved_bytes_per_token`: [Korthikanti] §4 adapted to RMSNorm, GQA, SwiGLU / squared ReLU and
  FlashAttention - with sequence parallelism every tensor is divided by tp, giving
  sbh(34/t + 5as/(ht)) for the paper's GPT layer; FlashAttention never stores the 5as²b score
  tensors, so the paper's *selective* form 34sbh/t is dcsim's `none` less the two dropout masks;
  `full` keeps the layer input 2sbh/t), x the layer-micro-batches the schedule holds at that
  moment. Under context parallelism the all-gathered K and V of the other cp - 1 ranks are kept
  for the backward too (the backward only reduce-scatters their gradients, as the time model runs it).
  In flight on stage 0 ([Narayanan] §2.2, [Korthikanti] §4.2.3): 1F1B holds p micro-batches of
  its L/p layers (L layer-micro-batches); interleaved 1F1B with v chunks (p(v + 1) - 1 chunk passes
  of L/(pv) layers) holds L(1 + (p - 1)/(pv)); with m = p micro-batches every forward runs before
  the first backward (m x the stage's layers).
- working: one layer's transient tensors (widest intermediate and its gradient, gathered K/V), the
  fp32 logits on the last stage, one layer's full activations while it is recomputed (`full`).
- reserved: CUDA context, NCCL buffers and allocator fragmentation (`reserved_memory`, an assumption).
- mixture of experts (sim/models/moe.py): a layer's expert parameters are divided by tp x ep, not tp
  (E / ep experts per GPU, each tensor-parallel), and their gradients and optimizer state are sharded
  over the dp x cp / ep ranks that hold the same experts (Megatron-Core's expert data parallelism);
  weights, gradients and optimizer then count per GPU as for the dense parameters.

Llama 3's stage imbalance ([Llama 3] §3.3.2: one layer fewer on the first and the last stage, so that
their first / last chunk holds only the embedding / the LM head and loss) is the layer split of
schedule.split_layers; an empty chunk saves no layer activations.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware_models.gpu import DTYPE_BYTES
from sim.models.training_shapes import CommOp
from sim.workloads.training.schedule import stage_ops

# Optimizer state *held* per parameter: fp32 master weights + Adam first and second moments, 3 x 4 B
# (mixed-precision Adam, K = 12 in ZeRO, Rajbhandari et al., arXiv 1910.02054 §3.1).
OPTIMIZER_STATE_BYTES_PER_PARAM = 12.0


@dataclass(frozen=True)
class StageMemory:
    """The bytes per GPU of one pipeline stage at its peak moment (`at_op`: index in its op list)."""

    stage: int
    params_per_gpu: float
    weights: float
    grads: float
    optimizer: float
    activations: float
    working: float
    reserved: float
    layers_in_flight: int = 0  # layer-micro-batches whose activations are held at the peak
    at_op: int = 0

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
    return sum(chunk_params(family, layers_per_vstage, j) for j in range(stage, len(layers_per_vstage), p))


def chunk_params(family, layers_per_vstage: list[int], j: int) -> float:
    """Parameters of virtual stage `j` (whole model, not divided by tp)."""
    total = float(layers_per_vstage[j] * family.layer_params)
    if j == 0:
        total += family.first_params
    if j == len(layers_per_vstage) - 1:
        total += family.last_params
    return total


def chunk_expert_params(family, layers_per_vstage: list[int], j: int) -> float:
    """Expert parameters of virtual stage `j` (whole model; 0 for a dense model)."""
    return float(layers_per_vstage[j] * family.expert_layer_params)


def per_gpu(params: float, expert: float, tp: int, ep: int) -> tuple[float, float]:
    """(dense, expert) parameters per GPU of `params` (whole model) holding `expert` expert parameters."""
    if not expert:
        return params / tp, 0.0
    return (params - expert) / tp, expert / (tp * ep)


def layer_activation_bytes(family, shape, recompute: str) -> float:
    """Bytes one layer keeps for its backward, per micro-batch, on one GPU: the family's saved
    tensors for the local tokens, plus (cp > 1, unless the layer is recomputed whole) the K and V
    gathered from the other cp - 1 ranks."""
    saved = family.saved_bytes_per_token(shape, recompute) * shape.tokens
    if shape.cp > 1 and recompute != "full":
        gathered = sum(o.nbytes for o in family.layer_forward(shape) if isinstance(o, CommOp) and o.group == "cp")
        saved += gathered * (shape.cp - 1) / shape.cp
    return saved


def working_bytes(config, family, shape, last_stage: bool) -> float:
    """Transient bytes of the layer being run (and of the loss on the last stage)."""
    working = family.working_bytes(shape)
    if config.recompute == "full":
        working += family.saved_bytes_per_token(shape, "none") * shape.tokens
    if last_stage:
        working += family.last_working_bytes(shape)
    return working


def stage_memory(config, family, shape, layers_per_vstage: list[int], stage: int) -> StageMemory:
    par = config.parallelism
    p, v = par.pp, config.virtual_stages
    tp = par.tp
    split = [
        per_gpu(
            chunk_params(family, layers_per_vstage, j), chunk_expert_params(family, layers_per_vstage, j), tp, par.ep
        )
        for j in (c * p + stage for c in range(v))
    ]
    chunk_d = [d for d, _ in split]
    chunk_x = [x for _, x in split]
    chunk_p = [d + x for d, x in split]
    layers = [layers_per_vstage[c * p + stage] for c in range(v)]
    params = sum(chunk_p)
    weight_bytes = DTYPE_BYTES[config.dtype] + (1.0 if DTYPE_BYTES[config.gemm] < 2 else 0.0)
    grad_bytes = DTYPE_BYTES[config.grad_dtype]
    fsdp = config.data_parallel == "fsdp"
    shards = par.dp * par.cp if fsdp else 1
    expert_shards = shards // par.ep if fsdp else 1  # the ranks holding the same experts
    optimizer = sum(chunk_d) * OPTIMIZER_STATE_BYTES_PER_PARAM / shards
    optimizer += sum(chunk_x) * OPTIMIZER_STATE_BYTES_PER_PARAM / expert_shards
    per_layer = layer_activation_bytes(family, shape, config.recompute)
    working = working_bytes(config, family, shape, stage == (len(layers_per_vstage) - 1) % p)
    reserved = float(config.reserved_memory)
    ops = stage_ops(config.schedule, p, config.micro_batches, v, stage)
    last_b = {op.chunk: i for i, op in enumerate(ops) if op.kind == "B"}

    gathered = set(range(v)) if not fsdp else set()
    accumulating = set(range(v)) if not fsdp else set()
    reduced: set[int] = set()
    held = 0
    best: StageMemory | None = None

    def snapshot(i: int) -> StageMemory:
        grads = sum(chunk_p[c] for c in accumulating) * grad_bytes
        grads += sum(chunk_d[c] for c in reduced) * grad_bytes / shards
        grads += sum(chunk_x[c] for c in reduced) * grad_bytes / expert_shards
        return StageMemory(
            stage,
            params,
            weights=sum(chunk_p[c] for c in gathered) * weight_bytes,
            grads=grads,
            optimizer=optimizer,
            activations=held * per_layer,
            working=working,
            reserved=reserved,
            layers_in_flight=held,
            at_op=i,
        )

    for i, op in enumerate(ops):
        if op.kind == "F":
            gathered.add(op.chunk)
            held += layers[op.chunk]
            now = snapshot(i)  # after the forward: its activations are saved
        else:
            if op.chunk not in reduced:
                accumulating.add(op.chunk)
            now = snapshot(i)  # during the backward: its gradients and its activations are live
            held -= layers[op.chunk]
            if fsdp and last_b[op.chunk] == i:
                accumulating.discard(op.chunk)
                reduced.add(op.chunk)
        if best is None or now.total > best.total:
            best = now
    assert best is not None
    return best


def memory_per_stage(config, family, shape, layers_per_vstage: list[int]) -> list[StageMemory]:
    return [stage_memory(config, family, shape, layers_per_vstage, s) for s in range(config.parallelism.pp)]
