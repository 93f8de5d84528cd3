"""DLRM: embedding tables and the dense architecture, as data any workload can reuse.

Embedding tables
- `TableConfig`: one table written out (`rows`, `dim`, `pooling` = average lookups per sample,
  `zipf_alpha` = skew of its row-access distribution, `dtype` of the stored rows).
- `TableGenerator`: `count` tables whose fields are a constant, a list (a seeded uniform choice) or
  `{min, max}` (seeded log-uniform for rows and pooling, uniform for zipf_alpha). `expand_tables`
  turns both into `Table`s with a random generator handed in by the caller (a `Simulation.rng`
  substream, so the same scenario and seed always yield the same tables).

Dense architecture (`DenseConfig`)
- `bottom_mlp`: DLRM convention `[input, hidden..., output]` (input = dense features);
  `top_mlp`: output widths of the top layers (the input is the interaction's output).
- `interaction`: `dot` (DLRM pairwise dot products of the F = tables + 1 vectors), `dcn` (DCN-v2
  low-rank cross layers on the concatenation), `wukong` (stacked factorisation-machine + linear
  compress blocks), `dhen` (layers of an ensemble: dot + DCN cross + self-attention over the F
  vectors), or `{flop_per_sample: X}` (a synthetic interaction of X forward FLOPs per sample).
- `dot` with tables of another dim than the bottom MLP output d: each such table's pooled embedding
  is projected to d by a per-table linear layer (mixed-dimension embeddings), GEMMs and weights
  counted with the dense part (`projection_gemms`).
- `dense_gemms(batch)` lists the forward GEMMs as (name, m, n, k, batch) for a local batch; the
  backward of each is two GEMMs of the same FLOPs (input gradient and weight gradient).
  `dense_params()` counts the weights that the data-parallel all-reduce carries.
Interaction layer counts and ranks default to assumptions noted next to each field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from hardware_models.gpu import DTYPE_BYTES
from hardware_models.strict import StrictModel

EmbeddingDtype = Literal["fp32", "fp16", "bf16", "fp8", "int8"]


class Spread(StrictModel):
    """A range for generated tables: log-uniform (rows, pooling) or uniform (zipf_alpha)."""

    min: float = Field(gt=0)
    max: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> Spread:
        if self.max < self.min:
            raise ValueError(f"max {self.max} is below min {self.min}")
        return self


GenValue = float | list[float] | Spread


class TableConfig(StrictModel):
    name: str = Field(min_length=1)
    rows: int = Field(ge=1, description="hash size (rows of the table)")
    dim: int = Field(ge=1, description="embedding dimension")
    pooling: float = Field(gt=0, description="average lookups per sample (multi-hot length)")
    zipf_alpha: float = Field(1.05, ge=0, description="row-access skew: P(k-th hottest row) ~ k^-alpha")
    dtype: EmbeddingDtype = "fp16"
    dedup: float | None = Field(
        None,
        ge=1.0,
        description="RecD: this feature's duplicates per distinct value in a batch (default workload.dedup)",
    )


class TableGenerator(StrictModel):
    count: int = Field(ge=1)
    rows: GenValue
    dim: int | list[int] = 128
    pooling: GenValue = 20.0
    zipf_alpha: GenValue = 1.05
    dtype: EmbeddingDtype = "fp16"
    seed: int = Field(0, description="picks the random substream of the generator (with the scenario seed)")
    prefix: str = "t"
    dedup: float | None = Field(None, ge=1.0, description="RecD dedup of these tables (default workload.dedup)")


@dataclass(frozen=True)
class Table:
    """An expanded embedding table (SI units)."""

    name: str
    rows: int
    dim: int
    pooling: float
    zipf_alpha: float
    dtype: str
    dedup: float | None = None  # RecD factor of this feature; None: the workload's

    @property
    def element_bytes(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def row_bytes(self) -> float:
        return self.dim * self.element_bytes

    @property
    def weight_bytes(self) -> float:
        return self.rows * self.row_bytes


def _draw(value: GenValue, rng: np.random.Generator, n: int, log: bool) -> np.ndarray:
    if isinstance(value, Spread):
        if log:
            return np.exp(rng.uniform(math.log(value.min), math.log(value.max), n))
        return rng.uniform(value.min, value.max, n)
    if isinstance(value, list):
        return np.asarray(value, dtype=float)[rng.integers(len(value), size=n)]
    return np.full(n, float(value))


def generate_tables(gen: TableGenerator, rng: np.random.Generator) -> list[Table]:
    """`gen.count` tables drawn from `rng` (draw order fixed: rows, dim, pooling, alpha)."""
    n = gen.count
    rows = np.maximum(1, np.round(_draw(gen.rows, rng, n, log=True))).astype(np.int64)
    dims = _draw(gen.dim, rng, n, log=False).astype(np.int64)
    pooling = _draw(gen.pooling, rng, n, log=True)
    alpha = _draw(gen.zipf_alpha, rng, n, log=False)
    width = len(str(n - 1))
    return [
        Table(
            f"{gen.prefix}{i:0{width}d}",
            int(rows[i]),
            int(dims[i]),
            float(pooling[i]),
            float(alpha[i]),
            gen.dtype,
            gen.dedup,
        )
        for i in range(n)
    ]


def expand_tables(tables: list[TableConfig], generators: list[TableGenerator], rng_for) -> list[Table]:
    """Explicit tables first, then each generator's tables; `rng_for(name)` gives a numpy Generator."""
    out = [Table(t.name, t.rows, t.dim, t.pooling, t.zipf_alpha, t.dtype, t.dedup) for t in tables]
    for gen in generators:
        out.extend(generate_tables(gen, rng_for(f"dlrm.tables/{gen.prefix}/{gen.seed}")))
    return out


