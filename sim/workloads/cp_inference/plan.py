"""What one GPU does in one transformer layer of a context-parallel phase: kernels with durations
from the hardware model, and the bytes of its ring sends, All2All and TP all-reduces.

A *phase* is one pass through the layer stack: a prefill of T new tokens on top of P cached ones,
or one decode step (one new token, context P). Prefill shards the padded T over the N CP ranks
(T/N queries each, load-balanced chunks); decode replicates the token's dense work on every CP rank
(batch 1 cannot be split) and splits only the attention over the round-robin KV shards with a
pass-Q ring, as in arXiv 2411.01783.

Kernels per layer and GPU, in order (`LayerPlan`):
  pre_attention   fused residual+RMSNorm, QKV GEMM, RoPE
  ring_steps[s]   attention of step s (pass-KV: followed by an online LSE merge from step 1 on)
  post_exchange   pass-Q: one merge of the N partial outputs after the All2All
  out_proj        output projection GEMM, then a TP all-reduce of T/N x D activations
  ffn             RMSNorm, FFN up(+gate) GEMM, activation, FFN down GEMM, then a TP all-reduce
  final           once per phase: final norm and the LM head of the last token
GEMMs take `dtype` (FFN: `ffn_dtype`), attention `attention_dtype` (also the KV cache and ring
message dtype), activations and all-reduces 16-bit unless `dtype` is wider.

The attention kernel is the hardware model's (`DeviceSpec.attention_cost`) with grouped query heads
packed into the rows (q_len x NH/NKV rows per KV head, as FlashAttention-3 and Flash-Decoding do):
max(FLOPs at an efficiency set by the query rows, the tiles and the SMs the thread blocks occupy,
with split-KV over the KV length; the K/V and Q/O bytes at the bandwidth the blocks draw) plus the
launch and, when split, the combine kernel (hardware_models/attention.py). A short query block
against a long cache (partial prefill) makes few blocks and is split; a decode step reads its
cache at HBM bandwidth. `LayerPlan.attention_cost` keeps the steady ring step's decomposition.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware_models.attention import AttentionCost
from hardware_models.gpu import DTYPE_BYTES, DeviceSpec
from sim.models.kernel import Kernel
from sim.models.transformer import (
    TensorShard,
    TransformerSpec,
    layer_elementwise_bytes,
    layer_gemms,
    lm_head_gemm,
)
from sim.workloads.cp_inference.ring_attention import (
    RingMessages,
    local_cached,
    padded_tokens,
    ring_messages,
    step_keys_seen,
)


@dataclass(frozen=True)
class Precision:
    dtype: str = "bf16"
    ffn_dtype: str = "bf16"
    attention_dtype: str = "bf16"

    @property
    def activation_dtype(self) -> str:
        return self.dtype if DTYPE_BYTES[self.dtype] >= 2 else "bf16"


@dataclass(frozen=True)
class Phase:
    kind: str  # "prefill" | "decode"
    new_tokens: int  # T (1 for decode)
    cached_tokens: int  # P: tokens already in the KV cache before this phase


@dataclass(frozen=True)
class LayerPlan:
    layers: int
    cp: int
    tp: int
    ring: str  # pass-kv | pass-q | none
    tokens_local: int  # query rows per GPU
    pre_attention: tuple[Kernel, ...]
    ring_steps: tuple[tuple[Kernel, ...], ...]
    post_exchange: tuple[Kernel, ...]
    out_proj: tuple[Kernel, ...]
    ffn: tuple[Kernel, ...]
    final: tuple[Kernel, ...]
    ring_send_bytes: float  # one ring send (0 when cp = 1)
    exchange_bytes: float  # pass-Q All2All, per peer
    allreduce_bytes: float  # per TP all-reduce (0 when tp = 1)
    messages: RingMessages
    kv_tokens_step: int = 0  # KV tokens one ring step's attention reads
    kv_heads_local: int = 0
    head_dim: int = 0
    kv_elem_bytes: float = 2.0
    attention_costs: tuple[AttentionCost, ...] = ()  # per ring step

    @property
    def attention_cost(self) -> AttentionCost:
        """The steady-state ring step's attention kernel decomposition (as `attention_step`)."""
        return self.attention_costs[min(1, len(self.attention_costs) - 1)]

    @property
    def attention_step(self) -> Kernel:
        """A steady-state ring step's attention kernel (step 1, or step 0 without a ring)."""
        return self.ring_steps[min(1, len(self.ring_steps) - 1)][0]


