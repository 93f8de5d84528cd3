"""How a fused attention kernel spreads over a GPU: thread blocks, split-KV, SMs at work.

FlashAttention-2/3 (arXiv 2307.08691, 2407.08608) run one thread block (CTA) per (batch, head,
block of `tile_q` query rows); each block walks the KV sequence `tile_kv` columns at a time, keeping
`stages` K/V tiles in flight. Callers that pack grouped query heads into the rows (q_len x NH/NKV
rows per KV head, as FlashAttention-3 and Flash-Decoding do) pass the KV heads as `heads`.

A short query block against a long KV cache makes few blocks: Llama 3 405B on TP8 (one KV head per
GPU) prefilling 328 new tokens per CP rank has 328 x 16 = 5,248 rows, 41 blocks of 128 rows on an
H100's 132 SMs. Split-KV (Flash-Decoding; flash-attn's `num_splits_heuristic`, docs/references.md
#attention-kernel-occupancy) cuts the KV length into `splits` parts, each its own block, and a combine kernel
merges the partial outputs through their log-sum-exp:

- blocks = batch x heads x ceil(q_len / tile_q) x splits; `row_fill` = q_len / (tile_q x
  ceil(q_len / tile_q)): the query rows a block computes that are real (a decode step's 16 packed
  rows fill an eighth of a 128-row tile; the tensor cores work on the whole tile). It multiplies the
  compute efficiency: on a device with this model it *is* the short-query inefficiency, so its
  catalog entry sets `efficiency.attention_half_seq: 0` (the generic curve off, not counted twice);
- splits = flash-attn's heuristic: 1 when the blocks without splitting fill >= 80% of the SMs, else
  the smallest eligible count (one that changes the KV blocks per split) whose wave efficiency
  n / ceil(n) (n = blocks / SMs) reaches 85% of the best over 1..min(max_splits, SMs, KV blocks);
- `sm_fill` = min(1, blocks / SMs): the fraction of the SMs' tensor cores at work, which also
  multiplies the compute efficiency. Assumption: one block per SM (FlashAttention-3's tiles for head dim 128 take most
  of an SM's shared memory) and no wave tail beyond the first wave (causal blocks of unequal work
  and FlashAttention-3's persistent tile scheduler even it out; at most 1/waves);
- `bandwidth_fill` = min(1, bytes in flight / (bandwidth x memory_latency)) (Little's law), with
  blocks x stages x 2 x tile_kv x head_dim x e bytes of K/V in flight: the fraction of HBM bandwidth
  the blocks can draw. A dozen blocks already saturate an H100, so it only matters without splits
  (one block per head: Flash-Decoding's case).

A device without `sms` (CPUs, uncalibrated profiles) has no occupancy model: fills are 1, no split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import Field

from hardware_models.spec import Spec
from hardware_models.units import Seconds

# flash-attn num_splits_heuristic (csrc/flash_attn/flash_api.cpp, v2.x; docs/references.md#attention-kernel-occupancy)
SPLIT_IF_BELOW_SM_FRACTION = 0.8  # no split when the unsplit blocks fill >= 80% of the SMs
SPLIT_EFFICIENCY_SLACK = 0.85  # smallest split count within 85% of the best wave efficiency


class AttentionKernel(Spec):
    """How the fused attention kernel spreads over the GPU: thread blocks of `tile_q` query rows, split-KV
    over the KV length, SMs at work (hardware_models/attention.py)."""

    sms: int | None = Field(None, ge=1, description="streaming multiprocessors; unset: no occupancy model")
    tile_q: int = Field(128, ge=1, description="query rows per thread block (FlashAttention's Br)")
    tile_kv: int = Field(128, ge=1, description="KV columns per iteration (FlashAttention's Bc)")
    stages: int = Field(2, ge=1, description="K/V tiles in flight per thread block (pipeline stages)")
    max_splits: int = Field(128, ge=1, description="most KV splits (split-KV / Flash-Decoding)")
    memory_latency: Seconds = Field(6e-7, gt=0, description="device memory latency under load, s (Little's law)")
    source: str = ""


@dataclass(frozen=True)
class Occupancy:
    """How one attention kernel fills the device."""

    blocks: int  # thread blocks, splits included
    splits: int  # KV splits (1: no split, no combine kernel)
    row_fill: float  # real query rows / rows the blocks compute (tile padding)
    sm_fill: float  # fraction of SMs computing (divides the compute term)
    bandwidth_fill: float  # fraction of memory bandwidth the blocks can draw (divides the memory term)


@dataclass(frozen=True)
class AttentionCost:
    """One attention kernel's roofline terms (s). `time_s` = max(compute, memory) + launch + combine."""

    flop: float
    nbytes: float  # Q/O and K/V bytes of the main kernel
    compute_s: float  # at the shape's efficiency and `sm_fill`
    memory_s: float  # nbytes at the streaming efficiency and `bandwidth_fill`
    launch_s: float
    combine_s: float  # split-KV combine kernel (its launch included); 0 without splits
    occupancy: Occupancy

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.launch_s + self.combine_s

    @property
    def bound(self) -> str:
        """'compute' or 'memory': which term sets the main kernel."""
        return "compute" if self.compute_s >= self.memory_s else "memory"

    def as_dict(self) -> dict[str, float | int | str]:
        o = self.occupancy
        return {
            "flop": self.flop,
            "time_s": self.time_s,
            "compute_s": self.compute_s,
            "kv_read_s": self.memory_s,
            "combine_s": self.combine_s,
            "bound": self.bound,
            "blocks": o.blocks,
            "splits": o.splits,
            "row_fill": o.row_fill,
            "sm_fill": o.sm_fill,
            "bandwidth_fill": o.bandwidth_fill,
        }


