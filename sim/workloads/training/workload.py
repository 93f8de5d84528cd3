"""`kind: training` — large-model training with 4D parallelism (TP x CP x PP x DP).

    workload:
      kind: training
      model: llama3-405b            # LLM presets (sim/models/transformer.py), MoE presets (sim/models/moe.py),
                                    # DiT presets (sim/models/dit.py), or inline (with `experts`: MoE)
      dtype: bf16                   # activations, attention, weights
      gemm_dtype: fp8               # optional: FP8 GEMMs (forward and backward, Transformer Engine style)
      parallelism: {tp: 8, cp: 1, pp: 16, dp: 64}   # product = the cluster's GPUs (dp defaults to the rest)
                                    # MoE models: ep (expert parallel) divides dp and the experts
      sequence_length: 8192         # LLMs; a DiT takes `video: {frames, height, width}` instead
      global_batch_tokens: 16_777_216   # or global_batch_size (sequences / clips)
      micro_batch_size: 1           # sequences per micro-batch
      schedule: interleaved_1f1b    # 1f1b | interleaved_1f1b (with virtual_stages: N >= 2)
      virtual_stages: 2
      recompute: selective          # none | selective | full
      iterations: 2

More fields: `sequence_parallel` (Megatron SP with TP, default true), `tp_comm_overlap` (TP
all-gather / reduce-scatter run beside the GEMM that needs / produces them), `data_parallel` (`fsdp`: weights,
gradients and optimizer sharded over the dp x cp ranks - each unit's weights all-gathered before the
chunk's first forward uses them, its gradients reduce-scattered as soon as the chunk's last backward
has produced them, no resharding in between, as Llama 3 ran FSDP with pipelining; `ddp`: gradient
all-reduce per unit, optimizer replicated), `fsdp_unit` (`layer`: one unit per transformer layer,
the usual FSDP wrapping; `chunk`: the whole pipeline chunk), `grad_dtype` (fp32: Llama 3 accumulates and
reduce-scatters gradients in FP32), `collective_algorithm` (TP/CP collectives), `reserved_memory`,
`simulate: {ranks: auto|all|representative, replay: auto|on|off}` (fidelity, see training_layout.py
and training_run.py; `auto` picks the exact shortcuts only).

Mixture-of-experts models (`model: mixtral-8x7b`, or inline with `experts` and `experts_per_token`):
`parallelism.ep` shards every MoE layer's experts over ep data-parallel replicas (Megatron-Core's
expert parallelism: the ep replicas of one block each hold E / ep experts and exchange tokens by a
dispatch and a combine all-to-all per layer, forward and backward, as flows on the network);
attention and embeddings stay tp x cp x pp x dp as for a dense model. `moe_capacity_factor` (>= 1)
is the load-balance assumption (sim/models/moe.py). The expert gradients are reduced over the
dp x cp / ep ranks holding the same experts.

The run (training_run.py): kernels from the shape-aware roofline of the GPU model (per-layer GEMM,
attention and elementwise shapes in sim/models/training_shapes.py), TP collectives on the scale-up
fabric, CP all-gathers of K/V, pipeline p2p flows between stage groups with the schedule's bubbles
(training_schedule.py), DP collectives overlapped on the comm stream, gradient-norm sync, optimizer.

Metrics: `iteration_s` (mean over iterations), `tokens_per_s`, `tflop_per_s_per_gpu` (model FLOPs:
6 x matmul parameters x tokens + attention (x3 for forward and backward), per second per GPU),
`mfu` (that over the GPU's dense BF16 peak, also with `gemm_dtype: fp8`), `hfu` (executed FLOPs,
recomputation included), `bubble_fraction`, `exposed_comm_fraction` (time the GPUs wait for
communication not hidden under kernels; with the bubble and the kernel time it splits the run:
`breakdown_s` per iteration), `peak_memory_per_gpu_bytes` (training/memory.py: each stage at the
peak of its schedule; a job that does not fit is a load-time error with the numbers),
`memory_per_gpu_bytes` (breakdown of the fullest stage), `memory_per_stage_bytes`, `op_s` (one
forward / backward pass per virtual stage, e.g. "F v0"),
`iteration_s_each`, `model_flop_per_iteration`, `micro_batches`, `layers_per_virtual_stage`, and the fidelity
used: `simulated_ranks`, `replica_classes`, `replay`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from hardware_models.gpu import DTYPE_BYTES, Dtype
from hardware_models.strict import StrictModel
from hardware_models.units import Bytes
from sim.errors import ScenarioError
from sim.models.dit import PRESETS as DIT_PRESETS
from sim.models.dit import DiTFamily, DiTSpec
from sim.models.moe import MOE_PRESETS, MoEFamily, MoETransformerSpec
from sim.models.training_shapes import LLMFamily
from sim.models.transformer import PRESETS as LLM_PRESETS
from sim.models.transformer import TransformerSpec
from sim.workloads.base import WorkloadBase
from sim.workloads.training.memory import memory_per_stage
from sim.workloads.training.schedule import split_layers


class TrainingParallelism(StrictModel):
    tp: int = Field(1, ge=1, description="tensor parallel")
    cp: int = Field(1, ge=1, description="context parallel")
    pp: int = Field(1, ge=1, description="pipeline parallel (stages)")
    dp: int | None = Field(None, ge=1, description="data parallel (default: GPUs / (tp x cp x pp))")
    ep: int = Field(
        1, ge=1, description="expert parallel (MoE models): experts sharded over ep data-parallel replicas; divides dp"
    )

    def degrees(self, exclude_none: bool = False) -> dict:
        """tp, cp, pp, dp - and ep where experts are sharded (ep > 1)."""
        return self.model_dump(exclude={"ep"} if self.ep == 1 else None, exclude_none=exclude_none)


class Video(StrictModel):
    frames: int = Field(ge=1)
    height: int = Field(ge=1, description="pixels")
    width: int = Field(ge=1, description="pixels")


class TrainingFidelity(StrictModel):
    ranks: Literal["auto", "all", "representative"] = Field(
        "auto", description="representative: one replica per equivalence class (analytical network only)"
    )
    replay: Literal["auto", "on", "off"] = Field(
        "auto", description="replay identical layers and ops (auto: where exact)"
    )


class Config(WorkloadBase):
    kind: Literal["training"]
    model: MoETransformerSpec | TransformerSpec | DiTSpec
    dtype: Literal["bf16", "fp16"] = "bf16"
    gemm_dtype: Dtype | None = Field(None, description="GEMM dtype (default: dtype)")
    parallelism: TrainingParallelism = TrainingParallelism()
    sequence_length: int | None = Field(None, ge=1, description="tokens per sequence (LLMs)")
    video: Video | None = Field(None, description="clip size (DiT): tokens = frames x patches")
    global_batch_tokens: int | None = Field(None, ge=1)
    global_batch_size: int | None = Field(None, ge=1, description="sequences (clips) per iteration")
    micro_batch_size: int = Field(1, ge=1)
    schedule: Literal["1f1b", "interleaved_1f1b"] = "1f1b"
    virtual_stages: int = Field(1, ge=1, description="model chunks per stage (interleaved_1f1b)")
    recompute: Literal["none", "selective", "full"] = "none"
    sequence_parallel: bool = True
    tp_comm_overlap: bool = Field(
        False,
        description=(
            "overlap each TP all-gather / reduce-scatter with its GEMM (Transformer Engine userbuffers); "
            "default off, as in Megatron-LM"
        ),
    )
    data_parallel: Literal["fsdp", "ddp"] = "fsdp"
    fsdp_unit: Literal["layer", "chunk"] = Field(
        "layer",
        description=(
            "what one DP all-gather / reduce-scatter (ddp: all-reduce bucket) moves: a transformer layer (FSDP "
            "wrapping each block) or a whole pipeline chunk"
        ),
    )
    grad_dtype: Literal["fp32", "bf16"] = "fp32"
    collective_algorithm: Literal["auto", "ring", "tree", "hierarchical"] = "auto"
    reserved_memory: Bytes = Field(
        4 * 2**30,
        ge=0,
        description=("assumption: CUDA context (~0.5-1 GB), NCCL buffers (~1-2 GB) and allocator fragmentation"),
    )
    moe_capacity_factor: float = Field(
        1.0,
        ge=1.0,
        description=(
            "MoE load balance (assumption): rows per expert over the balanced mean - the padding of a capacity "
            "dispatcher, or the busiest expert's load under dropless routing (1: perfectly balanced)"
        ),
    )
    iterations: int = Field(2, ge=1)
    simulate: TrainingFidelity = TrainingFidelity()

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v):
        if isinstance(v, str):
            if v in LLM_PRESETS:
                return LLM_PRESETS[v]
            if v in DIT_PRESETS:
                return DIT_PRESETS[v]
            if v in MOE_PRESETS:
                return MOE_PRESETS[v]
            raise ValueError(
                f"unknown model {v!r}; presets: {', '.join([*LLM_PRESETS, *MOE_PRESETS, *DIT_PRESETS])} "
                "(or an inline mapping; family: dit for a video DiT, experts for a mixture of experts)"
            )
        if isinstance(v, dict):
            if v.get("family") == "dit":
                return DiTSpec.model_validate(v)
            return MoETransformerSpec.model_validate(v) if "experts" in v else TransformerSpec.model_validate(v)
        return v

    # ---- derived ---------------------------------------------------------------------------------
    @property
    def family(self):
        if isinstance(self.model, DiTSpec):
            return DiTFamily(self.model)
        if isinstance(self.model, MoETransformerSpec):
            return MoEFamily(self.model, ep=self.parallelism.ep, capacity_factor=self.moe_capacity_factor)
        return LLMFamily(self.model)

    @property
    def gemm(self) -> str:
        return self.gemm_dtype or self.dtype

    def with_degrees(self, hardware) -> Config:
        """A copy with dp resolved from the cluster size."""
        par = self.parallelism
        if par.dp is not None:
            return self
        dp = max(1, hardware.num_gpus // (par.tp * par.cp * par.pp))
        return self.model_copy(update={"parallelism": par.model_copy(update={"dp": dp})})

    @property
    def sequence(self) -> int:
        if isinstance(self.model, DiTSpec):
            return self.model.tokens(self.video.frames, self.video.height, self.video.width)
        return self.sequence_length

    @property
    def samples(self) -> int:
        """Sequences (clips) per iteration."""
        if self.global_batch_size is not None:
            return self.global_batch_size
        return self.global_batch_tokens // self.sequence

    @property
    def micro_batches(self) -> int:
        """Micro-batches per replica per iteration."""
        return self.samples // (self.micro_batch_size * (self.parallelism.dp or 1))

    @property
    def tokens_per_iteration(self) -> int:
        return self.samples * self.sequence

    def shape(self):
        par = self.parallelism
        return self.family.shape(
            par.tp, par.cp, self.sequence, self.micro_batch_size, self.dtype, self.gemm, self.sequence_parallel
        )

    def memory(self, hardware):
        cfg = self.with_degrees(hardware)
        return memory_per_stage(
            cfg, cfg.family, cfg.shape(), split_layers(cfg.family.layers, cfg.parallelism.pp * cfg.virtual_stages)
        )

    # ---- load-time checks ---------------------------------------------------------------------------
    def check(self, hardware) -> None:
        _check_model_inputs(self)
        cfg = self.with_degrees(hardware)
        par, n = cfg.parallelism, hardware.num_gpus
        if par.tp * par.cp * par.pp * par.dp != n:
            raise ScenarioError(
                f"tp x cp x pp x dp = {par.tp} x {par.cp} x {par.pp} x {par.dp} = "
                f"{par.tp * par.cp * par.pp * par.dp} must equal the cluster's {n} GPUs "
                f"({hardware.nodes} nodes x {hardware.gpus_per_node})",
                path="workload.parallelism",
                value=self.parallelism.degrees(exclude_none=True),
            )
        fam = cfg.family
        for key, problem in (("tp", fam.tp_problem(par.tp)), ("cp", fam.cp_problem(par.cp, cfg.sequence))):
            if problem:
                raise ScenarioError(problem, path=f"workload.parallelism.{key}", value=getattr(par, key))
        _check_experts(cfg)
        _check_batch(cfg)
        _check_schedule(cfg)
        for key, dtype in (("dtype", cfg.dtype), ("gemm_dtype", cfg.gemm)):
            if getattr(hardware.gpu.peak, dtype, None) is None:
                supported = [d for d in DTYPE_BYTES if getattr(hardware.gpu.peak, d, None) is not None]
                raise ScenarioError(
                    f"{hardware.gpu.name} has no {dtype} peak; supported: {', '.join(supported)}",
                    path=f"workload.{key}",
                    value=dtype,
                )
        if getattr(hardware.gpu.peak, "bf16", None) is None:
            raise ScenarioError(
                f"{hardware.gpu.name} has no bf16 peak to measure MFU against", path="hardware.gpu.peak.bf16"
            )
        worst = max(cfg.memory(hardware), key=lambda m: m.total)
        capacity = float(hardware.gpu.memory)
        if worst.total > capacity:
            gb = {k: v / 1e9 for k, v in worst.as_dict().items()}
            raise ScenarioError(
                f"stage {worst.stage} needs {gb['total']:.1f} GB per GPU (weights {gb['weights']:.1f} + grads "
                f"{gb['grads']:.1f} + optimizer {gb['optimizer']:.1f} + activations {gb['activations']:.1f} "
                f"({worst.layers_in_flight} layer-micro-batches in flight) + "
                f"working {gb['working']:.1f} + reserved {gb['reserved']:.1f}) but {hardware.gpu.name} has "
                f"{capacity / 1e9:.1f} GB; {_memory_advice(cfg)}",
                path="workload.parallelism",
                value=self.parallelism.degrees(exclude_none=True),
            )


def _memory_advice(cfg: Config) -> str:
    """What could make a job fit, given what it already does."""
    tips = [
        {"none": "recompute: selective or full", "selective": "recompute: full"}.get(cfg.recompute, ""),
        "more virtual_stages or schedule: 1f1b (fewer activations in flight)"
        if cfg.schedule == "interleaved_1f1b"
        else "",
        "data_parallel: fsdp" if cfg.data_parallel == "ddp" else "",
        "grad_dtype: bf16" if cfg.grad_dtype == "fp32" else "",
        "a smaller micro_batch_size" if cfg.micro_batch_size > 1 else "",
        "more tp, cp or pp",
        "a GPU with more memory",
    ]
    return "try " + ", ".join(t for t in tips if t)


def _check_model_inputs(cfg: Config) -> None:
    if isinstance(cfg.model, DiTSpec):
        if cfg.video is None:
            raise ScenarioError("a DiT model needs video: {frames, height, width}", path="workload.video")
        if cfg.sequence_length is not None:
            raise ScenarioError(
                "a DiT's tokens per clip come from video (frames x patches); remove sequence_length",
                path="workload.sequence_length",
                value=cfg.sequence_length,
            )
        try:
            _ = cfg.sequence
        except ValueError as exc:
            raise ScenarioError(str(exc), path="workload.video", value=cfg.video.model_dump()) from None
    else:
        if cfg.sequence_length is None:
            raise ScenarioError("required for an LLM", path="workload.sequence_length")
        if cfg.video is not None:
            raise ScenarioError("video applies to DiT models only", path="workload.video")
    if (cfg.global_batch_tokens is None) == (cfg.global_batch_size is None):
        raise ScenarioError(
            "give exactly one of global_batch_tokens and global_batch_size (sequences)",
            path="workload.global_batch_tokens",
            value=cfg.global_batch_tokens,
        )


def _check_experts(cfg: Config) -> None:
    par, model = cfg.parallelism, cfg.model
    experts = model.experts if isinstance(model, MoETransformerSpec) else None
    if par.ep > 1 and experts is None:
        raise ScenarioError(
            f"expert parallelism needs a mixture-of-experts model ({model.name} has no experts); allowed: 1",
            path="workload.parallelism.ep",
            value=par.ep,
        )
    if experts is None:
        return
    if experts % par.ep:
        raise ScenarioError(
            f"ep must divide the {experts} experts of {model.name}", path="workload.parallelism.ep", value=par.ep
        )
    if (par.dp or 1) % par.ep:
        raise ScenarioError(
            f"ep must divide dp = {par.dp} (experts are sharded over data-parallel replicas)",
            path="workload.parallelism.ep",
            value=par.ep,
        )
    if par.tp > 1 and not cfg.sequence_parallel:
        raise ScenarioError(
            "a mixture-of-experts model with tp > 1 needs sequence parallelism (as Megatron-Core); allowed: true",
            path="workload.sequence_parallel",
            value=cfg.sequence_parallel,
        )


def _check_batch(cfg: Config) -> None:
    seq, par = cfg.sequence, cfg.parallelism
    if cfg.global_batch_tokens is not None and cfg.global_batch_tokens % seq:
        raise ScenarioError(
            f"must be a multiple of the {seq} tokens per sequence",
            path="workload.global_batch_tokens",
            value=cfg.global_batch_tokens,
        )
    per_step = cfg.micro_batch_size * par.dp
    if cfg.samples % per_step or cfg.samples < per_step:
        raise ScenarioError(
            f"{cfg.samples} sequences per iteration must be a positive multiple of micro_batch_size "
            f"x dp = {cfg.micro_batch_size} x {par.dp} = {per_step}",
            path="workload.global_batch_tokens" if cfg.global_batch_tokens else "workload.global_batch_size",
            value=cfg.global_batch_tokens or cfg.global_batch_size,
        )


def _check_schedule(cfg: Config) -> None:
    par, v, m = cfg.parallelism, cfg.virtual_stages, cfg.micro_batches
    if cfg.schedule == "1f1b" and v != 1:
        raise ScenarioError(
            "virtual_stages > 1 needs schedule: interleaved_1f1b", path="workload.virtual_stages", value=v
        )
    if cfg.schedule == "interleaved_1f1b":
        if v < 2 or par.pp < 2:
            raise ScenarioError(
                f"interleaved_1f1b needs virtual_stages >= 2 and pp >= 2 (have {v} and {par.pp})",
                path="workload.virtual_stages",
                value=v,
            )
        if m % par.pp:
            raise ScenarioError(
                f"interleaved_1f1b needs the {m} micro-batches per replica to be a multiple of pp = {par.pp}",
                path="workload.schedule",
                value=cfg.schedule,
            )
    try:
        split_layers(cfg.family.layers, par.pp * v)
    except ValueError as exc:
        raise ScenarioError(str(exc), path="workload.parallelism.pp", value=par.pp) from None


def simulate(sim, cluster, config: Config):
    from sim.workloads.training.metrics import run_training

    return (yield from run_training(sim, cluster, config.with_degrees(cluster.hardware)))
