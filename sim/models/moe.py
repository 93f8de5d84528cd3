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
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import Field, model_validator

from hardware_models.gpu import DTYPE_BYTES
from sim.models.transformer import TensorShard, TransformerSpec, resolve_model


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
