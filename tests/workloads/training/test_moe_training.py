"""Mixture-of-experts training (`kind: training` with a MoE model and `parallelism.ep`): closed forms for
the all-to-all bytes, the expert FLOPs and the memory per GPU, the network's part in the time, the
dense path left unchanged, determinism and bad input.

A tiny MoE (8 experts, top-2) on hosts of 2 GPUs: with tp = 1 and ep = 4 an expert-parallel block is
4 replicas on 2 hosts, so every all-to-all has peers behind the NIC.
"""

from __future__ import annotations

import pytest

from sim.errors import ScenarioError
from sim.models.moe import MOE_PRESETS, MoEFamily, MoETransformerSpec
from sim.models.presets import model_presets, models_markdown
from sim.models.training_shapes import CommOp, LLMFamily, backward_pass
from sim.models.transformer import Gemm, TransformerSpec
from sim.network.operation_cost import operation_cost
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.training.layout import GroupComm
from tests.conftest import make_cluster

MOE = {
    "name": "tiny-moe",
    "layers": 4,
    "hidden": 1024,
    "ffn": 2048,
    "heads": 16,
    "kv_heads": 4,
    "vocab": 32000,
    "experts": 8,
    "experts_per_token": 2,
}
DENSE = {k: v for k, v in MOE.items() if k not in ("experts", "experts_per_token")}
SEQ = 1024


def scenario(workload: dict, nodes=4, gpus_per_node=2, network="flow", nic=None):
    wl = {
        "kind": "training",
        "model": MOE,
        "sequence_length": SEQ,
        "micro_batch_size": 1,
        "iterations": 1,
        "global_batch_size": 8,
        "parallelism": {"tp": 1, "ep": 4},
    }
    wl.update(workload)
    hw = {"gpu": "h100-sxm", "gpus_per_node": gpus_per_node, "nodes": nodes, "topology": {"kind": "single-switch"}}
    if nic:
        hw["nic"] = nic
    return scenario_from_dict({"name": "t", "network_model": network, "hardware": hw, "workload": wl})


def family(ep=4, tp=1, cf=1.0) -> tuple[MoEFamily, object]:
    spec = MoETransformerSpec.model_validate(MOE)
    fam = MoEFamily(spec, ep=ep, capacity_factor=cf)
    return fam, fam.shape(tp, 1, SEQ, 1, "bf16", "bf16", True)


