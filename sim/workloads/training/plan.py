"""The static plan of a training job: layer split, each stage's op list, the timed kernels and
collectives of every segment (a layer, the embedding end, the loss end), bytes of p2p and DP traffic.

Built once from the config and the GPU spec; the simulation (run.py) only reads it.
Segments of a pipeline op on virtual stage j (V = pp x virtual_stages of them):
  forward:  [embedding (j = 0)] + layer forward x layers(j) + [LM head and loss (j = V - 1)]
  backward: [LM head and loss backward (j = V - 1)] + layer backward x layers(j) + [embedding backward (j = 0)]
The layer backward starts with the recomputation the config asks for (training_shapes.recomputed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from hardware_models.gpu import DTYPE_BYTES, DeviceSpec
from sim.models.kernel import Kernel
from sim.models.training_shapes import CommOp, backward_pass, recomputed, timed
from sim.workloads.training.memory import chunk_expert_params, chunk_params, per_gpu, stage_params
from sim.workloads.training.schedule import (
    chunk_order,
    last_backward,
    split_layers,
    stage_ops,
)


@dataclass
class TrainingPlan:
    config: object  # training.Config
    family: object  # LLMFamily | DiTFamily
    device: DeviceSpec
    shape: object  # training_shapes.Shape
    layers_per_vstage: list[int] = field(init=False)

    def __post_init__(self) -> None:
        par = self.config.parallelism
        self.p, self.v = par.pp, self.config.virtual_stages
        self.layers_per_vstage = split_layers(self.family.layers, self.p * self.v)

    @property
    def virtual_stages(self) -> int:
        return self.p * self.v

    @cached_property
    def ops(self) -> list[list]:
        m = self.config.micro_batches
        return [stage_ops(self.config.schedule, self.p, m, self.v, s) for s in range(self.p)]

    @cached_property
    def chunk_order(self) -> list[list[int]]:
        return [chunk_order(ops) for ops in self.ops]

    @cached_property
    def first_forward(self) -> list[dict[int, int]]:
        out = []
        for ops in self.ops:
            first: dict[int, int] = {}
            for i, op in enumerate(ops):
                if op.kind == "F":
                    first.setdefault(op.chunk, i)
            out.append(first)
        return out

    @cached_property
    def last_backward(self) -> list[dict[int, int]]:
        return [last_backward(ops) for ops in self.ops]

    # ---- timed segments -------------------------------------------------------------------------
    def _timed(self, ops, model: bool = True) -> tuple:
        return tuple(timed(op, self.device, model) for op in ops)

    @cached_property
    def _parts(self) -> dict[str, tuple]:
        f, s, rc = self.family, self.shape, self.config.recompute
        layer, first, last = f.layer_forward(s), f.first_forward(s), f.last_forward(s)
        return {
            "layer fwd": self._timed(layer),
            "layer bwd": self._timed(recomputed(layer, rc), model=False) + self._timed(backward_pass(layer)),
            "embedding fwd": self._timed(first),
            "embedding bwd": self._timed(backward_pass(first)),
            "head fwd": self._timed(last),
            "head bwd": self._timed(backward_pass(last)),
        }

    def layer_items(self, part: str) -> tuple:
        """The kernels and collectives of one transformer layer: `part` "layer fwd" or "layer bwd"
        (its recomputation included)."""
        return self._parts[part]

    def segments(self, kind: str, j: int) -> list[tuple[str, tuple, int]]:
        parts, n, last = self._parts, self.layers_per_vstage[j], self.virtual_stages - 1
        layers = [(f"layer {'fwd' if kind == 'F' else 'bwd'}", n)] if n else []  # a chunk may hold none
        if kind == "F":
            out = [("embedding fwd", parts["embedding fwd"], 1)] if j == 0 else []
            out += [(name, parts[name], count) for name, count in layers]
            if j == last:
                out.append(("head fwd", parts["head fwd"], 1))
            return out
        out = [("head bwd", parts["head bwd"], 1)] if j == last else []
        out += [(name, parts[name], count) for name, count in layers]
        if j == 0:
            out.append(("embedding bwd", parts["embedding bwd"], 1))
        return out

    def expanded(self, kind: str, j: int) -> list[tuple[str, tuple, int]]:
        """The op's segments one by one: (name, items, DP unit it uses or completes). Units are the
        chunk's layers (`fsdp_unit: layer`; the embedding joins the first, the LM head the last) or
        the whole chunk (`chunk`: unit 0)."""
        n, out = self.layers_per_vstage[j], []
        for name, items, count in self.segments(kind, j):
            if name.startswith("embedding"):
                layers = [0]
            elif name.startswith("head"):
                layers = [max(n - 1, 0)]
            else:
                layers = list(range(count)) if kind == "F" else list(range(count - 1, -1, -1))
            for k in layers:
                unit = k if self.config.fsdp_unit == "layer" else 0
                out.append((f"{name} L{k}" if name.startswith("layer") else name, items, unit))
        return out

    def dp_units(self, s: int, chunk: int) -> list[float]:
        """Parameters per GPU of each DP unit (all-gathered / reduce-scattered together) of a chunk."""
        j = chunk * self.p + s
        if self.config.fsdp_unit == "chunk":
            return [self.chunk_params[(s, chunk)]]
        tp, n = self.config.parallelism.tp, self.layers_per_vstage[j]
        layer = per_gpu(self.family.layer_params, self.family.expert_layer_params, tp, self.config.parallelism.ep)[0]
        units = [layer] * n or [0.0]  # an empty chunk: the embedding or the head alone
        if j == 0:
            units[0] += self.family.first_params / tp
        if j == self.virtual_stages - 1:
            units[-1] += self.family.last_params / tp
        return units

    def dp_expert_units(self, s: int, chunk: int) -> list[float]:
        """Expert parameters per GPU of each DP unit (`dp_units` counts the rest), reduced over the
        dp x cp / ep ranks holding the same experts; zeros for a dense model."""
        if self.config.fsdp_unit == "chunk":
            return [self.chunk_expert_params[(s, chunk)]]
        par = self.config.parallelism
        expert = per_gpu(self.family.layer_params, self.family.expert_layer_params, par.tp, par.ep)[1]
        return [expert] * self.layers_per_vstage[chunk * self.p + s] or [0.0]

    def stage_items(self, s: int) -> tuple:
        """Every kernel and collective stage s can run (for its group's signature)."""
        parts = ["layer fwd", "layer bwd"]
        if s == 0:
            parts += ["embedding fwd", "embedding bwd"]
        if s == (self.virtual_stages - 1) % self.p:
            parts += ["head fwd", "head bwd"]
        return tuple(i for name in parts for i in self._parts[name])

    # ---- parameters and traffic ------------------------------------------------------------------
    @cached_property
    def stage_params(self) -> list[float]:
        """Parameters per GPU of each stage (divided by tp)."""
        tp = self.config.parallelism.tp
        return [stage_params(self.family, self.layers_per_vstage, self.p, s) / tp for s in range(self.p)]

    def _chunk_split(self, j: int) -> tuple[float, float]:
        par, layers = self.config.parallelism, self.layers_per_vstage
        whole = chunk_params(self.family, layers, j)
        return per_gpu(whole, chunk_expert_params(self.family, layers, j), par.tp, par.ep)

    @cached_property
    def chunk_params(self) -> dict[tuple[int, int], float]:
        """Parameters per GPU of chunk c of stage s, experts excluded (`chunk_expert_params`)."""
        return {(j % self.p, j // self.p): self._chunk_split(j)[0] for j in range(self.virtual_stages)}

    @cached_property
    def chunk_expert_params(self) -> dict[tuple[int, int], float]:
        """Expert parameters per GPU of chunk c of stage s (0 for a dense model)."""
        return {(j % self.p, j // self.p): self._chunk_split(j)[1] for j in range(self.virtual_stages)}

    @property
    def optimizer_shards(self) -> int:
        par = self.config.parallelism
        return par.dp * par.cp if self.config.data_parallel == "fsdp" else 1

    def optimizer_step_bytes(self, s: int, per_param: float) -> float:
        """Memory traffic of one GPU's optimizer step on stage s (`per_param` bytes per parameter of its
        shard): its dense shard and its expert shard (experts sharded over the dp x cp / ep ranks
        holding them)."""
        expert = sum(x for (st, _), x in self.chunk_expert_params.items() if st == s)
        if not expert:
            return per_param * self.stage_params[s] / self.optimizer_shards
        dense = sum(d for (st, _), d in self.chunk_params.items() if st == s)
        expert_shards = max(self.optimizer_shards // self.config.parallelism.ep, 1)
        return per_param * (dense / self.optimizer_shards + expert / expert_shards)

    @property
    def p2p_bytes(self) -> float:
        """Activations (or their gradient) one GPU sends to its peer in the next stage per micro-batch:
        its sequence-parallel share (scatter-gather optimisation), the whole tensor without SP."""
        s = self.shape
        return s.tokens * s.hidden * DTYPE_BYTES[s.dtype] / s.sp_divisor

    # ---- FLOPs ----------------------------------------------------------------------------------
    @property
    def model_flop_per_iteration(self) -> float:
        return self.family.model_flop_per_sequence(self.config.sequence) * self.config.samples


def overlap_groups(items, tp_comm_overlap: bool) -> list[tuple]:
    """How a segment's items run: one at a time, except (with `tp_comm_overlap`) a TP all-gather with
    the GEMM that consumes it and a GEMM with the reduce-scatter of its output, which run together
    (chunked overlap as in Transformer Engine's userbuffers, taken as perfect)."""
    if not tp_comm_overlap:
        return [(i,) for i in items]

    def gemm(x) -> bool:
        return isinstance(x, Kernel) and x.category == "dense"

    def tp(x, op: str) -> bool:
        return isinstance(x, CommOp) and x.group == "tp" and x.op == op

    out, i = [], 0
    while i < len(items):
        a, b = items[i], items[i + 1] if i + 1 < len(items) else None
        if b is not None and ((tp(a, "all_gather") and gemm(b)) or (gemm(a) and tp(b, "reduce_scatter"))):
            out.append((a, b))
            i += 2
        else:
            out.append((a,))
            i += 1
    return out


def kernel_run(groups: list[tuple], i: int) -> list:
    """The kernels of groups[i:] that run one at a time, up to the next collective or overlapped pair
    (the simulation wakes once for all of them)."""
    run = []
    while i < len(groups) and len(groups[i]) == 1 and isinstance(groups[i][0], Kernel):
        run.append(groups[i][0])
        i += 1
    return run


def kernel_runs(groups: list[tuple]) -> int:
    """How many runs of lone kernels a segment run as `groups` has: its process wakes once for each
    (and once per other group: a collective, or a GEMM with its overlapped TP collective)."""
    n = i = 0
    while i < len(groups):
        run = len(kernel_run(groups, i))
        n += run > 0
        i += run or 1
    return n
