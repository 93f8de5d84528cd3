"""Decoder-only transformer models: presets, tensor-parallel shards, per-layer kernel shapes, FLOPs
and memory footprints. Workload-neutral: inference (cp_inference) and training both build on it.

Concepts
- `TransformerSpec`: the architecture (layers, hidden D, FFN width F, query heads NH, KV heads NKV,
  vocabulary, MLP kind). `head_dim` defaults to D / NH. `mlp: swiglu` has three FFN matrices
  (gate, up, down), `relu2` (squared ReLU, Nemotron-4) two.
- Presets (`PRESETS`, `resolve_model`) from the model papers (docs/references.md#models).
- `TensorShard`: what one of `tp` GPUs holds of a layer, Megatron-style: the Q heads are split, the KV
  heads split too or, when tp > NKV, replicated so that every GPU keeps one; QKV and FFN-up are
  column-parallel, the output projection and FFN-down row-parallel (one all-reduce after each).
- `layer_gemms(shard, tokens, ...)`: the forward GEMMs of one layer on one GPU for `tokens` rows.
  `layer_elementwise_bytes`: the memory-bound kernels beside them (norms, RoPE, the MLP activation).
  A training workload derives the backward GEMMs from the same shapes (dgrad and wgrad: 2x).
- FLOPs: 2 per multiply-add for GEMMs; attention 4 * head_dim per (query, key) pair and head (QK^T
  and PV), counted over the keys each query actually sees (causal masks count half).
- Memory: weight bytes per GPU (attention and FFN matrices may use different dtypes, e.g. the FP8
  row-wise FFN of arXiv 2411.01783), KV-cache bytes per token per GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from pydantic import Field, model_validator

from hardware_models.gpu import DTYPE_BYTES
from hardware_models.strict import StrictModel


class TransformerSpec(StrictModel):
    """A decoder-only transformer (pre-norm, RoPE, grouped-query attention)."""

    name: str = "custom"
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1, description="model dimension D")
    ffn: int = Field(ge=1, description="FFN inner dimension F")
    heads: int = Field(ge=1, description="query heads NH")
    kv_heads: int = Field(ge=1, description="key/value heads NKV (grouped-query attention)")
    vocab: int = Field(ge=1)
    mlp: Literal["swiglu", "relu2"] = "swiglu"
    head_dim: int | None = Field(None, ge=1, description="defaults to hidden / heads")
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> TransformerSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must divide into heads ({self.heads}), or give head_dim")
        return self

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def ffn_matrices(self) -> int:
        return 3 if self.mlp == "swiglu" else 2

    # ---- parameter counts (whole model) -----------------------------------------------------
    @property
    def attention_params_per_layer(self) -> int:
        hd = self.dim_per_head
        return self.hidden * (self.heads + 2 * self.kv_heads) * hd + self.heads * hd * self.hidden

    @property
    def ffn_params_per_layer(self) -> int:
        return self.ffn_matrices * self.hidden * self.ffn

    @property
    def embedding_params(self) -> int:
        """Input embedding and (untied) LM head."""
        return 2 * self.vocab * self.hidden

    @property
    def params(self) -> int:
        per_layer = self.attention_params_per_layer + self.ffn_params_per_layer + 2 * self.hidden
        return self.layers * per_layer + self.embedding_params + self.hidden

    # ---- FLOPs ----------------------------------------------------------------------------------
    def dense_flop_per_token(self) -> float:
        """GEMM FLOPs of one token through all layers (no attention scores, no LM head)."""
        return 2.0 * self.layers * (self.attention_params_per_layer + self.ffn_params_per_layer)

    def attention_flop(self, keys_seen: float) -> float:
        """FLOPs of all layers' attention for `keys_seen` (query, key) pairs per head."""
        return 4.0 * self.layers * self.heads * self.dim_per_head * keys_seen


def causal_keys_seen(new_tokens: float, cached_tokens: float = 0.0) -> float:
    """(query, key) pairs of a causal prefill of `new_tokens` on top of `cached_tokens`."""
    return new_tokens * cached_tokens + new_tokens * (new_tokens + 1) / 2


_LLAMA3 = "arXiv 2407.21783 (The Llama 3 Herd of Models) Table 3; vocab 128,256 (tokenizer); docs/references.md#models"
PRESETS: Mapping[str, TransformerSpec] = MappingProxyType(
    {
        "llama3-8b": TransformerSpec(
            name="llama3-8b", layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, vocab=128256, source=_LLAMA3
        ),
        "llama3-70b": TransformerSpec(
            name="llama3-70b", layers=80, hidden=8192, ffn=28672, heads=64, kv_heads=8, vocab=128256, source=_LLAMA3
        ),
        "llama3-405b": TransformerSpec(
            name="llama3-405b", layers=126, hidden=16384, ffn=53248, heads=128, kv_heads=8, vocab=128256, source=_LLAMA3
        ),
        "nemotron4-340b": TransformerSpec(
            name="nemotron4-340b",
            layers=96,
            hidden=18432,
            ffn=73728,
            heads=96,
            kv_heads=8,
            vocab=256000,
            mlp="relu2",
            source="arXiv 2406.11704 (Nemotron-4 340B) Table 1: squared-ReLU MLP, "
            "vocab 256,000; docs/references.md#models",
        ),
    }
)


