"""Video diffusion transformers (DiT) for training: a second model family beside the LLMs.

A video clip of `frames` x `height` x `width` pixels is compressed by a (temporal) autoencoder by
`compression` = [t, h, w] and cut into `patch` = [t, h, w] patches of the latent: the transformer
sees spatio-temporal tokens = (frames / ct / pt) x (height / ch / ph) x (width / cw / pw) per clip,
with full bidirectional self-attention over all of them (no causal mask), cross-attention to
`text_tokens` text-encoder tokens, and an FFN. Training is the denoising objective (an MSE on the
latent patches), so the "vocabulary" ends of the stack are a patch embedding and a final linear
layer back to latent patches.

NeMo / Megatron-style parallelism applies unchanged: TP shards heads and the FFN (sequence parallel
norms), CP shards the spatio-temporal tokens and all-gathers K/V (every query needs every key, so
the CP work is balanced without the causal chunk trick), PP splits the layers, and sharded DP the
weights.

`DiTSpec` is the architecture, `DiTFamily` its training shapes (the same op vocabulary as the LLMs,
sim/models/training_shapes.py). Presets: `PRESETS` (`moviegen-30b`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from pydantic import Field, model_validator

from hardware_models.strict import StrictModel
from sim.models.training_shapes import (
    AttentionOp,
    CommOp,
    ElementwiseOp,
    ModelFamily,
    Op,
    Recompute,
    Shape,
)
from sim.models.transformer import Gemm, tp_problem


class DiTSpec(StrictModel):
    """A video diffusion transformer (pre-norm blocks: self-attention, cross-attention, FFN)."""

    family: Literal["dit"] = "dit"
    name: str = "custom-dit"
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1, description="model dimension D")
    ffn: int = Field(ge=1, description="FFN inner dimension")
    heads: int = Field(ge=1)
    kv_heads: int | None = Field(None, ge=1, description="default: heads (multi-head attention)")
    mlp: Literal["swiglu", "gelu"] = "swiglu"
    cross_attention: bool = True
    text_tokens: int = Field(256, ge=0, description="text-encoder tokens per clip (cross-attention keys)")
    text_dim: int | None = Field(None, ge=1, description="text feature width (default: hidden)")
    adaln_params_per_layer: int = Field(
        0, ge=0, description="per-layer adaptive-norm modulation weights (adaLN-Zero: 6 D^2; 0 when shared)"
    )
    latent_channels: int = Field(16, ge=1)
    compression: tuple[int, int, int] = (8, 8, 8)
    patch: tuple[int, int, int] = (1, 2, 2)
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> DiTSpec:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must divide into heads ({self.heads})")
        if self.heads % (self.kv_heads or self.heads):
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ctx_dim(self) -> int:
        return self.text_dim or self.hidden

    @property
    def patch_dim(self) -> int:
        """Latent values per token (channels x patch volume)."""
        return self.latent_channels * math.prod(self.patch)

    def tokens(self, frames: int, height: int, width: int) -> int:
        """Spatio-temporal tokens of one clip (ValueError if the clip does not tile)."""
        dims = []
        for size, c, p, what in zip(
            (frames, height, width), self.compression, self.patch, ("frames", "height", "width")
        ):
            if size % (c * p):
                raise ValueError(f"video {what} {size} must be a multiple of compression x patch = {c * p}")
            dims.append(size // (c * p))
        return math.prod(dims)

    # ---- parameters ------------------------------------------------------------------------
    @property
    def self_attention_params(self) -> int:
        return self.hidden * (self.heads + 2 * self.n_kv_heads) * self.head_dim + self.hidden * self.hidden

    @property
    def cross_q_out_params(self) -> int:
        return 2 * self.hidden * self.hidden if self.cross_attention else 0

    @property
    def cross_kv_params(self) -> int:
        return 2 * self.ctx_dim * self.n_kv_heads * self.head_dim if self.cross_attention else 0

    @property
    def ffn_params(self) -> int:
        return (3 if self.mlp == "swiglu" else 2) * self.hidden * self.ffn

    @property
    def layer_params(self) -> int:
        norms = (3 if self.cross_attention else 2) * self.hidden
        return (
            self.self_attention_params
            + self.cross_q_out_params
            + self.cross_kv_params
            + self.ffn_params
            + self.adaln_params_per_layer
            + norms
        )

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + 2 * self.patch_dim * self.hidden + self.hidden


_MOVIEGEN = (
    "arXiv 2410.13720 (Movie Gen) §3.1: 30B transformer, 48 layers, D 6144, FFN 16384, 48 heads, "
    "SwiGLU, RMSNorm, cross-attention to text; TAE compresses 8x in T, H, W; 1x2x2 patches; a 768 px "
    "16 s clip at 16 fps is ~73K tokens (256 frames -> 32 x 48 x 48 = 73,728)"
)
PRESETS: Mapping[str, DiTSpec] = MappingProxyType(
    {
        # kv_heads = heads (assumption: MHA; not stated); text_tokens 256 (assumption: prompt length after the
        # paper's three text encoders); latent_channels 16 (arXiv 2410.13720 §3.1.1: TAE latent channels C = 16);
        # adaLN modulation shared across layers (assumption: the paper's 30B total leaves no room for 6 D^2 per layer).
        "moviegen-30b": DiTSpec(
            name="moviegen-30b",
            layers=48,
            hidden=6144,
            ffn=16384,
            heads=48,
            mlp="swiglu",
            text_tokens=256,
            latent_channels=16,
            compression=(8, 8, 8),
            patch=(1, 2, 2),
            source=_MOVIEGEN,
        ),
    }
)


@dataclass(frozen=True)
class DiTFamily(ModelFamily):
    """Training shapes of a DiTSpec (interface as training_shapes.LLMFamily)."""

    spec: DiTSpec
    family: str = "dit"
    causal: bool = False

    def tp_problem(self, tp: int) -> str | None:
        return tp_problem(self.spec, tp, kv_heads=self.spec.n_kv_heads)

    def cp_problem(self, cp: int, sequence: int) -> str | None:
        if sequence % cp:
            return f"the clip's {sequence} tokens must divide over cp = {cp}"
        return None

    @property
    def layer_params(self) -> int:
        return self.spec.layer_params

    @property
    def first_params(self) -> int:
        return self.spec.patch_dim * self.spec.hidden

    @property
    def last_params(self) -> int:
        return self.spec.patch_dim * self.spec.hidden + self.spec.hidden

    @property
    def params(self) -> int:
        return self.spec.params

    def model_flop_per_sequence(self, sequence: int) -> float:
        """6 x params x tokens (video-token matrices on the clip's tokens, the cross-attention K/V
        projections on the text tokens) + attention x3 (full self-attention, cross-attention)."""
        m = self.spec
        video_params = (
            m.layers * (m.self_attention_params + m.cross_q_out_params + m.ffn_params + m.adaln_params_per_layer)
            + 2 * m.patch_dim * m.hidden
        )
        dense = 6.0 * video_params * sequence + 6.0 * m.layers * m.cross_kv_params * m.text_tokens
        attn = (
            4.0 * m.layers * m.heads * m.head_dim * sequence * (sequence + (m.text_tokens if m.cross_attention else 0))
        )
        return dense + 3.0 * attn

    # ---- forward ops -----------------------------------------------------------------------
    def _heads(self, tp: int) -> tuple[int, int]:
        return self.spec.heads // tp, max(1, self.spec.n_kv_heads // tp)

    def layer_forward(self, s: Shape) -> list[Op]:
        m, t, e = self.spec, s.tp, s.act_bytes
        qh, kvh = self._heads(t)
        hd, n, sp = m.head_dim, s.tokens, s.sp_divisor
        norm = 4 * n * m.hidden * e / sp  # fused residual + norm + modulation
        up = (2 if m.mlp == "swiglu" else 1) * m.ffn // t
        ops: list[Op] = [
            ElementwiseOp("norm_self", norm),
            *s.tp_comm("tp all_gather qkv_in", True),
            Gemm("qkv_proj", n, (qh + 2 * kvh) * hd, m.hidden, s.gemm_dtype),
            ElementwiseOp("rope_3d", 2 * n * (qh + kvh) * hd * e),
        ]
        if s.cp > 1:
            ops.append(CommOp("cp all_gather kv", "cp", "all_gather", 2 * s.batch * s.sequence * kvh * hd * e))
        ops += [
            AttentionOp(
                "self_attention",
                s.sequence // s.cp,
                s.sequence,
                qh,
                kvh,
                hd,
                s.sequence / s.cp * s.sequence,
                s.batch,
                s.dtype,
            ),
            Gemm("out_proj", n, m.hidden, qh * hd, s.gemm_dtype),
            *s.tp_comm("tp reduce_scatter attn_out", False),
        ]
        if m.cross_attention:
            text = s.batch * m.text_tokens
            ops += [
                ElementwiseOp("norm_cross", norm),
                *s.tp_comm("tp all_gather cross_in", True),
                Gemm("cross_q", n, qh * hd, m.hidden, s.gemm_dtype),
                Gemm("cross_kv", text, 2 * kvh * hd, m.ctx_dim, s.gemm_dtype),
                AttentionOp(
                    "cross_attention",
                    s.sequence // s.cp,
                    m.text_tokens,
                    qh,
                    kvh,
                    hd,
                    s.sequence / s.cp * m.text_tokens,
                    s.batch,
                    s.dtype,
                ),
                Gemm("cross_out", n, m.hidden, qh * hd, s.gemm_dtype),
                *s.tp_comm("tp reduce_scatter cross_out", False),
            ]
        ops += [
            ElementwiseOp("norm_ffn", norm),
            *s.tp_comm("tp all_gather ffn_in", True),
            Gemm("ffn_up", n, up, m.hidden, s.gemm_dtype),
            ElementwiseOp("ffn_act", (3 if m.mlp == "swiglu" else 2) * n * (m.ffn // t) * e),
            Gemm("ffn_down", n, m.hidden, m.ffn // t, s.gemm_dtype),
            *s.tp_comm("tp reduce_scatter ffn_out", False),
        ]
        return ops

    def first_forward(self, s: Shape) -> list[Op]:
        """Patch embedding (replicated over tp: each rank keeps its sequence-parallel slice)."""
        return [Gemm("patch_embed", s.tokens, self.spec.hidden, self.spec.patch_dim, s.gemm_dtype)]

    def last_forward(self, s: Shape) -> list[Op]:
        """Final norm, linear back to latent patches, MSE loss (fp32, three passes)."""
        m = self.spec
        return [
            ElementwiseOp("final_norm", 4 * s.tokens * m.hidden * s.act_bytes / s.sp_divisor),
            *s.tp_comm("tp all_gather final_in", True),
            Gemm("final_linear", s.tokens, m.patch_dim, m.hidden, s.gemm_dtype),
            ElementwiseOp("mse_loss", 3 * s.tokens * m.patch_dim * 4, recompute_selective=False),
        ]

    # ---- memory -------------------------------------------------------------------------------
    def saved_bytes_per_token(self, s: Shape, recompute: Recompute) -> float:
        m, e, sp = self.spec, s.act_bytes, s.sp_divisor
        qh, kvh = self._heads(s.tp)
        hd = m.head_dim
        blocks = 3 if m.cross_attention else 2
        residual = m.hidden * e / sp
        if recompute == "full":
            return residual
        up = (2 if m.mlp == "swiglu" else 1) * m.ffn // s.tp
        kept = (
            blocks * residual  # block inputs
            + (qh + 2 * kvh) * hd * e
            + qh * hd * e
            + qh * 4  # self-attention Q, K, V, output, LSE
            + up * e
        )  # FFN up (+gate) output
        if m.cross_attention:
            kept += 2 * qh * hd * e + qh * 4  # cross-attention Q, output, LSE
        recomputable = blocks * residual + (m.ffn // s.tp) * e  # norm outputs, activation output
        return kept + (recomputable if recompute == "none" else 0.0)

    def working_bytes(self, s: Shape) -> float:
        m, e = self.spec, s.act_bytes
        _, kvh = self._heads(s.tp)
        up = (2 if m.mlp == "swiglu" else 1) * m.ffn // s.tp
        widest = s.tokens * max(up, m.hidden) * e * 2
        kv = 2 * s.batch * s.sequence * kvh * m.head_dim * e * 2 if s.cp > 1 else 0.0
        return widest + kv

    def last_working_bytes(self, s: Shape) -> float:
        return 2 * s.tokens * self.spec.patch_dim * 4
