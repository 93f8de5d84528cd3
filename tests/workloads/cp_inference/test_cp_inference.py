"""Context-parallel inference (`kind: cp_inference`): sharding arithmetic, closed forms, physics.

The physics tests run the real Llama 3 405B on the paper's hosts with one simulated layer per phase
(`simulate.layers: 1`, exact: see test_layer_replay_and_representative_ranks_match_full_simulation);
the equivalence tests run a tiny model with every rank and every layer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hardware_models import catalog
from sim.errors import ScenarioError
from sim.models.transformer import PRESETS, TensorShard, causal_keys_seen, resolve_model
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.cp_inference.ring_attention import ring_messages, step_keys_seen

TINY = {"name": "tiny", "layers": 3, "hidden": 1024, "ffn": 3584, "heads": 16, "kv_heads": 4, "vocab": 32000}
PAPER_GPU = "h100-96gb-500w-cp-calibrated"


def scenario(
    requests, nodes=4, gpus_per_node=8, gpu=PAPER_GPU, nic="cx7-400g-rdma", topology="single-switch", **workload
):
    wl = {
        "kind": "cp_inference",
        "model": "llama3-405b",
        "dtype": "bf16",
        "ffn_dtype": "fp8",
        "requests": requests,
        "simulate": {"layers": 1},
    }
    wl.update(workload)
    return scenario_from_dict(
        {
            "name": "t",
            "hardware": {
                "gpu": gpu,
                "gpus_per_node": gpus_per_node,
                "nodes": nodes,
                "scale_up": "nvlink4",
                "nic": nic,
                "topology": {"kind": topology},
            },
            "workload": wl,
        }
    )


def metrics(requests, **kw) -> dict:
    return run(scenario(requests, **kw)).metrics


def tiny(requests, ring="auto", ranks="all", layers="all", **kw):
    kw.setdefault("nodes", 4)
    kw.setdefault("gpus_per_node", 2)
    kw.setdefault("gpu", "h100-sxm")
    return scenario(
        requests,
        model=TINY,
        dtype="bf16",
        ffn_dtype="bf16",
        ring=ring,
        simulate={"ranks": ranks, "layers": layers},
        **kw,
    )


# ---- models and sharding arithmetic -----------------------------------------------------------


def test_presets_are_the_reference_architectures():
    m = PRESETS["llama3-405b"]
    assert (m.layers, m.hidden, m.ffn, m.heads, m.kv_heads, m.dim_per_head) == (126, 16384, 53248, 128, 8, 128)
    assert m.params == pytest.approx(405e9, rel=0.02)
    assert PRESETS["llama3-70b"].params == pytest.approx(70.6e9, rel=0.02)
    assert PRESETS["llama3-8b"].params == pytest.approx(8.03e9, rel=0.02)
    assert PRESETS["nemotron4-340b"].params == pytest.approx(341e9, rel=0.03)
    assert PRESETS["nemotron4-340b"].ffn_matrices == 2  # squared ReLU: no gate
    assert resolve_model(TINY).head_dim is None and resolve_model(TINY).dim_per_head == 64


@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("cached", [0, 1000])
def test_load_balanced_chunks_give_every_rank_the_same_work_and_the_causal_total(cp, cached):
    tokens = 2 * cp * 96
    per_rank = [
        [step_keys_seen(r, s, ring, tokens, math.ceil(cached / cp), cp) for s in range(cp)]
        for ring in ("pass-kv", "pass-q")
        for r in range(cp)
    ]
    assert all(row == per_rank[0] for row in per_rank)  # every rank, every step, both rings
    total = cp * sum(per_rank[0])
    assert total == pytest.approx(causal_keys_seen(tokens, cached if cached % cp == 0 else cp * math.ceil(cached / cp)))


def test_ring_messages_are_the_papers_sizes_summed_over_tp_and_ring():
    """Q message T*D*e and KV message 2(T+P)*D*e*NKV/NH, split over N ranks and tp GPUs."""
    model, tp, cp, t, p, e = PRESETS["llama3-405b"], 8, 4, 131072, 65536, 2
    shard = TensorShard(model, tp)
    msg = ring_messages(t // cp, (t + p) // cp, shard.q_heads, shard.kv_heads, shard.head_dim, e)
    assert cp * tp * msg.q == t * model.hidden * e
    assert cp * tp * msg.kv == 2 * (t + p) * model.hidden * e * model.kv_heads / model.heads


# ---- closed forms -----------------------------------------------------------------------------


def test_one_gpu_prefill_is_the_sum_of_its_kernel_times():
    """tp = cp = 1: no communication; TTFT = layers x (kernels of a layer) + final norm and LM head."""
    dev = catalog.device("h100-sxm")
    m, t, e = resolve_model(TINY), 4096, 2
    hd, d, f = m.dim_per_head, m.hidden, m.ffn
    layer = (
        dev.memory_time_s(4 * t * d * e)
        + dev.gemm_time_s(t, (m.heads + 2 * m.kv_heads) * hd, d)
        + dev.memory_time_s(2 * t * (m.heads + m.kv_heads) * hd * e)
        + dev.attention_time_s(
            t * m.heads // m.kv_heads,
            t,
            m.kv_heads,
            hd,
            kv_heads=m.kv_heads,
            flop=m.attention_flop(causal_keys_seen(t)) / m.layers,
        )
        + dev.gemm_time_s(t, d, m.heads * hd)
        + dev.memory_time_s(4 * t * d * e)
        + dev.gemm_time_s(t, 2 * f, d)
        + dev.memory_time_s(3 * t * f * e)
        + dev.gemm_time_s(t, d, f)
    )
    final = dev.memory_time_s(2 * d * e) + dev.gemm_time_s(1, m.vocab, d)
    got = run(tiny([{"prompt_tokens": t}], nodes=1, gpus_per_node=1)).metrics
    assert got["ttft_s"] == pytest.approx(m.layers * layer + final, rel=1e-9)
    assert got["ring_algorithm"] == "none"
    flop = m.dense_flop_per_token() * t + m.attention_flop(causal_keys_seen(t)) + 2 * m.vocab * d
    assert got["achieved_tflop_per_s_per_gpu"] * 1e12 == pytest.approx(flop / got["ttft_s"])
    assert got["mfu"] == pytest.approx(got["achieved_tflop_per_s_per_gpu"] * 1e12 / dev.peak.bf16)


def test_decode_cannot_beat_streaming_the_weights_and_kv_cache():
    m = metrics([{"prompt_tokens": 1, "cached_tokens": 131071, "decode_tokens": 2}], nodes=1)
    dev = catalog.device(PAPER_GPU)
    mem = m["memory_per_gpu_bytes"]
    assert m["decode_s_per_token"] > (mem["weights"] + mem["kv_cache"]) / dev.memory_bandwidth


# ---- fidelity shortcuts are exact --------------------------------------------------------------


@pytest.mark.parametrize("ring", ["pass-kv", "pass-q", "auto"])
def test_layer_replay_and_representative_ranks_match_full_simulation(ring):
    requests = [{"prompt_tokens": 8192, "decode_tokens": 2}, {"prompt_tokens": 512, "cached_tokens": 16000}]
    full_run = run(tiny(requests, ring, ranks="all", layers="all"))
    full = full_run.metrics
    for ranks, layers in (("all", 1), ("representative", "all"), ("representative", 2)):
        fast_run = run(tiny(requests, ring, ranks=ranks, layers=layers))
        fast = fast_run.metrics
        for key in ("ttft_s_per_request", "decode_s_per_token"):
            np.testing.assert_allclose(fast[key], full[key], rtol=1e-9)
        assert fast["ring_algorithm_per_request"] == full["ring_algorithm_per_request"]
        for key, value in full["prefill_breakdown_s"].items():
            assert fast["prefill_breakdown_s"][key] == pytest.approx(value, rel=1e-9, abs=1e-15)
        # every GPU's activity (mirrored ranks, replayed layers) is that of the full simulation
        for a, b in zip(fast_run.cluster.devices, full_run.cluster.devices):
            assert a.busy_s == pytest.approx(b.busy_s, rel=1e-9) and a.flop_done == pytest.approx(b.flop_done)
        if "energy_j_by_class" in full:
            assert fast["energy_j_by_class"]["gpu"] == pytest.approx(full["energy_j_by_class"]["gpu"], rel=1e-9)


def test_every_gpu_sends_n_minus_1_ring_blocks_per_layer_overlapping_attention():
    result = run(tiny([{"prompt_tokens": 8192}], "pass-kv"))
    spans = result.spans
    sends = spans[(spans.track == "comm") & spans.name.str.contains("pass-kv send")]
    per_gpu_layer = sends.groupby([sends.component, sends.name.str.split().str[0]]).size()
    assert len(per_gpu_layer) == 8 * TINY["layers"] and (per_gpu_layer == 4 - 1).all()
    attention = spans[(spans.track == "compute") & spans.name.str.contains("attention step")]
    starts = set(zip(attention.component, attention.start_s.round(15)))
    assert all((c, round(s, 15)) in starts for c, s in zip(sends.component, sends.start_s))  # same instant


def test_breakdown_adds_up_to_the_prefill_time():
    m = metrics([{"prompt_tokens": 8192}], nic="tcp-100g", ring="pass-kv")
    parts = {k: v for k, v in m["prefill_breakdown_s"].items() if k != "total"}
    assert sum(parts.values()) == pytest.approx(m["ttft_s"], rel=1e-9)
    assert set(parts) >= {"dense", "attention", "merge", "ring_exposed", "tp_allreduce"}


# ---- physics ------------------------------------------------------------------------------------


def test_ttft_grows_superlinearly_with_context():
    short, long = (metrics([{"prompt_tokens": t}], nodes=1)["ttft_s"] for t in (16384, 65536))
    assert long > 4.4 * short


def test_doubling_cp_hosts_roughly_halves_a_compute_bound_prefill():
    ttft = {n: metrics([{"prompt_tokens": 131072}], nodes=n)["ttft_s"] for n in (1, 2, 4)}
    assert 0.48 < ttft[2] / ttft[1] < 0.56 and 0.48 < ttft[4] / ttft[2] < 0.56


def test_ttft_rises_when_nic_bandwidth_drops():
    fast = metrics([{"prompt_tokens": 32768}])["ttft_s"]
    slow = metrics([{"prompt_tokens": 32768}], nic={"base": "cx7-400g-rdma", "bandwidth": "10 Gbit/s"})["ttft_s"]
    assert slow > 1.2 * fast


def test_a_background_flow_on_the_ring_links_raises_ttft():
    req = [{"prompt_tokens": 16384}]
    alone = run(tiny(req, "pass-kv", nic="tcp-100g")).metrics
    shared = run(tiny(req, "pass-kv", nic="tcp-100g", background=[{"src": 0, "dst": 2, "bytes": "10 GB"}])).metrics
    assert shared["simulated_ranks"] == "all"
    assert shared["ttft_s"] > 1.05 * alone["ttft_s"]
    assert shared["prefill_breakdown_s"]["ring_exposed"] > alone["prefill_breakdown_s"]["ring_exposed"]


def test_slow_tcp_hosts_expose_pass_kv_communication_at_short_prompts():
    tcp = metrics([{"prompt_tokens": 8192}], nic="tcp-100g", ring="pass-kv")["prefill_breakdown_s"]
    rdma = metrics([{"prompt_tokens": 131072}], ring="pass-kv")["prefill_breakdown_s"]
    assert tcp["ring_exposed"] > 0.2 * tcp["total"]
    assert rdma["ring_exposed"] == 0.0


def test_pass_q_wins_at_low_miss_rates_and_pass_kv_at_full_prefill_and_auto_follows():
    low_miss = [{"prompt_tokens": 1311, "cached_tokens": 129761}]
    full = [{"prompt_tokens": 131072}]
    for req, winner in ((low_miss, "pass-q"), (full, "pass-kv")):
        t = {ring: metrics(req, ring=ring)["ttft_s"] for ring in ("pass-kv", "pass-q")}
        assert min(t, key=t.get) == winner
        assert metrics(req)["ring_algorithm"] == winner


def test_auto_heuristic_uses_achieved_bandwidth_and_compute():
    req = [{"prompt_tokens": 8192}]
    rdma = metrics(req)["ring_choice"]
    tcp = metrics(req, nic="tcp-100g")["ring_choice"]
    assert rdma["miss_rate_threshold"] == 2 * 8 / 128
    assert rdma["ring_bandwidth_bytes_per_s"] > 10 * tcp["ring_bandwidth_bytes_per_s"]
    ratio = tcp["hide_threshold_tokens"] / rdma["hide_threshold_tokens"]
    assert ratio == pytest.approx(rdma["ring_bandwidth_bytes_per_s"] / tcp["ring_bandwidth_bytes_per_s"])


def test_fp8_ffn_is_faster_than_bf16():
    bf16 = metrics([{"prompt_tokens": 32768}], nodes=1, ffn_dtype="bf16", gpu={"base": PAPER_GPU, "memory": "200 GB"})
    fp8 = metrics([{"prompt_tokens": 32768}], nodes=1)
    assert fp8["ttft_s"] < 0.85 * bf16["ttft_s"]


def test_multi_node_tp_sends_its_all_reduces_over_the_nics():
    result = run(tiny([{"prompt_tokens": 2048}], nodes=2, gpus_per_node=4, parallelism={"tp": 8}))
    assert result.metrics["cp"] == 1
    links = result.links
    assert links.loc[links.kind == "nic", "bytes"].sum() > 0


# ---- serving ---------------------------------------------------------------------------------------


def test_poisson_arrivals_are_seeded_and_served_first_come_first_served():
    arrivals = {"rate_per_s": 50.0, "count": 12, "prompt_tokens": 4096, "decode_tokens": 2}
    sc = tiny([], arrivals=arrivals, layers=1, ranks="representative", nodes=2)
    a, b = run(sc).metrics, run(sc).metrics
    assert a == b
    other = run(scenario_from_dict({**sc.model_dump(mode="json"), "seed": 1})).metrics
    assert other["ttft_s_per_request"] != a["ttft_s_per_request"]
    ttft, queue, prefill = (
        np.array(a[k]) for k in ("ttft_s_per_request", "queue_s_per_request", "prefill_s_per_request")
    )
    assert (queue >= 0).all() and queue.max() > 0 and np.allclose(ttft, queue + prefill)
    assert a["ttft_p99_s"] >= a["ttft_p50_s"] > 0 and a["ttit_p99_s"] >= a["ttit_p50_s"] > 0


def test_tokens_count_prompt_and_decode_tokens_and_give_energy_per_token():
    m = run(
        tiny(
            [{"prompt_tokens": 4096, "decode_tokens": 3}, {"prompt_tokens": 2048, "cached_tokens": 1024}],
            layers=1,
            ranks="representative",
            nodes=2,
        )
    ).metrics
    assert m["tokens"] == 4096 + 3 + 2048  # cached tokens are not processed again
    assert m["energy_per_token_j"] == pytest.approx(m["energy_j"] / m["tokens"])


# ---- errors ----------------------------------------------------------------------------------------


def _error(**kw) -> str:
    with pytest.raises(ScenarioError) as err:
        scenario([{"prompt_tokens": 8192}], **kw)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_memory_check_gives_the_numbers():
    text = _error(nodes=1, gpu="h100-sxm", ffn_dtype="bf16")
    assert "workload.model" in text and "weights 101." in text and "80.0 GB" in text
    scenario([{"prompt_tokens": 8192}], nodes=1, gpu="h100-sxm", dtype="fp8", ffn_dtype="fp8")  # fits
    scenario([{"prompt_tokens": 8192}], nodes=1, gpu="h100-sxm", model="nemotron4-340b", dtype="fp8", ffn_dtype="fp8")


def test_bad_configurations_are_one_line_errors():
    assert "tp x cp" in _error(parallelism={"tp": 8, "cp": 2})
    assert "workload.model" in _error(model="llama9")
    assert "workload.ffn_dtype" in _error(gpu="a100-sxm-80gb", nodes=8)
    assert "workload.simulate.ranks" in _error(topology="fat-tree", simulate={"ranks": "representative"})
    assert "requests" in _error(arrivals={"rate_per_s": 1, "count": 2, "prompt_tokens": 10})


def test_ring_choice_follows_the_modelled_attention_and_picks_the_faster_ring():
    """Persistent KV cache, 128K context on 4 hosts, miss rates 1% .. 50%: the paper's criterion
    (Algorithm 1 + the All2All term) evaluated on the modelled attention kernel (C = the steady step's
    FLOPs over its modelled time, split-KV and SM fill included) picks pass-Q at low miss rates and
    pass-KV at high ones, and in each case the ring that the simulation finds faster."""
    ctx = 131072
    requests = [{"prompt_tokens": t, "cached_tokens": ctx - t} for t in (1311, 1966, 3277, 13107, 65536)]
    forced = {ring: metrics(requests, ring=ring)["prefill_s_per_request"] for ring in ("pass-kv", "pass-q")}
    auto = metrics(requests)
    rings = auto["ring_algorithm_per_request"]
    assert rings[0] == "pass-q" and rings[-1] == "pass-kv"
    assert rings == sorted(rings, key=["pass-q", "pass-kv"].index)  # one crossover in the miss rate
    for i, (ring, choice, bd) in enumerate(
        zip(rings, auto["ring_choice_per_request"], auto["prefill_breakdown_s_per_request"])
    ):
        kv, q = forced["pass-kv"][i], forced["pass-q"][i]
        assert ring == ("pass-kv" if kv < q else "pass-q"), (i, kv, q)
        assert auto["prefill_s_per_request"][i] == pytest.approx(min(kv, q), rel=1e-9)
        # the decision's inputs are the modelled kernel's (steady pass-KV step: the decision's plan)
        paper = (
            choice["miss_rate"] >= choice["miss_rate_threshold"]
            or math.ceil(requests[i]["prompt_tokens"] / 8) * 8 >= choice["hide_threshold_tokens"]  # padded to 2N
            or choice["exposed_pass_kv_s"] <= choice["exposed_pass_q_s"]
        )
        assert ring == ("pass-kv" if paper else "pass-q")
        if ring == "pass-kv":
            kernel = bd["attention_kernel"]
            assert choice["achieved_attention_flop_per_s"] == pytest.approx(kernel["flop"] / kernel["time_s"])
    low = auto["prefill_breakdown_s_per_request"][0]["attention_kernel"]
    assert low["splits"] > 1 and low["sm_fill"] < 1  # few query rows: split over the KV length


def test_decode_costs_show_a_kv_read_bound_split_attention():
    m = metrics([{"prompt_tokens": 1, "cached_tokens": 131071, "decode_tokens": 1}], nodes=1)
    k = m["decode_costs"]["attention_kernel"]
    assert k["bound"] == "memory" and k["splits"] > 1 and k["bandwidth_fill"] == 1.0
    assert m["decode_costs"]["kv_read_hbm_s"] <= m["decode_breakdown_s"]["attention"]
