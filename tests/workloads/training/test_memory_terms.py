"""The training memory model term by term against the published accounting it cites
(docs/references.md#training-memory), and the published configurations it must admit.

- Activations per layer: Korthikanti et al. (arXiv 2205.05198) Table 2 for a GPT layer
  (s sequence, b micro-batch, h hidden, a heads, t tensor parallel, 2-byte activations): tensor +
  sequence parallel sbh(34/t + 5as/(ht)), tensor parallel only sbh(10 + 24/t + 5as/(ht)), full
  recomputation 2sbh (2sbh/t when the layer input is sequence-parallel). dcsim's layer has no dropout
  (two sbh masks fewer) and runs FlashAttention, which stores a 4-byte log-sum-exp per head and token
  instead of the 5as²b score tensors.
- In flight ([Narayanan] / [Korthikanti] §4.2.3): 1F1B stage s holds p - s micro-batches of its L/p
  layers; interleaved 1F1B with v chunks holds L(1 + (p - 1)/(pv)) layer-micro-batches on stage 0.
- Model states ([ZeRO] §3.1, mixed-precision Adam K = 12): 2 B weights, 4 B fp32 gradients, 12 B
  optimizer state per parameter; P_os shards the 12 B over the data-parallel ranks.
"""

from __future__ import annotations

import pytest

from sim.errors import ScenarioError
from sim.models.training_shapes import LLMFamily
from sim.models.transformer import TransformerSpec
from sim.scenario.model import load_scenario
from sim.workloads.training.memory import layer_activation_bytes, stage_memory
from sim.workloads.training.schedule import in_flight_peak, split_layers, stage_ops
from sim.workloads.training.workload import Config

# A GPT layer as Korthikanti counts it: multi-head attention, a 4h two-matrix MLP (squared ReLU in
# place of GeLU: the same saved tensors).
S, B, H, A, T = 256, 2, 512, 8, 4
GPT = TransformerSpec(name="gpt", layers=8, hidden=H, ffn=4 * H, heads=A, kv_heads=A, vocab=1024, mlp="relu2")
LSE = 4 * A * S * B  # FlashAttention's fp32 log-sum-exp, per head and token


def saved(recompute: str, sp: bool = True, cp: int = 1, spec: TransformerSpec = GPT, tp: int = T) -> float:
    family = LLMFamily(spec)
    return layer_activation_bytes(family, family.shape(tp, cp, S, B, "bf16", "bf16", sp), recompute)


def test_tensor_and_sequence_parallel_layer_saves_korthikanti_34_sbh_over_t_less_dropout_and_scores():
    sbh = S * B * H
    korthikanti = sbh * (34 / T + 5 * A * S / (H * T))
    dropout_masks = 2 * sbh / T
    scores = 5 * A * S * S * B / T
    assert saved("none") == pytest.approx(korthikanti - dropout_masks - scores + LSE / T, rel=1e-12)


def test_tensor_parallel_without_sequence_parallel_keeps_the_norm_tensors_whole():
    sbh = S * B * H
    korthikanti = sbh * (10 + 24 / T + 5 * A * S / (H * T))
    dropout_masks = 2 * sbh  # unsharded without sequence parallelism
    scores = 5 * A * S * S * B / T
    assert saved("none", sp=False) == pytest.approx(korthikanti - dropout_masks - scores + LSE / T, rel=1e-12)


def test_full_recomputation_keeps_the_layer_input_2sbh_sharded_by_sequence_parallelism():
    assert saved("full") == 2 * S * B * H / T
    assert saved("full", sp=False) == 2 * S * B * H


def test_selective_drops_the_norm_outputs_and_the_mlp_activation_output():
    """dcsim's `selective`: FlashAttention already recomputes the scores (the paper's selective part);
    the cheap elementwise outputs are re-run too - the two norm outputs (2sbh each) and the
    activation output (2sb x 4h), all divided by t."""
    assert saved("none") - saved("selective") == pytest.approx((2 * 2 + 8) * S * B * H / T, rel=1e-12)


def test_context_parallel_layer_also_keeps_the_kv_gathered_from_the_other_ranks():
    cp = 4
    local = LLMFamily(GPT).saved_bytes_per_token(LLMFamily(GPT).shape(T, cp, S, B, "bf16", "bf16"), "none")
    kv_heads, head_dim = A // T, H // A
    others = 2 * B * S * kv_heads * head_dim * 2 * (cp - 1) / cp  # K and V, 2 bytes
    assert saved("none", cp=cp) == pytest.approx(local * S * B / cp + others, rel=1e-12)
    assert saved("full", cp=cp) == 2 * S * B / cp * H / T  # the recomputed forward gathers them again


# ---- what the schedule keeps in flight ------------------------------------------------------------


@pytest.mark.parametrize("p,m", [(4, 8), (8, 8), (4, 12)])
def test_1f1b_stage_s_holds_p_minus_s_micro_batches(p, m):
    for s in range(p):
        assert in_flight_peak(stage_ops("1f1b", p, m, 1, s), [1]) == min(p - s, m)


@pytest.mark.parametrize("p,v,m", [(4, 2, 8), (4, 4, 12), (8, 2, 16), (16, 8, 32)])
def test_interleaved_stage_0_holds_l_times_1_plus_p_minus_1_over_pv(p, v, m):
    layers_per_chunk = 3
    L = p * v * layers_per_chunk
    held = in_flight_peak(stage_ops("interleaved_1f1b", p, m, v, 0), [layers_per_chunk] * v)
    assert held == pytest.approx(L * (1 + (p - 1) / (p * v)), rel=1e-12)


