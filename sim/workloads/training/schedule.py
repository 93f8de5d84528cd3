"""Pipeline-parallel schedules: which forward/backward pass each stage runs, in which order.

The model's layers are split into `p x v` *virtual stages* (chunks): stage s holds chunks
s, s + p, s + 2p ... (v chunks per GPU with interleaving, one without). Virtual stage j feeds j + 1;
the last one computes the loss. `split_layers` balances the layers and, when they do not divide,
takes the missing layers from the first and last virtual stages (which also hold the embedding and
the LM head), as Llama 3 did for 126 layers on 16 stages (arXiv 2407.21783 §3.3.2). With one layer
per chunk this leaves the first chunk only the embedding and the last only the LM head and loss, as
that section describes; no other chunk may be empty.

Schedules (the order of ops on each stage; the simulation adds the waits):
- `1f1b` (PipeDream-Flush / Megatron): stage s runs p - s - 1 warm-up forwards, then alternates one
  forward and one backward, then drains the remaining backwards. With uniform stages and free
  communication the idle share of every stage is (p - 1) / (m + p - 1).
- `interleaved_1f1b` (Megatron-LM `forward_backward_pipelining_with_interleaving`): micro-batches
  go through the v chunks in groups of p; warm-up (p - s - 1) x 2 + (v - 1) x p forwards (all of
  them when m = p, as Megatron does), then 1F1B, then the drain. Needs m to be a multiple of p.
  The bubble shrinks by about v at the cost of more in-flight activations and p2p traffic.

`in_flight_peak` walks a stage's op list and returns the largest number of layer-activations it
holds at once (forwards done whose backward has not run), which sets the activation memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Schedule = Literal["1f1b", "interleaved_1f1b"]


@dataclass(frozen=True)
class PipeOp:
    kind: Literal["F", "B"]
    microbatch: int
    chunk: int  # model chunk on this stage (0 .. v-1); virtual stage = chunk * p + stage

    def virtual_stage(self, stage: int, p: int) -> int:
        return self.chunk * p + stage


def split_layers(layers: int, virtual_stages: int) -> list[int]:
    """Layers per virtual stage: balanced, the shortfall taken from the ends first. The first and
    last virtual stages may end up empty (they still hold the embedding / the LM head); ValueError
    if any other would."""
    base = -(-layers // virtual_stages)
    counts = [base] * virtual_stages
    deficit = base * virtual_stages - layers
    ends = [i // 2 if i % 2 == 0 else virtual_stages - 1 - i // 2 for i in range(virtual_stages)]
    for i in range(deficit):
        counts[ends[i % virtual_stages]] -= 1
    if min(counts[1:-1], default=1) < 1 or min(counts) < 0:
        raise ValueError(
            f"{layers} layers cannot fill {virtual_stages} (virtual) pipeline stages: only the first and the "
            f"last may hold no layer (at least {max(virtual_stages - 2, 1)} layers)"
        )
    return counts


def stage_ops(schedule: Schedule, p: int, m: int, v: int, stage: int) -> list[PipeOp]:
    """The ops stage `stage` of `p` runs for `m` micro-batches (v chunks per stage)."""
    if schedule == "1f1b":
        fwd = [PipeOp("F", i, 0) for i in range(m)]
        bwd = [PipeOp("B", i, 0) for i in range(m)]
        warmup = min(p - stage - 1, m)
    else:
        total = m * v
        group = p * v

        def mb(k: int) -> int:
            return (k // group) * p + k % p

        fwd = [PipeOp("F", mb(k), (k // p) % v) for k in range(total)]
        bwd = [PipeOp("B", mb(k), v - 1 - (k // p) % v) for k in range(total)]
        warmup = total if m == p else min((p - stage - 1) * 2 + (v - 1) * p, total)
    ops = fwd[:warmup]
    for i in range(len(fwd) - warmup):
        ops += [fwd[warmup + i], bwd[i]]
    return ops + bwd[len(fwd) - warmup :]


def in_flight_peak(ops: list[PipeOp], layers_per_chunk: list[int]) -> int:
    """Most layer-activations (layers x micro-batches) held at once by a stage running `ops`."""
    held, peak = 0, 0
    for op in ops:
        held += layers_per_chunk[op.chunk] if op.kind == "F" else -layers_per_chunk[op.chunk]
        peak = max(peak, held)
    return peak


def chunk_order(ops: list[PipeOp]) -> list[int]:
    """Chunks in order of their first forward (the order sharded-DP all-gathers are issued)."""
    seen: list[int] = []
    for op in ops:
        if op.kind == "F" and op.chunk not in seen:
            seen.append(op.chunk)
    return seen


def last_backward(ops: list[PipeOp]) -> dict[int, int]:
    """Index in `ops` of each chunk's last backward (its gradients are complete after it)."""
    return {op.chunk: i for i, op in enumerate(ops) if op.kind == "B"}