def resolve_model(value: str | dict | TransformerSpec) -> TransformerSpec:
    """A preset name, an inline mapping or a spec -> TransformerSpec (ValueError if unknown)."""
    if isinstance(value, TransformerSpec):
        return value
    if isinstance(value, str):
        if value not in PRESETS:
            raise ValueError(f"unknown model {value!r}; presets: {', '.join(PRESETS)} (or an inline mapping)")
        return PRESETS[value]
    return TransformerSpec.model_validate(value)


def tp_problem(model: TransformerSpec, tp: int, kv_heads: int | None = None) -> str | None:
    """Why `tp` cannot shard `model` (None if it can); any model with `heads` and `ffn` (and
    `kv_heads`, or the `kv_heads` argument)."""
    kv = model.kv_heads if kv_heads is None else kv_heads
    if model.heads % tp:
        return f"tp {tp} must divide the {model.heads} query heads"
    if kv % tp and tp % kv:
        return f"tp {tp} must divide or be a multiple of the {kv} KV heads"
    if model.ffn % tp:
        return f"tp {tp} must divide the FFN width {model.ffn}"
    return None


@dataclass(frozen=True)
class TensorShard:
    """One GPU's share of every layer under tensor parallelism degree `tp`."""

    model: TransformerSpec
    tp: int

    @property
    def q_heads(self) -> int:
        return self.model.heads // self.tp

    @property
    def kv_heads(self) -> int:
        """KV heads held per GPU (replicated when tp > NKV)."""
        return max(1, self.model.kv_heads // self.tp)

    @property
    def ffn(self) -> int:
        return self.model.ffn // self.tp

    @property
    def head_dim(self) -> int:
        return self.model.dim_per_head

    def weight_bytes(self, dtype: str, ffn_dtype: str, embedding_dtype: str = "bf16") -> float:
        """Weights on one GPU: attention matrices in `dtype`, FFN in `ffn_dtype`, embeddings sharded."""
        m, hd = self.model, self.head_dim
        attention = m.hidden * (self.q_heads + 2 * self.kv_heads) * hd + self.q_heads * hd * m.hidden
        ffn = m.ffn_matrices * m.hidden * self.ffn
        norms = 2 * m.hidden
        per_layer = attention * DTYPE_BYTES[dtype] + ffn * DTYPE_BYTES[ffn_dtype] + norms * 2
        return m.layers * per_layer + m.embedding_params / self.tp * DTYPE_BYTES[embedding_dtype]

    def kv_bytes_per_token(self, kv_dtype: str) -> float:
        """KV-cache bytes one cached token costs on one GPU (all layers, K and V)."""
        return self.model.layers * 2 * self.kv_heads * self.head_dim * DTYPE_BYTES[kv_dtype]


@dataclass(frozen=True)
class Gemm:
    """A GEMM [m, k] @ [k, n] in `dtype`."""

    name: str
    m: int
    n: int
    k: int
    dtype: str

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k


def layer_gemms(shard: TensorShard, tokens: int, dtype: str, ffn_dtype: str) -> list[Gemm]:
    """Forward GEMMs of one layer on one GPU for `tokens` rows, in execution order."""
    m, hd, d = shard.model, shard.head_dim, shard.model.hidden
    up_width = shard.ffn * (2 if m.mlp == "swiglu" else 1)  # gate and up fused
    return [
        Gemm("qkv_proj", tokens, (shard.q_heads + 2 * shard.kv_heads) * hd, d, dtype),
        Gemm("out_proj", tokens, d, shard.q_heads * hd, dtype),
        Gemm("ffn_up", tokens, up_width, d, ffn_dtype),
        Gemm("ffn_down", tokens, d, shard.ffn, ffn_dtype),
    ]


def lm_head_gemm(shard: TensorShard, tokens: int, dtype: str = "bf16") -> Gemm:
    """Logits of the last `tokens` positions (vocabulary sharded over tp)."""
    return Gemm("lm_head", tokens, shard.model.vocab // shard.tp, shard.model.hidden, dtype)


def layer_elementwise_bytes(shard: TensorShard, tokens: int, act_bytes: float) -> dict[str, float]:
    """Bytes moved by the memory-bound kernels of one layer on one GPU.

    norm_*: fused residual add + RMSNorm (read x and residual, write both); rope: read and write
    Q and K; ffn_act: SwiGLU reads gate and up and writes their product (squared ReLU reads and
    writes one tensor).
    """
    d = shard.model.hidden
    rope = 2 * tokens * (shard.q_heads + shard.kv_heads) * shard.head_dim * act_bytes
    if shard.model.mlp == "swiglu":
        act = 3 * tokens * shard.ffn * act_bytes
    else:
        act = 2 * tokens * shard.ffn * act_bytes
    return {
        "norm_attn": 4 * tokens * d * act_bytes,
        "rope": rope,
        "ffn_act": act,
        "norm_ffn": 4 * tokens * d * act_bytes,
    }


def activation_bytes(shard: TensorShard, tokens: int, act_bytes: float) -> float:
    """Peak live activations of one layer's forward on one GPU (inference: no saved activations).

    The larger of the attention phase (residual, QKV, fp32 output accumulator) and the FFN phase
    (residual, normed input, up/gate output, activation output, all-reduce buffer).
    """
    d, hd = shard.model.hidden, shard.head_dim
    attention = tokens * (
        d * act_bytes + (shard.q_heads + 2 * shard.kv_heads) * hd * act_bytes + shard.q_heads * (hd + 1) * 4
    )
    up_width = shard.ffn * (2 if shard.model.mlp == "swiglu" else 1)
    ffn = tokens * act_bytes * (3 * d + up_width + shard.ffn)
    return max(attention, ffn)
