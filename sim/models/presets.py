"""The named models a scenario can use, in one list (`dcsim models`, docs/models.md).

- LLM presets (sim/models/transformer.py `PRESETS`): `model: llama3-8b` in a `training` or
  `cp_inference` workload.
- Mixture-of-experts LLM presets (sim/models/moe.py `MOE_PRESETS`): `model: mixtral-8x7b` in a
  `training` (with `parallelism.ep`) or `serving` workload.
- Video DiT presets (sim/models/dit.py `PRESETS`): `model: moviegen-30b` in a `training` workload.
- DLRM (sim/models/dlrm.py): `embedding_training` has no named model; its `dense:` block defaults to
  the MLPerf DLRM MLPs with the `dot` interaction, and `dense.interaction` names the other
  interaction architectures (`dcn`, `wukong`, `dhen`) with their default layers and ranks. The tables
  are always written in the scenario (see scenarios/emb-*.yaml).

Each `ModelPreset` carries the figures that size a run (parameters, weights in bf16, layers and
widths) and the primary source of its numbers (the same one docs/references.md#models cites).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hardware_models.gpu import DTYPE_BYTES
from hardware_models.units import format_bytes
from sim.models import dit, dlrm, moe, transformer


@dataclass(frozen=True)
class ModelPreset:
    name: str  # what a scenario writes
    kind: str  # LLM, video DiT, DLRM dense, DLRM interaction
    key: str  # the scenario key that takes the name
    workloads: str  # workload kinds that accept it
    params: float | None  # parameters (None where they depend on the tables)
    shape: str  # layers and widths, in words
    source: str

    @property
    def weights_bf16_bytes(self) -> float | None:
        return None if self.params is None else self.params * DTYPE_BYTES["bf16"]

    def as_dict(self) -> dict:
        return {**asdict(self), "weights_bf16_bytes": self.weights_bf16_bytes}


def _llm(spec: transformer.TransformerSpec) -> ModelPreset:
    mlp = "SwiGLU" if spec.mlp == "swiglu" else "squared-ReLU"
    return ModelPreset(
        name=spec.name,
        kind="LLM (decoder-only)",
        key="workload.model",
        workloads="training, cp_inference",
        params=float(spec.params),
        shape=(
            f"{spec.layers} layers, hidden {spec.hidden:,}, FFN {spec.ffn:,} ({mlp}), {spec.heads} heads, "
            f"{spec.kv_heads} KV heads, head dim {spec.dim_per_head}, vocab {spec.vocab:,}"
        ),
        source=spec.source,
    )


def _moe(spec: moe.MoETransformerSpec) -> ModelPreset:
    active = spec.dense_flop_per_token() / 2 + 2 * spec.vocab * spec.hidden  # + embedding and LM head
    return ModelPreset(
        name=spec.name,
        kind="LLM (mixture of experts)",
        key="workload.model",
        workloads="training, serving",
        params=float(spec.params),
        shape=(
            f"{spec.layers} layers, hidden {spec.hidden:,}, {spec.experts} experts of FFN {spec.ffn:,} (SwiGLU), "
            f"top-{spec.experts_per_token} ({active / 1e9:.3g} billion active parameters), {spec.heads} heads, "
            f"{spec.kv_heads} KV heads, head dim {spec.dim_per_head}, vocab {spec.vocab:,}"
        ),
        source=spec.source,
    )


def _dit(spec: dit.DiTSpec) -> ModelPreset:
    c, p = spec.compression, spec.patch
    return ModelPreset(
        name=spec.name,
        kind="video DiT",
        key="workload.model",
        workloads="training",
        params=float(spec.params),
        shape=(
            f"{spec.layers} layers, hidden {spec.hidden:,}, FFN {spec.ffn:,}, {spec.heads} heads, "
            f"{spec.text_tokens} text tokens (cross-attention), latent x{c[0]}x{c[1]}x{c[2]} in T x H x W, "
            f"patch {p[0]}x{p[1]}x{p[2]}"
        ),
        source=spec.source.split(":")[0],
    )


def _dlrm() -> list[ModelPreset]:
    dense = dlrm.DenseConfig()
    rows = [
        ModelPreset(
            name="(default dense:)",
            kind="DLRM dense",
            key="workload.dense",
            workloads="embedding_training",
            params=None,
            shape=(
                f"bottom MLP {'-'.join(map(str, dense.bottom_mlp))}, top MLP {'-'.join(map(str, dense.top_mlp))}, "
                f"interaction {dense.interaction}; tables written in the scenario"
            ),
            source="MLPerf DLRM reference model (docs/references.md#models)",
        )
    ]
    sources = {"dcn": "MLPerf DLRM-DCNv2 reference model", "wukong": "assumption", "dhen": "assumption"}
    for name, (layers, rank) in dlrm._INTERACTION_DEFAULTS.items():
        if name == "dot":
            continue
        rows.append(
            ModelPreset(
                name=name,
                kind="DLRM interaction",
                key="workload.dense.interaction",
                workloads="embedding_training",
                params=None,
                shape=f"{layers} layers, rank {rank} (defaults; interaction_layers, interaction_rank)",
                source=f"{sources[name]} (sim/models/dlrm.py)",
            )
        )
    return rows


def model_presets() -> list[ModelPreset]:
    """Every named model, LLMs first (dense, then mixtures of experts), then DiTs, then the DLRM
    architectures."""
    return [
        *(_llm(spec) for spec in transformer.PRESETS.values()),
        *(_moe(spec) for spec in moe.MOE_PRESETS.values()),
        *(_dit(spec) for spec in dit.PRESETS.values()),
        *_dlrm(),
    ]


def params_text(preset: ModelPreset) -> str:
    """ "8.03 billion parameters (16.1 GB = 15 GiB in bf16)", or "-" where the tables decide."""
    if preset.params is None:
        return "-"
    weights = preset.weights_bf16_bytes or 0.0
    return f"{preset.params / 1e9:.3g} billion parameters ({weights / 1e9:.3g} GB = {format_bytes(weights)} in bf16)"


def models_markdown() -> str:
    """docs/models.md: the presets as a table (`dcsim models --markdown`)."""
    lines = [
        "# Model presets",
        "",
        "Generated by `dcsim models --markdown > docs/models.md` from sim/models/presets.py; do not edit by "
        "hand (tests/end_to_end/test_user_defects.py checks it is up to date). A scenario names an LLM or "
        "DiT preset with `workload.model: NAME`, or writes the model inline (keys in "
        "docs/scenario-reference.md). Sources: docs/references.md#models.",
        "",
        "| name | kind | scenario key | workloads | size | shape | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in model_presets():
        cells = [f"`{p.name}`", p.kind, f"`{p.key}`", p.workloads, params_text(p), p.shape, p.source]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"
