"""What one GPU does for one transformer layer in *training*: forward ops, the backward derived from
them, recomputation, saved activations and model FLOPs. Model families (the LLMs of
sim/models/transformer.py here, the video DiT in sim/models/dit.py) describe their forward pass as a
list of ops; everything else is derived generically.

Ops (one GPU's share under tensor parallelism `tp`, context parallelism `cp`):
- `Gemm` (from transformer.py): [m, k] @ [k, n]. Backward: dgrad [m, n] @ [n, k] and wgrad
  [k, m] @ [m, n] - the same FLOPs twice, with their own shapes (and so their own efficiency).
- `AttentionOp`: a fused FlashAttention kernel over `pairs` (query, key) pairs per head and sequence.
  Model FLOPs 4 * head_dim per pair and head forward, twice that backward; the backward kernel
  *executes* 2.5x the forward FLOPs (five matmuls against two: it recomputes the scores), which is
  hardware work, not model work.
- `ElementwiseOp`: memory-bound (norms, RoPE, activation functions, embedding, loss). Backward moves
  twice the bytes (assumption: it reads the saved input and the incoming gradient and writes a
  gradient).
- `CommOp`: a collective of the `tp` group (Megatron sequence parallelism: all-gather before a
  column-parallel GEMM, reduce-scatter after a row-parallel one; all-reduce without it), of the `cp`
  group (all-gather of K and V, Llama 3 style context parallelism) or of the `ep` group (the token
  all-to-alls of a mixture-of-experts layer, sim/models/moe.py). Backward swaps all-gather and
  reduce-scatter (the gradient of a gather is a scatter-reduce); all-reduce and all-to-all stay.

Backward of a layer = the forward ops reversed, each replaced by its backward (`backward_pass`).
Recomputation (`recomputed`; `none | selective | full`): `full` re-runs the whole forward
(collectives included) before the backward and keeps only the layer input; `selective` re-runs the
elementwise ops (norms, RoPE, the MLP activation) and drops their outputs from the saved
activations. Recomputed kernels carry executed FLOPs but no model FLOPs.

Saved activations per token and layer (16-bit, sequence-parallel parts divided by tp) follow the
tensor list of Korthikanti et al. (arXiv 2205.05198 §4) adapted to RMSNorm + GQA + SwiGLU + FlashAttention
(no dropout masks, no s^2 score matrices): norm inputs and outputs, Q/K/V, attention output and its
fp32 log-sum-exp, the FFN up(+gate) output and the activation output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from hardware_models.gpu import DTYPE_BYTES, DeviceSpec
from sim.models.kernel import Kernel
from sim.models.transformer import (
    Gemm,
    TensorShard,
    TransformerSpec,
    causal_keys_seen,
    layer_elementwise_bytes,
    layer_gemms,
    lm_head_gemm,
    tp_problem,
)

Recompute = Literal["none", "selective", "full"]
ATTENTION_BWD_EXECUTED = 2.5  # FlashAttention backward: 5 matmuls vs the forward's 2
ATTENTION_BWD_MODEL = 2.0  # model-FLOP convention: backward = 2 x forward
ELEMENTWISE_BWD_BYTES = 2.0  # assumption (module docstring)


@dataclass(frozen=True)
class AttentionOp:
    name: str
    q_len: int  # local queries per sequence
    kv_len: int  # keys each query block reads (the gathered sequence under cp)
    heads: int  # query heads on this GPU
    kv_heads: int
    head_dim: int
    pairs: float  # (query, key) pairs per head and sequence on this GPU
    batch: int
    dtype: str
    backward: bool = False

    @property
    def flop(self) -> float:
        """Model FLOPs."""
        fwd = 4.0 * self.batch * self.heads * self.head_dim * self.pairs
        return fwd * (ATTENTION_BWD_MODEL if self.backward else 1.0)


@dataclass(frozen=True)
class ElementwiseOp:
    name: str
    nbytes: float
    recompute_selective: bool = True  # selective recomputation re-runs it


@dataclass(frozen=True)
class CommOp:
    name: str
    group: Literal["tp", "cp", "ep"]
    op: Literal["all_gather", "reduce_scatter", "all_reduce", "all_to_all"]
    nbytes: float  # nccl-tests convention (total buffer for AG/RS, per-rank buffer for AR, sent per rank for A2A)


Op = Gemm | AttentionOp | ElementwiseOp | CommOp


# ---- backward and recomputation ---------------------------------------------------------------

_SWAP = {
    "all_gather": "reduce_scatter",
    "reduce_scatter": "all_gather",
    "all_reduce": "all_reduce",
    "all_to_all": "all_to_all",
}


def backward_ops(op: Op) -> list[Op]:
    if isinstance(op, Gemm):
        return [
            Gemm(f"{op.name}.dgrad", op.m, op.k, op.n, op.dtype),
            Gemm(f"{op.name}.wgrad", op.k, op.n, op.m, op.dtype),
        ]
    if isinstance(op, AttentionOp):
        return [replace(op, name=f"{op.name}.bwd", backward=True)]
    if isinstance(op, ElementwiseOp):
        return [replace(op, name=f"{op.name}.bwd", nbytes=op.nbytes * ELEMENTWISE_BWD_BYTES)]
    return [replace(op, name=f"{op.name}.bwd", op=_SWAP[op.op])]


def recomputed(forward: list[Op], recompute: Recompute) -> list[Op]:
    """The forward ops re-run before the backward (hardware work, no model FLOPs)."""
    if recompute == "full":
        return [_renamed(o, "recompute") for o in forward]
    if recompute == "selective":
        return [_renamed(o, "recompute") for o in forward if isinstance(o, ElementwiseOp) and o.recompute_selective]
    return []


def backward_pass(forward: list[Op]) -> list[Op]:
    """The backward ops of a forward op list."""
    return [b for op in reversed(forward) for b in backward_ops(op)]


def _renamed(op: Op, prefix: str) -> Op:
    return replace(op, name=f"{prefix} {op.name}")


def timed(op: Op, device: DeviceSpec, model: bool = True) -> Kernel | CommOp:
    """Kernels get their duration from the hardware model (`model`: whether their FLOPs are model
    FLOPs, not recomputation); collectives stay as they are."""
    if isinstance(op, Gemm):
        return Kernel(
            op.name,
            device.gemm_time_s(op.m, op.n, op.k, op.dtype),
            flop=op.flop if model else 0.0,
            category="dense",
            executed_flop=op.flop,
        )
    if isinstance(op, AttentionOp):
        group = op.heads // op.kv_heads  # GQA heads packed into the query rows (FA3)
        fwd = 4.0 * op.batch * op.heads * op.head_dim * op.pairs
        executed = fwd * (ATTENTION_BWD_EXECUTED if op.backward else 1.0)
        t = device.attention_time_s(
            op.q_len * group,
            op.kv_len,
            op.kv_heads,
            op.head_dim,
            kv_heads=op.kv_heads,
            dtype=op.dtype,
            batch=op.batch,
            flop=executed,
        )
        return Kernel(op.name, t, flop=op.flop if model else 0.0, category="attention", executed_flop=executed)
    if isinstance(op, ElementwiseOp):
        return Kernel(op.name, device.memory_time_s(op.nbytes), nbytes=op.nbytes, category="elementwise")
    return op


# ---- the LLM family --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """The work of one micro-batch on one GPU."""

    tp: int
    cp: int
    sequence: int  # tokens per sequence (before cp)
    batch: int  # sequences per micro-batch
    hidden: int  # width of the residual stream
    dtype: str  # activations and attention
    gemm_dtype: str  # GEMMs (fp8: FP8 tensor cores, Transformer Engine style)
    sequence_parallel: bool = True

    @property
    def tokens(self) -> int:
        """Tokens of the micro-batch on one GPU (its cp share) = rows of every GEMM (gathered over tp)."""
        return self.batch * self.sequence // self.cp

    @property
    def act_bytes(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def sp_divisor(self) -> int:
        """Norms and residuals run on 1/tp of the tokens under sequence parallelism."""
        return self.tp if self.sequence_parallel else 1

    def tp_comm(self, name: str, before_column_parallel: bool) -> list[CommOp]:
        """The TP collective around a column-parallel (before) or row-parallel (after) GEMM."""
        if self.tp == 1:
            return []
        nbytes = self.tokens * self.hidden * self.act_bytes
        if self.sequence_parallel:
            return [CommOp(name, "tp", "all_gather" if before_column_parallel else "reduce_scatter", nbytes)]
        return [] if before_column_parallel else [CommOp(name, "tp", "all_reduce", nbytes)]


@dataclass(frozen=True)
class ModelFamily:
    """What every trained model family shares: its spec's name, depth and width, and the `Shape`
    of a layer under a parallelism. Subclasses add the layer ops, parameters and FLOPs."""

    spec: object

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def layers(self) -> int:
        return self.spec.layers

    @property
    def hidden(self) -> int:
        return self.spec.hidden

    @property
    def expert_layer_params(self) -> int:
        """Parameters of one layer's experts (sharded over expert parallelism); none in a dense model."""
        return 0

    def shape(self, tp, cp, sequence, batch, dtype, gemm_dtype, sequence_parallel=True) -> Shape:
        return Shape(tp, cp, sequence, batch, self.spec.hidden, dtype, gemm_dtype, sequence_parallel)