# ------------------------------------------------------------------------------------------------
# dense architecture


class FlopInteraction(StrictModel):
    flop_per_sample: float = Field(gt=0, description="forward FLOPs of the interaction per sample")
    output_width: int | None = Field(None, ge=1, description="width fed to the top MLP (default: F x dim)")


Interaction = Literal["dot", "dcn", "wukong", "dhen"] | FlopInteraction

# name -> (default layers, default rank), assumptions:
# dcn: 3 cross layers, low rank 512 (MLPerf DLRM-DCNv2 reference model);
# wukong: 8 layers, FM compression rank 32 (assumption in the range of the Wukong paper's configs);
# dhen: 2 layers, cross rank 256 (assumption).
_INTERACTION_DEFAULTS = {"dot": (1, 0), "dcn": (3, 512), "wukong": (8, 32), "dhen": (2, 256)}

Gemm = tuple[str, float, float, float, float]  # (name, m, n, k, batch)
Pass = tuple[str, float]  # (name, bytes moved) of a memory-bound kernel


@dataclass(frozen=True)
class DensePasses:
    """`DenseConfig.pointwise_passes` grouped as the iteration runs them: with the bottom MLP forward,
    with the interaction and top MLP forward and backward, with the bottom MLP backward."""

    bottom_fwd: list[Pass]
    top: list[Pass]
    bottom_bwd: list[Pass]

    @staticmethod
    def time_s(device, passes: list[Pass]) -> float:
        return float(sum(device.memory_time_s(nbytes) for _, nbytes in passes))