# ---- closed forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ep,tp", [(2, 1), (4, 1), (8, 2)])
def test_dispatch_and_combine_move_tokens_topk_hidden_bytes_per_rank(ep, tp):
    """Each GPU sends its T/tp tokens x k x D x 2 B in a dispatch, (ep - 1) / ep of it to other GPUs;
    the combine sends the same back; forward and backward run both."""
    fam, shape = family(ep=ep, tp=tp)
    tokens, k, d = SEQ // tp, MOE["experts_per_token"], MOE["hidden"]
    forward = fam.layer_forward(shape)
    a2a = [op for op in forward + backward_pass(forward) if isinstance(op, CommOp) and op.group == "ep"]
    assert [op.name.split()[-1] for op in a2a] == ["dispatch", "combine", "combine.bwd", "dispatch.bwd"]
    assert {op.nbytes for op in a2a} == {tokens * k * d * 2}

    cluster = make_cluster(gpus_per_node=2, nodes=tp * ep // 2)
    comm = GroupComm(cluster.network, cluster.devices[: tp * ep], tp, 1, "direct", ep)
    steps = comm.steps("ep", "all_to_all", a2a[0].nbytes)
    g0 = cluster.devices[0].node
    sent = sum(b for step in steps for s, _, b in step if s == g0)
    # the flows carry the payload in the wire bytes of the protocol NCCL's tuner picks (LL128 here: 8 B
    # flag per 120 B of data)
    cost = operation_cost(cluster.network, "all_to_all", comm.subgroups("ep")[0], a2a[0].nbytes)
    assert cost.wire_factor >= 1.0
    assert sent == pytest.approx(tokens * k * d * 2 * (ep - 1) / ep * cost.wire_factor)
    assert all(len(g) == ep for g in comm.subgroups("ep")) and len(comm.subgroups("ep")) == tp


def test_expert_flops_are_six_tokens_topk_times_the_expert_matrices():
    """Forward + backward expert GEMMs of one layer over a TP group: 2 x 3 x tokens x k x (3 D F)
    (SwiGLU: gate, up, down) - the experts' share of the model's own 6 x active params x tokens."""
    for ep, tp in ((1, 1), (4, 1), (8, 2)):
        fam, shape = family(ep=ep, tp=tp)
        forward = fam.layer_forward(shape)
        experts = sum(
            op.flop for op in forward + backward_pass(forward) if isinstance(op, Gemm) and op.name.startswith("expert")
        )
        k, d, f = MOE["experts_per_token"], MOE["hidden"], MOE["ffn"]
        assert experts * tp == pytest.approx(2 * 3 * SEQ * k * d * f * 3)
        spec = fam.spec
        assert experts * tp * spec.layers == pytest.approx(6 * SEQ * spec.layers * k * spec.expert_params)
    # the model FLOPs count active parameters: attention, router and k experts per layer, and the LM head
    dense = LLMFamily(TransformerSpec.model_validate(DENSE))
    router = 6 * SEQ * MOE["layers"] * MOE["hidden"] * MOE["experts"]
    assert fam.model_flop_per_sequence(SEQ) - dense.model_flop_per_sequence(SEQ) == pytest.approx(
        6 * SEQ * MOE["layers"] * (k - 1) * spec.expert_params + router
    )


def test_kernel_flops_of_a_run_add_up_to_the_model_flops():
    """Every driver's dense and attention kernels x the GPUs it stands for (tp x ep) = model FLOPs."""
    r = run(scenario({"parallelism": {"tp": 2, "ep": 2}, "simulate": {"replay": "off"}}))
    spans = r.spans
    kernels = spans[spans.category.isin(["dense", "attention"])]
    assert kernels.flop.sum() * 2 * 2 == pytest.approx(r.metrics["model_flop_per_iteration"], rel=1e-12)


def test_expert_weights_per_gpu_are_divided_by_ep():
    hw = scenario({}).hardware
    spec = MoETransformerSpec.model_validate(MOE)
    experts = spec.layers * spec.experts * spec.expert_params
    params = {}
    for ep in (1, 2, 4, 8):
        wl = scenario({"parallelism": {"tp": 1, "ep": ep}}).workload
        params[ep] = wl.memory(hw)[0].params_per_gpu
        assert params[ep] == pytest.approx(spec.params - experts + experts / ep)
    # optimizer state: dense over dp ranks, experts over the dp / ep ranks that hold them - the same total
    mems = [scenario({"parallelism": {"tp": 1, "ep": ep}}).workload.memory(hw)[0] for ep in (1, 8)]
    assert mems[0].optimizer == pytest.approx(mems[1].optimizer)
    assert mems[1].weights == pytest.approx(mems[0].weights * params[8] / params[1])


# ---- the network in the time ------------------------------------------------------------------------


def waits(result):
    """The drivers' all-to-all waits (not the network's per-flow spans, named `... [i] -> ...`)."""
    spans = result.spans
    return spans[spans.name.str.contains(r"ep all_to_all (?:dispatch|combine)(?:\.bwd)?$")]


def test_all_to_all_time_grows_as_the_nic_slows_and_is_charged_to_it():
    fast = run(scenario({}, nic={"base": "cx7-400g-rdma", "bandwidth": "400 Gbit/s"}))
    slow = run(scenario({}, nic={"base": "cx7-400g-rdma", "bandwidth": "50 Gbit/s"}))
    f, s = fast.metrics, slow.metrics
    assert s["breakdown_s"]["exposed_ep_s"] > 4 * f["breakdown_s"]["exposed_ep_s"] > 0
    assert s["iteration_s"] > f["iteration_s"]
    assert s["moe"]["exposed_alltoall_s"] == s["breakdown_s"]["exposed_ep_s"]
    a2a = waits(slow)
    assert len(a2a) and set(a2a.track) == {"nic"}  # the slowest peer is behind the NIC
    # inside one host the all-to-all runs on NVLink
    inside = run(scenario({}, nodes=2, gpus_per_node=4))
    a2a = waits(inside)
    assert len(a2a) and set(a2a.track) == {"scale_up"}


def test_the_capacity_factor_pads_experts_and_all_to_alls_not_model_flops():
    base = run(scenario({}, network="analytical")).metrics
    padded = run(scenario({"moe_capacity_factor": 1.5}, network="analytical")).metrics
    assert padded["moe"]["dispatch_bytes_per_gpu"] == pytest.approx(1.5 * base["moe"]["dispatch_bytes_per_gpu"])
    assert padded["model_flop_per_iteration"] == base["model_flop_per_iteration"]
    assert padded["iteration_s"] > base["iteration_s"] and padded["hfu"] > padded["mfu"]


# ---- dense path, determinism, presets, bad input ----------------------------------------------------


def test_a_dense_model_is_unchanged_by_ep_1():
    wl = {"model": DENSE, "parallelism": {"tp": 2, "dp": 4}}
    a = run(scenario(wl)).metrics
    b = run(scenario({**wl, "parallelism": {"tp": 2, "dp": 4, "ep": 1}})).metrics
    assert a == b
    assert "moe" not in a and "exposed_ep_s" not in a["breakdown_s"] and "ep" not in a["parallelism"]


def test_same_scenario_same_metrics():
    assert run(scenario({})).metrics == run(scenario({})).metrics


def test_mixtral_is_a_listed_preset_with_its_public_shape():
    m = MOE_PRESETS["mixtral-8x7b"]
    assert (m.layers, m.hidden, m.ffn, m.heads, m.kv_heads, m.vocab, m.experts, m.experts_per_token) == (
        32,
        4096,
        14336,
        32,
        8,
        32000,
        8,
        2,
    )
    assert m.params == pytest.approx(46.7e9, rel=2e-3)  # the paper's "47B"
    row = next(p for p in model_presets() if p.name == "mixtral-8x7b")
    assert "training" in row.workloads and "12.9 billion active" in row.shape
    assert "`mixtral-8x7b`" in models_markdown()
    sc = scenario({"model": "mixtral-8x7b", "global_batch_size": 64, "parallelism": {"tp": 1, "ep": 8}}, 8, 8)
    assert sc.workload.model == m


@pytest.mark.parametrize(
    "change,path,text",
    [
        ({"model": DENSE}, "workload.parallelism.ep", "needs a mixture-of-experts model"),
        ({"parallelism": {"tp": 1, "ep": 3}}, "workload.parallelism.ep", "divide the 8 experts"),
        ({"parallelism": {"tp": 1, "ep": 8, "dp": 4, "pp": 2}}, "workload.parallelism.ep", "divide dp"),
        (
            {"parallelism": {"tp": 2, "ep": 2}, "sequence_parallel": False},
            "workload.sequence_parallel",
            "sequence parallelism",
        ),
        ({"simulate": {"ranks": "representative"}}, "workload.simulate.ranks", "ep = 1"),
        ({"moe_capacity_factor": 0.5}, "workload.moe_capacity_factor", ""),
    ],
)
def test_bad_inputs_name_their_key(change, path, text):
    with pytest.raises(ScenarioError) as err:
        sc = scenario(change, network="analytical")
        run(sc)
    assert "\n" not in str(err.value) and text in str(err.value)
    assert err.value.path.startswith(path)
