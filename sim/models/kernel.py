"""A timed kernel: one GPU kernel with its duration from the hardware model and its work.

Model families turn their ops into kernels (training: sim/models/training_shapes.py `timed`; context-
parallel inference: sim/workloads/cp_inference/plan.py); the workloads run them back to back on a
device's compute stream. `flop` are *model* FLOPs (what MFU counts; 0 for recomputed work), while
`executed_flop` are the FLOPs the GPU actually executes (e.g. FlashAttention's backward recomputes
the scores); a user that does not tell them apart leaves `executed_flop` at 0. `nbytes` are the
bytes a memory-bound kernel streams. `category` sorts kernels for breakdowns and replay
(`dense` GEMMs, fused `attention`, memory-bound `elementwise` ops, CP inference's online-softmax `merge`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kernel:
    """A timed kernel on one GPU (see module docstring)."""

    name: str
    duration_s: float
    flop: float = 0.0
    nbytes: float = 0.0
    category: str = "dense"  # dense | attention | elementwise | merge
    executed_flop: float = 0.0
