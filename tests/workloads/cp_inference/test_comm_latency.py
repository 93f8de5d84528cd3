"""NCCL's per-operation latency in context-parallel inference (sim/network/operation_cost.py).

Every ring send, All2All and TP all-reduce is one NCCL operation and pays NCCL's base latency plus
its hop latency (sim/network/nccl.py) on top of its bytes. On an idle network a send of a one-step
NCCL plan therefore takes exactly the plan's estimate: base + max(hop, path latency) + wire bytes /
bandwidth; a decode step is its kernels plus, per layer and ring step, whatever of the send the
attention does not hide, plus the All2All.
"""

from __future__ import annotations

import pytest
from test_cp_inference import TINY, metrics, tiny

from hardware_models import catalog
from sim.models.transformer import resolve_model
from sim.network import nccl
from sim.network.operation_cost import operation_cost
from sim.runner import run
from sim.workloads.cp_inference.plan import Phase, Precision, plan_layer


def _seconds(kernels) -> float:
    return sum(k.duration_s for k in kernels)


@pytest.mark.parametrize("cp", [2, 4])
def test_a_decode_step_is_kernels_plus_unhidden_sends_plus_all2all_in_closed_form(cp):
    """tp = 1, cp hosts, a short context (attention shorter than a send): per layer, the ring step
    s < cp-1 lasts max(attention, send), the last step its attention, then the All2All; each send
    and the All2All take their NCCL plan's estimate (base + hop latency + bytes / bandwidth)."""
    cached = 4095
    result = run(tiny([{"prompt_tokens": 1, "cached_tokens": cached, "decode_tokens": 1}], nodes=cp, gpus_per_node=1))
    net, devs = result.cluster.network, [d.node for d in result.cluster.devices]
    model, gpu = resolve_model(TINY), catalog.device("h100-sxm")
    plan = plan_layer(model, gpu, 1, cp, Phase("decode", 1, cached + 1), "pass-kv", Precision())
    send = operation_cost(net, "send_recv", devs[:2], plan.ring_send_bytes)
    a2a = operation_cost(net, "all_to_all", devs, cp * plan.exchange_bytes)
    assert send.protocol == "LL" and a2a.protocol == "LL"  # small messages: NCCL's low-latency protocol
    # NCCL's LL base latency, plus what its network hop latency exceeds the path latency the flow pays
    hop_beyond_path = max(0.0, nccl.HOP_LATENCY_US["net"]["ring"]["LL"] * 1e-6 - send.costs.wire_latency_s[0])
    assert send.software_latency_s == pytest.approx(nccl.BASE_LATENCY_US["ring"]["LL"] * 1e-6 + hop_beyond_path)
    attention = _seconds(plan.ring_steps[0])
    assert attention < send.plan.estimate_s  # the sends are exposed: the latency shows
    layer = (
        _seconds(plan.pre_attention)
        + (cp - 1) * max(attention, send.plan.estimate_s)
        + _seconds(plan.ring_steps[-1])
        + a2a.plan.estimate_s
        + _seconds(plan.post_exchange + plan.out_proj + plan.ffn)
    )
    expected = model.layers * layer + _seconds(plan.final)
    m = result.metrics
    assert m["decode_s_per_token"] == pytest.approx(expected, rel=1e-9)
    lat = m["decode_comm_latency_s"]
    assert lat["ring_sends"] == pytest.approx(model.layers * (cp - 1) * send.software_latency_s)
    assert lat["all2all"] == pytest.approx(model.layers * a2a.software_latency_s)
    assert lat["tp_allreduce"] == 0.0
    parts = {k: v for k, v in m["decode_breakdown_s"].items() if k != "total"}
    assert sum(parts.values()) == pytest.approx(m["decode_breakdown_s"]["total"], rel=1e-9)


def test_decode_per_token_grows_with_the_host_count():
    """Llama 3 405B at 128K, TP8 per host: more hosts split the attention but add cp-1 pass-Q sends
    and an All2All per layer, each paying NCCL's per-operation latency."""
    req = [{"prompt_tokens": 1, "cached_tokens": 131071, "decode_tokens": 1}]
    runs = {n: metrics(req, nodes=n, parallelism={"tp": 8, "cp": n}) for n in (1, 2, 4)}
    per_token = {n: m["decode_s_per_token"] for n, m in runs.items()}
    assert per_token[1] < per_token[2] < per_token[4]
    latency = {n: m["decode_comm_latency_s"]["total"] for n, m in runs.items()}
    assert latency[1] < latency[2] < latency[4]
    layers = resolve_model("llama3-405b").layers
    assert runs[1]["decode_comm_latency_s"]["ring_sends"] == 0.0
    # the ring sends' latency scales with cp - 1 sends per layer
    per_send = runs[2]["decode_comm_latency_s"]["ring_sends"] / layers
    assert runs[4]["decode_comm_latency_s"]["ring_sends"] == pytest.approx(3 * layers * per_send)
    # two TP all-reduces per layer, each paying at least NCCL's smallest base latency
    smallest = min(v for table in nccl.BASE_LATENCY_US.values() for v in table.values() if v > 0) * 1e-6
    assert runs[1]["decode_comm_latency_s"]["tp_allreduce"] >= 2 * layers * smallest