def _gemm(device: DeviceSpec, name: str, m: int, n: int, k: int, dtype: str) -> Kernel:
    return Kernel(name, device.gemm_time_s(m, n, k, dtype), flop=2.0 * m * n * k)


def _memory(device: DeviceSpec, name: str, nbytes: float, category: str = "dense") -> Kernel:
    return Kernel(name, device.memory_time_s(nbytes), nbytes=nbytes, category=category)


def plan_layer(
    model: TransformerSpec, device: DeviceSpec, tp: int, cp: int, phase: Phase, ring: str, precision: Precision
) -> LayerPlan:
    """The per-layer plan of `phase` on one GPU (identical on every GPU by construction)."""
    shard = TensorShard(model, tp)
    hd, qh, kvh = shard.head_dim, shard.q_heads, shard.kv_heads
    act_b = DTYPE_BYTES[precision.activation_dtype]
    attn_dtype = precision.attention_dtype
    ring = "none" if cp == 1 else ("pass-q" if phase.kind == "decode" else ring)
    if phase.kind == "prefill":
        new = padded_tokens(phase.new_tokens, cp)
        m = new // cp
        kv_local = local_cached(phase.cached_tokens, cp)
        kv_tokens_step = m + kv_local  # the KV block one step reads
    else:
        new, m = 1, 1
        kv_local = local_cached(phase.cached_tokens + 1, cp)
        kv_tokens_step = kv_local
    gemms = {
        g.name: _gemm(device, g.name, g.m, g.n, g.k, g.dtype)
        for g in layer_gemms(shard, m, precision.dtype, precision.ffn_dtype)
    }
    elementwise = {name: _memory(device, name, b) for name, b in layer_elementwise_bytes(shard, m, act_b).items()}
    steps, costs = [], []
    merge_bytes = 3.0 * m * qh * (hd + 1) * 4  # fp32 output + LSE: read two, write one
    for s in range(cp):
        if phase.kind == "prefill":
            keys = step_keys_seen(0, s, "pass-q" if ring == "pass-q" else "pass-kv", new, kv_local, cp)
        else:
            keys = float(kv_local)
        flop = 4.0 * hd * qh * keys
        cost = device.attention_cost(
            m * (qh // kvh), kv_tokens_step, kvh, hd, kv_heads=kvh, dtype=attn_dtype, flop=flop
        )
        costs.append(cost)
        kernels = [Kernel(f"attention step {s}", cost.time_s, flop=flop, category="attention")]
        if ring == "pass-kv" and s > 0:
            kernels.append(_memory(device, f"merge step {s}", merge_bytes, "merge"))
        steps.append(tuple(kernels))
    messages = ring_messages(m, kv_tokens_step, qh, kvh, hd, DTYPE_BYTES[attn_dtype])
    post = ()
    if ring == "pass-q":
        post = (_memory(device, "merge partial outputs", m * qh * (hd + 1) * 4 * (cp + 1), "merge"),)
    final = (
        _memory(device, "final_norm", 2 * model.hidden * act_b),
        _gemm(device, "lm_head", *_shape(lm_head_gemm(shard, 1, precision.activation_dtype))),
    )
    return LayerPlan(
        layers=model.layers,
        cp=cp,
        tp=tp,
        ring=ring,
        tokens_local=m,
        pre_attention=(elementwise["norm_attn"], gemms["qkv_proj"], elementwise["rope"]),
        ring_steps=tuple(steps),
        post_exchange=post,
        out_proj=(gemms["out_proj"],),
        ffn=(elementwise["norm_ffn"], gemms["ffn_up"], elementwise["ffn_act"], gemms["ffn_down"]),
        final=final,
        ring_send_bytes=0.0 if cp == 1 else (messages.kv if ring == "pass-kv" else messages.q),
        exchange_bytes=messages.partial_output if ring == "pass-q" else 0.0,
        allreduce_bytes=m * model.hidden * act_b if tp > 1 else 0.0,
        messages=messages,
        kv_tokens_step=kv_tokens_step,
        kv_heads_local=kvh,
        head_dim=hd,
        kv_elem_bytes=DTYPE_BYTES[attn_dtype],
        attention_costs=tuple(costs),
    )


def _shape(g) -> tuple[int, int, int, str]:
    return g.m, g.n, g.k, g.dtype