class DenseConfig(StrictModel):
    bottom_mlp: list[int] = Field(
        default_factory=lambda: [13, 512, 256, 128],
        min_length=2,
        description="[input features, hidden..., output] (DLRM convention)",
    )
    top_mlp: list[int] = Field(
        default_factory=lambda: [1024, 1024, 512, 256, 1],
        min_length=1,
        description="output widths of the top MLP layers",
    )
    interaction: Interaction = "dot"
    interaction_layers: int | None = Field(None, ge=1, description="dcn/wukong/dhen layers (default per kind)")
    interaction_rank: int | None = Field(None, ge=1, description="dcn/dhen low rank, wukong FM rank")
    dtype: Literal["fp32", "tf32", "bf16", "fp16"] = "bf16"
    grad_bytes_per_param: float = Field(4.0, gt=0, description="all-reduced gradient bytes per parameter (fp32)")

    @property
    def embedding_dim(self) -> int:
        return self.bottom_mlp[-1]

    def _layers_rank(self) -> tuple[int, int]:
        layers, rank = _INTERACTION_DEFAULTS[self.interaction]
        return self.interaction_layers or layers, self.interaction_rank or rank

    def interaction_gemms(self, batch: float, num_vectors: int, concat_width: int) -> tuple[list[Gemm], int, float]:
        """(forward GEMMs, output width, parameters) of the interaction for `num_vectors` inputs."""
        f, d = num_vectors, self.embedding_dim
        if isinstance(self.interaction, FlopInteraction):
            side = math.sqrt(self.interaction.flop_per_sample / 2.0)
            width = self.interaction.output_width or f * d
            return [("interaction", batch, side, side, 1)], width, side * side
        layers, rank = self._layers_rank()
        if self.interaction == "dot":
            return [("dot", f, f, d, batch)], f * (f - 1) // 2 + d, 0.0
        if self.interaction == "dcn":
            w = concat_width
            gemms = [g for i in range(layers) for g in (("dcn.u", batch, rank, w, 1), ("dcn.v", batch, w, rank, 1))]
            return gemms, w, layers * 2.0 * w * rank
        if self.interaction == "wukong":
            gemms, params = [], 0.0
            for _ in range(layers):
                gemms += [
                    ("wukong.fm_compress", d, rank, f, batch),
                    ("wukong.fm", f, rank, d, batch),
                    ("wukong.fm_mlp", batch, f * d, f * rank, 1),
                    ("wukong.lcb", d, f, f, batch),
                ]
                params += f * rank + f * rank * f * d + f * f
            return gemms, f * d, params
        gemms, params = [], 0.0  # dhen
        for _ in range(layers):
            gemms += [
                ("dhen.dot", f, f, d, batch),
                ("dhen.cross_u", batch, rank, f * d, 1),
                ("dhen.cross_v", batch, f * d, rank, 1),
                ("dhen.qkv", batch * f, 3 * d, d, 1),
                ("dhen.scores", f, f, d, batch),
                ("dhen.context", f, d, f, batch),
                ("dhen.proj", batch, f * d, f * f + 2 * f * d, 1),
            ]
            params += 2.0 * rank * f * d + 3 * d * d + (f * f + 2 * f * d) * f * d
        return gemms, f * d, params

    def projection_gemms(self, batch: float, table_dims: list[int]) -> list[Gemm]:
        """`dot` with mixed dims: each table whose dim differs from the bottom MLP output d is projected
        to d by its own bias-free linear layer (mixed-dimension embeddings, Ginart et al., arXiv
        1909.11810), one batched GEMM per distinct dim: (proj.d{dim}, batch, d, dim, tables of that dim)."""
        if self.interaction != "dot":
            return []
        d = self.embedding_dim
        counts: dict[int, int] = {}
        for dim in table_dims:
            if dim != d:
                counts[dim] = counts.get(dim, 0) + 1
        return [(f"proj.d{dim}", batch, d, dim, n) for dim, n in sorted(counts.items())]

    def dense_gemms(self, batch: float, table_dims: list[int]) -> list[Gemm]:
        """Forward GEMMs for a local batch: bottom MLP, interaction, top MLP."""
        gemms, _ = self._graph(batch, table_dims)
        return gemms

    def dense_params(self, table_dims: list[int]) -> float:
        _, params = self._graph(1, table_dims)
        return params

    def _graph(self, batch: float, table_dims: list[int]) -> tuple[list[Gemm], float]:
        gemms: list[Gemm] = []
        params = 0.0
        for i, (k, n) in enumerate(zip(self.bottom_mlp, self.bottom_mlp[1:])):
            gemms.append((f"bottom{i}", batch, n, k, 1))
            params += k * n + n
        for name, m, n, k, count in self.projection_gemms(batch, table_dims):
            gemms.append((name, m, n, k, count))
            params += count * k * n
        inter, width, p = self.interaction_gemms(batch, len(table_dims) + 1, self.embedding_dim + int(sum(table_dims)))
        gemms += inter
        params += p
        k = width
        for i, n in enumerate(self.top_mlp):
            gemms.append((f"top{i}", batch, n, k, 1))
            params += k * n + n
            k = n
        return gemms, params

    def bottom_count(self) -> int:
        """How many of `dense_gemms` belong to the bottom MLP (they do not need embeddings)."""
        return len(self.bottom_mlp) - 1

    def pointwise_passes(self, batch: float, table_dims: list[int]) -> DensePasses:
        """The memory-bound kernels eager PyTorch runs around the dense GEMMs, as (name, bytes moved).

        Per MLP layer of width n (batch B, element size e): the bias broadcast into the output that
        `addmm` accumulates onto (written, then read: 2 B n e); ReLU after every layer but an MLP's
        last (read + write: 2 B n e); backward: ReLU's mask applied to the gradient (read gradient
        and output, write: 3 B n e) and the bias gradient (a batch reduction: B n e). Interaction:
        its inputs stacked (2 B f d e), for `dot` the upper triangle gathered (2 B p e, p pairs) and
        concatenated with the bottom output (2 B (d + p) e); backward: the triangle's gradient
        scattered into zeros (B f^2 e + 2 B p e), the two batched-GEMM input gradients summed
        (3 B f d e) and split back per input (2 B f d e). The loss and its gradient (2 B e each).
        The optimizer (SGD): each parameter tensor read with its fp32 gradient and written
        (3 x 4 bytes per parameter), one kernel per tensor, charged with the bottom backward.
        Each pass is a kernel: the device's memory roofline plus its launch overhead."""
        e = DTYPE_BYTES[self.dtype]
        f = len(table_dims) + 1
        d = self.embedding_dim
        bottom_fwd: list[Pass] = []
        bottom_bwd: list[Pass] = []
        top: list[Pass] = []
        top_bwd: list[Pass] = []
        params: list[tuple[str, float]] = []

        def mlp(prefix: str, widths: list[int], k0: int, fwd: list[Pass], bwd: list[Pass]) -> None:
            k = k0
            for i, n in enumerate(widths):
                last = i == len(widths) - 1
                fwd.append((f"{prefix}{i}.bias", 2 * batch * n * e))
                if not last:
                    fwd.append((f"{prefix}{i}.relu", 2 * batch * n * e))
                    bwd.append((f"{prefix}{i}.relu_grad", 3 * batch * n * e))
                bwd.append((f"{prefix}{i}.bias_grad", batch * n * e))
                params.extend([(f"{prefix}{i}.weight", k * n), (f"{prefix}{i}.bias", n)])
                k = n

        mlp("bottom", self.bottom_mlp[1:], self.bottom_mlp[0], bottom_fwd, bottom_bwd)
        _, width, inter_params = self.interaction_gemms(batch, f, d + int(sum(table_dims)))
        top.append(("interaction.stack", 2 * batch * f * d * e))
        top_bwd.append(("interaction.stack_grad", 2 * batch * f * d * e))
        if self.interaction == "dot":
            pairs = f * (f - 1) // 2
            top.append(("interaction.triu", 2 * batch * pairs * e))
            top.append(("interaction.cat", 2 * batch * (d + pairs) * e))
            top_bwd += [
                ("interaction.triu_grad", batch * f * f * e + 2 * batch * pairs * e),
                ("interaction.bmm_grad_sum", 3 * batch * f * d * e),
            ]
        if inter_params:
            params.append(("interaction.weight", inter_params))
        mlp("top", list(self.top_mlp), width, top, top_bwd)
        loss = [("loss", 2 * batch * e), ("loss_grad", 2 * batch * e)]
        optimizer = [(f"sgd.{name}", 3 * 4.0 * count) for name, count in params]
        return DensePasses(bottom_fwd, top + loss + list(reversed(top_bwd)), list(reversed(bottom_bwd)) + optimizer)


def backward_gemms(gemms: list[Gemm]) -> list[Gemm]:
    """Input-gradient (m x k <- m x n . n x k) and weight-gradient (k x n <- k x m . m x n) GEMMs."""
    out: list[Gemm] = []
    for name, m, n, k, b in reversed(gemms):
        out += [(f"{name}.dgrad", m, k, n, b), (f"{name}.wgrad", k, n, m, b)]
    return out
