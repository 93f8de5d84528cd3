"""Mixture-of-experts (MoE) decoder-only transformers: the spec, presets, and what expert parallelism
puts on one GPU.

Concepts
- `MoETransformerSpec`: a `TransformerSpec` whose FFN is `experts` SwiGLU experts of width `ffn`
  (F) with a router (a D x E GEMM) sending every token to its `experts_per_token` (top-k) experts.
  Parameters count every expert (what must be stored); FLOPs per token count only the k experts a
  token visits (what is computed): `dense_flop_per_token` is the *active* count.
- Expert parallelism (EP) of degree `ep`: each GPU of an EP group holds E / ep whole experts; the
  attention stays tensor-parallel. A token is *dispatched* to the GPUs holding its k experts by an
  all-to-all and its expert outputs are *combined* back by a second all-to-all (arXiv 2401.04088,
  Section 2.1; the dispatch/combine pattern of GShard, arXiv 2006.16668). With balanced routing a
  GPU's experts see rows x k / ep token rows in all.
- Presets (`MOE_PRESETS`): Mixtral 8x7B from its paper's Table 1 (docs/references.md#llm-serving).
- `MoEFamily`: the same spec in *training* (sim/workloads/training), an `LLMFamily` whose FFN is the
  expert layer below; serving (sim/workloads/serving/cost.py) and training read the one spec.

One MoE layer in training on one GPU (Megatron-Core's all-to-all token dispatcher; experts
tensor-parallel over the `tp` ranks like the dense FFN, expert parallelism `ep` over data-parallel
replicas; with tp > 1 sequence parallelism is required, as Megatron-Core requires it):
  router GEMM on the GPU's own T_l = tokens / tp tokens ([T_l, D] @ [D, E]) and the permute (top-k,
  copy of every token to its k slots) -> dispatch all-to-all over the ep group (each GPU sends
  T_l x k x c token rows of D values: `ep all_to_all dispatch`, nbytes = T_l k c D bytes, (ep-1)/ep of
  it leaves the GPU) -> TP all-gather of the received rows -> per local expert (E / ep of them) a
  grouped-GEMM member: up (+gate) [r, D] @ [D, 2F/tp], activation, down [r, F/tp] @ [F/tp, D] with
  r = tokens x k x c x ep / E rows -> TP reduce-scatter -> combine all-to-all (the same bytes back) ->
  unpermute (weighted sum of the k expert outputs). The backward is the reverse (all-to-alls stay
  all-to-alls, training_shapes.backward_pass).
  Load balance (assumption, stated): routing is balanced over the experts - every expert receives
  the mean tokens x k x ep / E rows - times `capacity_factor` c >= 1, the padding of a capacity-based
  dispatcher (GShard / Switch: every expert's buffer padded to c x the mean) or, for a dropless one,
  the busiest expert's load relative to the mean, which paces every GPU (they all wait at the
  combine). c = 1 is perfect balance. Model FLOPs count the routed tokens only (c = 1); executed
  FLOPs and all-to-all bytes include c.
- Memory: expert weights (E x 3DF per layer) are divided by tp x ep per GPU, the rest (attention,
  norms and the small D x E router, counted with them) by tp (training/memory.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import Field, model_validator

from hardware_models.gpu import DTYPE_BYTES
from sim.models.training_shapes import CommOp, ElementwiseOp, LLMFamily, Op, Shape
from sim.models.transformer import Gemm, TensorShard, TransformerSpec, resolve_model


class MoETransformerSpec(TransformerSpec):
    """A decoder-only transformer with mixture-of-experts FFN layers (see module docstring)."""

    experts: int = Field(ge=1, description="experts per MoE layer (E)")
    experts_per_token: int = Field(ge=1, description="experts each token is routed to (top-k)")

    @model_validator(mode="after")
    def _check_experts(self) -> MoETransformerSpec:
        if self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) exceeds experts ({self.experts})")
        return self

    @property
    def expert_params(self) -> int:
        """Parameters of one expert (its FFN matrices)."""
        return self.ffn_matrices * self.hidden * self.ffn

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden * self.experts

    @property
    def ffn_params_per_layer(self) -> int:
        """Every expert and the router: what a layer stores."""
        return self.experts * self.expert_params + self.router_params_per_layer

    def dense_flop_per_token(self) -> float:
        """GEMM FLOPs of one token through all layers: attention, router and its k experts (active)."""
        active = self.experts_per_token * self.expert_params + self.router_params_per_layer
        return 2.0 * self.layers * (self.attention_params_per_layer + active)


def moe_weight_bytes(shard: TensorShard, ep: int, dtype: str, ffn_dtype: str, embedding_dtype: str = "bf16") -> float:
    """Weights on one GPU: attention and embeddings tensor-parallel over `shard.tp`, E / ep whole
    experts in `ffn_dtype`, the router replicated."""
    m = shard.model
    if not isinstance(m, MoETransformerSpec):
        return shard.weight_bytes(dtype, ffn_dtype, embedding_dtype)
    dense_ffn = m.ffn_matrices * m.hidden * shard.ffn  # what weight_bytes counts for the FFN
    experts = m.experts / ep * m.expert_params
    ffn_delta = (experts - dense_ffn) * DTYPE_BYTES[ffn_dtype] + m.router_params_per_layer * DTYPE_BYTES[dtype]
    return shard.weight_bytes(dtype, ffn_dtype, embedding_dtype) + m.layers * ffn_delta


MIXTRAL = (
    "arXiv 2401.04088 (Mixtral of Experts) Table 1: dim 4096, 32 layers, head_dim 128, hidden_dim 14336, "
    "32 heads, 8 KV heads, vocab 32,000, 8 experts, top-2; docs/references.md#llm-serving"
)
MOE_PRESETS: Mapping[str, MoETransformerSpec] = MappingProxyType(
    {
        "mixtral-8x7b": MoETransformerSpec(
            name="mixtral-8x7b",
            layers=32,
            hidden=4096,
            ffn=14336,
            heads=32,
            kv_heads=8,
            head_dim=128,
            vocab=32000,
            experts=8,
            experts_per_token=2,
            source=MIXTRAL,
        ),
    }
)


def resolve_any_model(value) -> TransformerSpec:
    """A dense or MoE preset name, an inline mapping (with `experts`: MoE) or a spec -> a spec."""
    if isinstance(value, str) and value in MOE_PRESETS:
        return MOE_PRESETS[value]
    if isinstance(value, dict) and "experts" in value:
        return MoETransformerSpec.model_validate(value)
    if isinstance(value, str) and value not in MOE_PRESETS:
        try:
            return resolve_model(value)
        except ValueError as err:
            raise ValueError(f"{err}; MoE presets: {', '.join(MOE_PRESETS)}") from None
    return resolve_model(value)


@dataclass(frozen=True)
class MoEFamily(LLMFamily):
    """A `MoETransformerSpec` in training with expert parallelism `ep` (see module docstring)."""

    spec: MoETransformerSpec
    ep: int = 1
    capacity_factor: float = 1.0

    @property
    def expert_layer_params(self) -> int:
        return self.spec.experts * self.spec.expert_params

    @property
    def matmul_params(self) -> int:
        """Parameters that multiply every token: attention, router and the k experts it visits
        (active parameters), and the LM head."""
        m = self.spec
        return round(m.dense_flop_per_token() / 2.0) + m.vocab * m.hidden

    def local_tokens(self, s: Shape) -> int:
        """Tokens this GPU routes: its sequence-parallel share."""
        return s.tokens // s.sp_divisor

    def dispatch_rows(self, s: Shape) -> int:
        """Token rows one GPU sends in the dispatch (and receives back in the combine): T_l x k x c."""
        return math.ceil(self.local_tokens(s) * self.spec.experts_per_token * self.capacity_factor)

    def expert_rows(self, s: Shape) -> int:
        """Rows each local expert multiplies: the TP group's received rows over its E / ep experts."""
        return math.ceil(self.dispatch_rows(s) * s.tp * self.ep / self.spec.experts)

    def alltoall_bytes(self, s: Shape) -> float:
        """What one GPU sends in one dispatch (or combine) all-to-all, itself included (nccl-tests)."""
        return self.dispatch_rows(s) * self.spec.hidden * s.act_bytes

    def ffn_forward(self, s: Shape, shard: TensorShard) -> list[Op]:
        m, e, tp = self.spec, s.act_bytes, s.tp
        local, rows = self.local_tokens(s), self.dispatch_rows(s)
        r, d, f = self.expert_rows(s), m.hidden, shard.ffn
        up = f * (2 if m.mlp == "swiglu" else 1)
        act = (3 if m.mlp == "swiglu" else 2) * r * f * e
        a2a = self.alltoall_bytes(s)
        gathered = tp * a2a  # the TP group's received rows (all-gather / reduce-scatter buffer)
        ops: list[Op] = [
            Gemm("router", local, m.experts, d, s.dtype),
            # softmax + top-k over fp32 logits, copy every token to its k slots
            ElementwiseOp("moe_permute", local * m.experts * 4 * 2 + local * d * e + rows * d * e, False),
        ]
        if self.ep > 1:
            ops.append(CommOp("ep all_to_all dispatch", "ep", "all_to_all", a2a))
        if tp > 1:
            ops.append(CommOp("tp all_gather expert_in", "tp", "all_gather", gathered))
        for i in range(m.experts // self.ep):
            ops += [
                Gemm(f"expert{i} ffn_up", r, up, d, s.gemm_dtype),
                ElementwiseOp(f"expert{i} ffn_act", act),
                Gemm(f"expert{i} ffn_down", r, d, f, s.gemm_dtype),
            ]
        if tp > 1:
            ops.append(CommOp("tp reduce_scatter expert_out", "tp", "reduce_scatter", gathered))
        if self.ep > 1:
            ops.append(CommOp("ep all_to_all combine", "ep", "all_to_all", a2a))
        ops.append(ElementwiseOp("moe_unpermute", rows * d * e + local * d * e, False))  # weighted sum of k
        return ops

    def ffn_saved_per_token(self, s: Shape, shard: TensorShard) -> tuple[float, float]:
        """Per local token (Shape.tokens): the dispatched rows (the TP group re-gathers them in the
        backward, as the dense FFN input), the experts' up (+gate) output and the fp32 router
        probabilities kept; the expert activation output recomputable."""
        m, e, sp = self.spec, s.act_bytes, s.sp_divisor
        kc = self.expert_rows(s) * m.experts / self.ep / max(s.tokens, 1)  # expert rows per token on this GPU
        up = shard.ffn * (2 if m.mlp == "swiglu" else 1)
        kept = kc * m.hidden * e / sp + kc * up * e + m.experts * 4 / sp
        return kept, kc * shard.ffn * e

    def working_bytes(self, s: Shape) -> float:
        """The gathered expert rows, the widest expert intermediate and its gradient, the gathered K/V."""
        shard, e = TensorShard(self.spec, s.tp), s.act_bytes
        rows = self.expert_rows(s) * self.spec.experts // self.ep
        up = shard.ffn * (2 if self.spec.mlp == "swiglu" else 1)
        widest = max(rows * up, s.tokens * self.spec.hidden) * e * 2 + rows * self.spec.hidden * e
        kv = 2 * s.batch * s.sequence * shard.kv_heads * shard.head_dim * e * 2 if s.cp > 1 else 0.0
        return widest + kv