def test_more_chunks_per_stage_hold_fewer_activations():
    p, m, L = 8, 16, 64
    held = [in_flight_peak(stage_ops("interleaved_1f1b", p, m, v, 0), [L // (p * v)] * v) for v in (2, 4, 8)]
    assert held[0] > held[1] > held[2] > L


# ---- model states and the walk over the schedule ----------------------------------------------------


def config(**kw) -> Config:
    wl = {
        "kind": "training",
        "model": GPT.model_dump(),
        "parallelism": {"tp": T, "pp": 2, "dp": 4},
        "sequence_length": S,
        "micro_batch_size": B,
        "global_batch_size": 4 * B * 8,
    }
    wl.update(kw)
    return Config.model_validate(wl)


def memory(cfg: Config, stage: int):
    layers = split_layers(cfg.family.layers, cfg.parallelism.pp * cfg.virtual_stages)
    return stage_memory(cfg, cfg.family, cfg.shape(), layers, stage)


def test_ddp_holds_zero_baseline_states_and_fsdp_shards_the_optimizer_over_dp():
    """[ZeRO] §3.1 with fp32 gradients: (2 + 4 + 12) B per parameter replicated; P_os: 2 + 4 + 12/N_d
    (Megatron's distributed optimizer) once every chunk is in its backward window (m = 8 > p = 2)."""
    fam = LLMFamily(GPT)
    stage0 = (4 * fam.layer_params + fam.first_params) / T  # 8 layers on 2 stages, embedding on the first
    ddp = memory(config(data_parallel="ddp"), 0)
    assert ddp.params_per_gpu == pytest.approx(stage0)
    assert (ddp.weights, ddp.grads, ddp.optimizer) == pytest.approx((2 * stage0, 4 * stage0, 12 * stage0))
    fsdp = memory(config(data_parallel="fsdp"), 0)
    assert (fsdp.weights, fsdp.grads, fsdp.optimizer) == pytest.approx((2 * stage0, 4 * stage0, 12 * stage0 / 4))
    bf16 = memory(config(data_parallel="fsdp", grad_dtype="bf16"), 0)
    assert bf16.grads == pytest.approx(2 * stage0)


def test_the_last_stage_holds_the_lm_head_and_the_fp32_logits():
    fam = LLMFamily(GPT)
    last = memory(config(), 1)
    assert last.params_per_gpu == pytest.approx((4 * fam.layer_params + fam.last_params) / T)
    shape = config().shape()
    assert last.working == pytest.approx(fam.working_bytes(shape) + fam.last_working_bytes(shape))


def test_peak_activations_are_the_in_flight_layers_times_one_layer():
    cfg = config(schedule="interleaved_1f1b", virtual_stages=2, global_batch_size=4 * B * 4)
    for s in range(2):
        m = memory(cfg, s)
        assert m.activations == pytest.approx(m.layers_in_flight * saved(cfg.recompute))


def test_fsdp_gradients_appear_with_the_first_backward_when_every_forward_runs_first():
    """m = p: all forwards before the first backward; at that peak only the chunk in its backward
    holds an unsharded gradient (FSDP allocates them in the backward), DDP holds its buckets."""
    kw = {"schedule": "interleaved_1f1b", "virtual_stages": 2, "global_batch_size": 4 * B * 2}
    fsdp, ddp = memory(config(**kw), 0), memory(config(data_parallel="ddp", **kw), 0)
    assert fsdp.layers_in_flight == ddp.layers_in_flight == 2 * 4  # 2 micro-batches x 4 layers
    chunk = 2 * LLMFamily(GPT).layer_params / T  # the second chunk of stage 0 runs the first backward
    assert fsdp.grads == pytest.approx(4 * chunk)
    assert ddp.grads == pytest.approx(4 * ddp.params_per_gpu)


def test_llama3_split_leaves_the_first_and_last_chunk_only_the_embedding_and_head():
    layers = split_layers(126, 16 * 8)
    assert layers[0] == layers[-1] == 0 and set(layers[1:-1]) == {1}
    assert sum(layers[0::16]) == sum(layers[15::16]) == 7 and sum(layers[1::16]) == 8
    with pytest.raises(ValueError):
        split_layers(125, 128)  # an empty chunk in the middle


# ---- published configurations -------------------------------------------------------------------

PUBLISHED = [
    "scenarios/train-llama3-405b-8k-gpus-seq8k.yaml",
    "scenarios/train-llama3-405b-16k-gpus-seq8k.yaml",
    "scenarios/train-llama3-405b-16k-gpus-seq128k-cp16.yaml",
    "scenarios/train-nemotron4-340b-1536-gpus-flow.yaml",
]


@pytest.mark.parametrize("path", PUBLISHED)
def test_published_configuration_fits_on_an_80_gb_h100(path):
    sc = load_scenario(path)  # raises ScenarioError if it does not fit
    wl = sc.workload
    assert wl.schedule == "interleaved_1f1b" and wl.virtual_stages == 8
    peak = max(m.total for m in wl.memory(sc.hardware))
    assert peak <= sc.hardware.gpu.memory == 80e9


def test_a_config_that_does_not_fit_is_one_line_listing_every_term():
    """Llama 3 405B at 8K saving every tensor of its layers (no recomputation at all): ~100 GB."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(PUBLISHED[0], ["workload.recompute=none"])
    text = str(err.value)
    assert "\n" not in text and "workload.parallelism" in text and "stage 1 needs" in text
    for term in ("weights", "grads", "optimizer", "activations", "working", "reserved", "but h100-sxm has 80.0 GB"):
        assert term in text