@dataclass(frozen=True)
class LLMFamily(ModelFamily):
    """A decoder-only LLM (TransformerSpec) trained with causal attention."""

    spec: TransformerSpec
    family: str = "llm"
    causal: bool = True

    def tp_problem(self, tp: int) -> str | None:
        problem = tp_problem(self.spec, tp)
        if problem is None and self.spec.vocab % tp:
            return f"tp {tp} must divide the vocabulary {self.spec.vocab} (vocab-parallel embedding and LM head)"
        return problem

    def cp_problem(self, cp: int, sequence: int) -> str | None:
        if cp > 1 and sequence % (2 * cp):
            return (
                f"sequence_length {sequence} must divide into 2 x cp = {2 * cp} chunks (load-balanced causal sharding)"
            )
        return None

    # ---- parameters ------------------------------------------------------------------------
    @property
    def layer_params(self) -> int:
        m = self.spec
        return m.attention_params_per_layer + m.ffn_params_per_layer + 2 * m.hidden

    @property
    def first_params(self) -> int:
        return self.spec.vocab * self.spec.hidden  # input embedding

    @property
    def last_params(self) -> int:
        return self.spec.vocab * self.spec.hidden + self.spec.hidden  # final norm + LM head

    @property
    def params(self) -> int:
        return self.spec.params

    # ---- model FLOPs -----------------------------------------------------------------------
    @property
    def matmul_params(self) -> int:
        """Parameters that multiply every token: the layers' matrices and the LM head (the embedding
        is a lookup)."""
        m = self.spec
        return m.layers * (m.attention_params_per_layer + m.ffn_params_per_layer) + m.vocab * m.hidden

    def model_flop_per_sequence(self, sequence: int) -> float:
        """6 x matmul params x tokens + attention (forward 4 x head_dim per causal pair, x3 for training)."""
        return 6.0 * self.matmul_params * sequence + 3.0 * self.spec.attention_flop(causal_keys_seen(sequence))

    # ---- forward ops -----------------------------------------------------------------------
    def layer_forward(self, s: Shape) -> list[Op]:
        shard = TensorShard(self.spec, s.tp)
        g = {x.name: x for x in layer_gemms(shard, s.tokens, s.gemm_dtype, s.gemm_dtype)}
        ew = layer_elementwise_bytes(shard, s.tokens, s.act_bytes)
        sp = s.sp_divisor
        ops: list[Op] = [
            ElementwiseOp("norm_attn", ew["norm_attn"] / sp),
            *s.tp_comm("tp all_gather qkv_in", True),
            g["qkv_proj"],
            ElementwiseOp("rope", ew["rope"]),
        ]
        if s.cp > 1:
            kv = 2 * s.batch * s.sequence * shard.kv_heads * shard.head_dim * s.act_bytes
            ops.append(CommOp("cp all_gather kv", "cp", "all_gather", kv))
        pairs = causal_keys_seen(s.sequence) / s.cp
        ops += [
            AttentionOp(
                "attention",
                s.sequence // s.cp,
                s.sequence,
                shard.q_heads,
                shard.kv_heads,
                shard.head_dim,
                pairs,
                s.batch,
                s.dtype,
            ),
            g["out_proj"],
            *s.tp_comm("tp reduce_scatter attn_out", False),
            ElementwiseOp("norm_ffn", ew["norm_ffn"] / sp),
            *self.ffn_forward(s, shard),
        ]
        return ops

    def ffn_forward(self, s: Shape, shard: TensorShard) -> list[Op]:
        """The FFN after its norm: column-parallel up (+gate), activation, row-parallel down."""
        g = {x.name: x for x in layer_gemms(shard, s.tokens, s.gemm_dtype, s.gemm_dtype)}
        ew = layer_elementwise_bytes(shard, s.tokens, s.act_bytes)
        return [
            *s.tp_comm("tp all_gather ffn_in", True),
            g["ffn_up"],
            ElementwiseOp("ffn_act", ew["ffn_act"]),
            g["ffn_down"],
            *s.tp_comm("tp reduce_scatter ffn_out", False),
        ]

    def first_forward(self, s: Shape) -> list[Op]:
        """Vocab-parallel embedding lookup, then its TP reduction."""
        nbytes = 2 * s.tokens * self.spec.hidden * s.act_bytes  # read rows, write activations
        ops: list[Op] = [ElementwiseOp("embedding", nbytes, recompute_selective=False)]
        if s.tp > 1:
            op = "reduce_scatter" if s.sequence_parallel else "all_reduce"
            ops.append(CommOp(f"tp {op} embedding", "tp", op, s.tokens * self.spec.hidden * s.act_bytes))
        return ops

    def last_forward(self, s: Shape) -> list[Op]:
        """Final norm, vocab-parallel LM head and cross-entropy (fp32 logits, three passes: max,
        sum-exp, loss) with its small TP all-reduces of per-token statistics."""
        shard = TensorShard(self.spec, s.tp)
        head = lm_head_gemm(shard, s.tokens, s.gemm_dtype)
        ops: list[Op] = [
            ElementwiseOp("final_norm", 4 * s.tokens * self.spec.hidden * s.act_bytes / s.sp_divisor),
            *s.tp_comm("tp all_gather lm_head_in", True),
            head,
            ElementwiseOp("cross_entropy", 3 * s.tokens * head.n * 4, recompute_selective=False),
        ]
        if s.tp > 1:
            ops.append(CommOp("tp all_reduce loss stats", "tp", "all_reduce", 3 * s.tokens * 4))
        return ops

    # ---- memory -------------------------------------------------------------------------------
    def saved_bytes_per_token(self, s: Shape, recompute: Recompute) -> float:
        """Activations one layer keeps for its backward, per local token (`Shape.tokens`), on one GPU."""
        shard, e, sp = TensorShard(self.spec, s.tp), s.act_bytes, s.sp_divisor
        h, hd = self.spec.hidden, shard.head_dim
        layer_input = h * e / sp
        if recompute == "full":
            return layer_input
        ffn_kept, ffn_recomputable = self.ffn_saved_per_token(s, shard)
        kept = (
            layer_input  # attention norm input (residual)
            + (shard.q_heads + 2 * shard.kv_heads) * hd * e  # Q, K, V
            + shard.q_heads * hd * e
            + shard.q_heads * 4  # attention output, fp32 LSE
            + h * e / sp  # FFN norm input (residual)
            + ffn_kept
        )
        recomputable = 2 * h * e / sp + ffn_recomputable  # norm outputs, FFN activation output
        return kept + (recomputable if recompute == "none" else 0.0)

    def ffn_saved_per_token(self, s: Shape, shard: TensorShard) -> tuple[float, float]:
        """(kept, recomputable by `selective`) bytes of the FFN per local token: its up (+gate)
        output; its activation output."""
        up = shard.ffn * (2 if self.spec.mlp == "swiglu" else 1)
        return up * s.act_bytes, shard.ffn * s.act_bytes

    def working_bytes(self, s: Shape) -> float:
        """Transient memory of one layer's backward on one GPU: gathered inputs, the widest
        intermediate and its gradient, the gathered K/V under cp."""
        shard, e = TensorShard(self.spec, s.tp), s.act_bytes
        up = shard.ffn * (2 if self.spec.mlp == "swiglu" else 1)
        widest = s.tokens * max(up, self.spec.hidden) * e * 2
        kv = 2 * s.batch * s.sequence * shard.kv_heads * shard.head_dim * e * 2 if s.cp > 1 else 0.0
        return widest + kv

    def last_working_bytes(self, s: Shape) -> float:
        """fp32 logits and their gradient on the last stage."""
        return 2 * s.tokens * (self.spec.vocab // s.tp) * 4
