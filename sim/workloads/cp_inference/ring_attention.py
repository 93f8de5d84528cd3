"""Ring attention for context-parallel inference (arXiv 2411.01783): sharding, work per ring step,
message sizes and the pass-KV / pass-Q choice. Pure arithmetic; cp_layers.py turns it into kernels
and flows.

Sharding (load-balanced, 2N chunks). The T new tokens of a prefill are padded to a multiple of 2N and
cut into 2N equal chunks; CP rank i holds chunks i and 2N-1-i, so with a causal mask every rank does
the same attention work. Cached tokens of a persistent KV cache (P) and decode-time KV (round-robin
placement) are spread evenly: each rank holds ceil(P / N) of them. Every rank therefore carries the
same work and the same messages (what lets cp_layers simulate one representative rank group).

Ring steps. With pass-KV, at step s rank i holds the KV of rank i-s and computes attention of its
own queries against it while forwarding that KV to rank i+1 (N-1 sends). With pass-Q the queries of
rank i-s visit rank i, which computes them against its local KV; at the end an All2All returns the
partial outputs to their owners. Partial outputs merge exactly through their log-sum-exp. The work
of a step is counted chunk pair by chunk pair: a query chunk sees a key chunk fully if the key chunk
is earlier, half (causally, the diagonal) if it is the same chunk, not at all if it is later; cached
tokens precede every new token, so every query sees all of them.

Messages per GPU (TP shard: NH/tp query heads, NKV/tp KV heads): KV message 2 (T/N + P/N) hd e NKV/tp,
Q message (T/N) hd e NH/tp, partial output (T/N) NH/tp (hd e + 4) per peer (output + fp32 LSE). Summed
over the TP group these are the paper's 2(T+P) D e NKV/NH and T D e (per ring hop, over N ranks).

Choice (`ring: auto`): the paper's Algorithm 1 picks pass-KV when the KV transfer hides under the
attention of a step, T >= N C NKV e / (2 NH BW), or when the miss rate T/(T+P) >= 2 NKV/NH (then the KV
message is the smaller one); otherwise pass-Q. Its Algorithm 5 also charges pass-Q's final All2All:
here pass-Q is kept only when its exposed communication (unhidden ring sends + All2All) is below
pass-KV's exposed ring sends. C (achieved attention FLOP/s) and BW (achieved ring bandwidth) come
from the hardware model and the network at the actual shapes, not from constants.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


def padded_tokens(new_tokens: int, cp: int) -> int:
    """New tokens padded to a multiple of 2N (load-balanced chunks); unchanged when cp = 1."""
    if cp == 1:
        return new_tokens
    return math.ceil(new_tokens / (2 * cp)) * 2 * cp


def local_cached(cached_tokens: int, cp: int) -> int:
    """Cached (or decode-time) KV tokens held per CP rank: an even spread, rounded up."""
    return math.ceil(cached_tokens / cp)


def rank_chunks(rank: int, cp: int) -> tuple[int, int]:
    """The two chunk indices CP rank `rank` holds (load-balanced sharding)."""
    return rank, 2 * cp - 1 - rank


def _pair_keys(q_chunk: int, k_chunk: int, chunk: int) -> float:
    if k_chunk < q_chunk:
        return float(chunk * chunk)
    if k_chunk == q_chunk:
        return chunk * (chunk + 1) / 2
    return 0.0


def new_keys_seen(q_rank: int, kv_rank: int, new_tokens: int, cp: int) -> float:
    """(query, key) pairs between the new tokens of `q_rank` and the new tokens of `kv_rank`.

    `new_tokens` must be padded (a multiple of 2N when cp > 1).
    """
    if cp == 1:
        return new_tokens * (new_tokens + 1) / 2
    chunk = new_tokens // (2 * cp)
    return sum(_pair_keys(q, k, chunk) for q in rank_chunks(q_rank, cp) for k in rank_chunks(kv_rank, cp))


def step_keys_seen(rank: int, step: int, ring: str, new_tokens: int, cached_local: int, cp: int) -> float:
    """(query, key) pairs CP rank `rank` computes at ring step `step`: pass-KV pairs its own queries
    with the KV of rank - step, pass-Q the queries of rank - step with its own KV. New-token blocks
    plus every query against that KV's cached tokens. Equal on every rank (load balance)."""
    other = (rank - step) % cp
    q_rank, kv_rank = (rank, other) if ring == "pass-kv" else (other, rank)
    return new_keys_seen(q_rank, kv_rank, new_tokens, cp) + (new_tokens // cp) * cached_local


@dataclass(frozen=True)
class RingMessages:
    """Per-GPU message sizes of one layer (bytes)."""

    kv: float  # pass-KV ring send
    q: float  # pass-Q ring send
    partial_output: float  # pass-Q All2All, per peer


def ring_messages(
    tokens_local: int, kv_tokens_local: int, q_heads: int, kv_heads: int, head_dim: int, elem_bytes: float
) -> RingMessages:
    """`tokens_local` queries and `kv_tokens_local` KV tokens on each rank."""
    return RingMessages(
        kv=2.0 * kv_tokens_local * kv_heads * head_dim * elem_bytes,
        q=float(tokens_local * q_heads * head_dim * elem_bytes),
        partial_output=float(tokens_local * q_heads * (head_dim * elem_bytes + 4)),
    )


@dataclass(frozen=True)
class RingChoice:
    """The inputs and outcome of the pass-KV / pass-Q decision (reported in the metrics)."""

    ring: str
    reason: str
    miss_rate: float
    miss_rate_threshold: float  # 2 NKV / NH
    hide_threshold_tokens: float  # N C NKV e / (2 NH BW)
    achieved_attention_flop_per_s: float  # C, per GPU
    ring_bandwidth_bytes_per_s: float  # BW, per GPU
    exposed_pass_kv_s: float  # per layer
    exposed_pass_q_s: float  # per layer, All2All included

    def as_dict(self) -> dict:
        return asdict(self)


def choose_ring(
    new_tokens: int,
    cached_tokens: int,
    cp: int,
    heads: int,
    kv_heads: int,
    elem_bytes: float,
    attention_step_s: float,
    attention_step_flop: float,
    kv_send_s: float,
    q_send_s: float,
    all2all_s: float,
    kv_message_bytes: float,
    send_latency_s: float = 0.0,
) -> RingChoice:
    """Algorithm 1 of arXiv 2411.01783 with Algorithm 5's All2All term (see module docstring).

    Times are uncontended estimates for one layer's step on one GPU, from the hardware model;
    `kv_send_s` and `q_send_s` are the bytes' time (BW is achieved bandwidth), `send_latency_s` the
    per-send software latency (NCCL's, sim/network/operation_cost.py) added to both in the exposed terms;
    `all2all_s` includes its own.
    """
    achieved_c = attention_step_flop / attention_step_s if attention_step_s > 0 else math.inf
    bandwidth = kv_message_bytes / kv_send_s if kv_send_s > 0 else math.inf
    kv_send_s, q_send_s = kv_send_s + send_latency_s, q_send_s + send_latency_s
    hide_threshold = cp * achieved_c * kv_heads * elem_bytes / (2 * heads * bandwidth)
    miss_rate = new_tokens / (new_tokens + cached_tokens)
    miss_threshold = 2 * kv_heads / heads
    exposed_kv = (cp - 1) * max(0.0, kv_send_s - attention_step_s)
    exposed_q = (cp - 1) * max(0.0, q_send_s - attention_step_s) + all2all_s
    if new_tokens >= hide_threshold:
        ring, reason = "pass-kv", "KV transfer hides under attention (T >= N C NKV e / (2 NH BW))"
    elif miss_rate >= miss_threshold:
        ring, reason = "pass-kv", "miss rate T/(T+P) >= 2 NKV/NH: the KV message is the smaller one"
    elif exposed_q < exposed_kv:
        ring, reason = "pass-q", "low miss rate; pass-Q exposes less communication, All2All included"
    else:
        ring, reason = "pass-kv", "low miss rate, but pass-Q's All2All costs more than pass-KV's exposed sends"
    return RingChoice(
        ring, reason, miss_rate, miss_threshold, hide_threshold, achieved_c, bandwidth, exposed_kv, exposed_q
    )


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None