def kv_splits(unsplit_blocks: int, sms: int, kv_blocks: int, max_splits: int) -> int:
    """flash-attn's `num_splits_heuristic` (see module docstring)."""
    if unsplit_blocks >= SPLIT_IF_BELOW_SM_FRACTION * sms:
        return 1
    limit = min(max_splits, sms, kv_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or math.ceil(kv_blocks / s) != math.ceil(kv_blocks / (s - 1))

    def wave_efficiency(s: int) -> float:
        waves = unsplit_blocks * s / sms
        return waves / math.ceil(waves)

    candidates = [s for s in range(1, limit + 1) if eligible(s)]
    if not candidates:
        return 1
    best = max(wave_efficiency(s) for s in candidates)
    return next(s for s in candidates if wave_efficiency(s) >= SPLIT_EFFICIENCY_SLACK * best)


def occupancy(
    kernel: AttentionKernel,
    q_len: float,
    kv_len: float,
    heads: float,
    batch: float,
    head_dim: float,
    elem_bytes: float,
    bandwidth_bytes_per_s: float,
) -> Occupancy:
    """Blocks, splits and fills of one attention kernel (module docstring)."""
    if kernel.sms is None:
        return Occupancy(blocks=0, splits=1, row_fill=1.0, sm_fill=1.0, bandwidth_fill=1.0)
    q_blocks = max(1, math.ceil(q_len / kernel.tile_q))
    unsplit = max(1, math.ceil(batch * heads) * q_blocks)
    splits = kv_splits(unsplit, kernel.sms, max(1, math.ceil(kv_len / kernel.tile_kv)), kernel.max_splits)
    blocks = unsplit * splits
    in_flight = blocks * kernel.stages * 2 * kernel.tile_kv * head_dim * elem_bytes
    return Occupancy(
        blocks=blocks,
        splits=splits,
        row_fill=min(1.0, q_len / (q_blocks * kernel.tile_q)),
        sm_fill=min(1.0, blocks / kernel.sms),
        bandwidth_fill=min(1.0, in_flight / (bandwidth_bytes_per_s * kernel.memory_latency)),
    )
