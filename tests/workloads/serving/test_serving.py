"""`kind: serving` (sim/workloads/serving/): closed forms and invariants.

- one request alone, budget >= its prompt: its TTFT is cp_inference's TTFT for the same model,
  hardware and CP (the iteration cost model is cp_inference's per-layer plan, composed as its
  PhaseRun runs it on an idle network);
- tokens are conserved (every request emits exactly its output tokens, prompt tokens prefilled once
  without preemption), KV blocks never exceed capacity at any iteration;
- low load (M/D/1-like): requests that never overlap see TTFT = the lone prefill time and TPOT = the
  lone decode step time; a second request arriving during a prefill waits for it;
- the same seed gives identical metrics; bad input is a one-line error naming the key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sim import load_scenario, run
from sim.errors import ScenarioError
from sim.workloads.serving.scheduler import KvBlocks, ReplicaScheduler, Req

ROOT = Path(__file__).resolve().parents[3]

BASE = """
name: serve-unit
seed: 0
hardware: {{gpu: h100-sxm, gpus_per_node: 8, nodes: {nodes}, scale_up: nvlink4, nic: cx7-400g-rdma,
           topology: {{kind: single-switch}}}}
workload:
  kind: serving
  model: {model}
  pools: {pools}
  scheduler: {scheduler}
  {source}
"""


def scenario(
    tmp_path, nodes=1, model="llama3-8b", pools="[{name: a, replicas: 1, tp: 8}]", scheduler="{}", source="", sets=()
):
    path = tmp_path / "s.yaml"
    path.write_text(BASE.format(nodes=nodes, model=model, pools=pools, scheduler=scheduler, source=source))
    return load_scenario(str(path), list(sets))


def trace(tmp_path, rows, name="t.csv"):
    path = tmp_path / name
    path.write_text(
        "arrival_s,prompt_tokens,decode_tokens,cached_tokens\n" + "\n".join(",".join(map(str, r)) for r in rows)
    )
    return f"trace: {path}"


@pytest.mark.parametrize(
    "prompt,cached,nodes,cp",
    [(131072, 0, 2, 2), (8192, 0, 2, 2), (1024, 126976, 2, 2), (4000, 0, 1, 1)],
    ids=["128k-cp2", "8k-cp2", "pass-q-cached", "cp1"],
)
def test_a_lone_request_reproduces_cp_inference_ttft(tmp_path, prompt, cached, nodes, cp):
    cp_sets = [
        f"hardware.nodes={nodes}",
        f"workload.parallelism.cp={cp}",
        f"workload.requests.0.prompt_tokens={prompt}",
        f"workload.requests.0.cached_tokens={cached}",
        "workload.requests.0.decode_tokens=0",
        "workload.simulate.layers=2",
    ]
    reference = run(load_scenario(str(ROOT / "scenarios/cp-70b-h100-2hosts-128k.yaml"), cp_sets)).metrics["ttft_s"]
    s = scenario(
        tmp_path,
        nodes=nodes,
        model="llama3-70b",
        pools=f"[{{name: a, replicas: 1, tp: 8, cp: {cp}}}]",
        scheduler=f"{{max_batch_tokens: {prompt}}}",
        source=trace(tmp_path, [(0, prompt, 1, cached)]),
    )
    ttft = run(s).metrics["ttft_s"]
    assert ttft == pytest.approx(reference, rel=0.01)


def test_tokens_are_conserved_and_blocks_stay_within_capacity(tmp_path):
    rows = [(0.01 * i, 300 + 37 * i, 20 + (i % 7) * 9, 0) for i in range(60)]
    s = scenario(tmp_path, scheduler="{max_batch_tokens: 512, max_seqs: 32}", source=trace(tmp_path, rows))
    m = run(s).metrics
    assert m["requests_finished"] == 60 and m["requests_rejected"] == 0
    assert m["output_tokens"] == sum(r[2] for r in rows)
    assert m["prompt_tokens"] == sum(r[1] for r in rows)
    assert m["kv_utilisation_peak"] <= 1.0
    assert m["mean_batch_tokens"] <= 512


def _drive(scheduler: ReplicaScheduler, reqs: list[Req], limit=100000):
    """Run the pure scheduler to completion with unit iterations, checking the KV invariant."""
    for r in reqs:
        scheduler.add(r)
    t, done = 0.0, []
    for _ in range(limit):
        plan = scheduler.schedule()
        assert 0 <= scheduler.blocks.used <= scheduler.blocks.capacity
        held = sum(r.blocks for r in scheduler.running)
        assert held == scheduler.blocks.used
        if plan.empty:
            break
        assert len(plan.decodes) + sum(c for _, c in plan.prefills) <= scheduler.budget
        t += 1.0
        done += scheduler.advance(plan, t)
    return done


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_a_small_kv_cache_preempts_but_never_overflows_and_every_token_comes_out(preemption):
    blocks = KvBlocks(capacity=40, block_tokens=16)
    sched = ReplicaScheduler(blocks, max_batch_tokens=256, max_seqs=16, chunked=True, preemption=preemption)
    reqs = [Req(i, 0.0, 100 + 10 * i, 120) for i in range(8)]
    done = _drive(sched, reqs)
    assert sorted(r.id for r in done) == list(range(8))
    assert all(r.generated == 120 for r in done)
    assert sched.preemptions > 0 and blocks.used == 0


def test_low_load_ttft_and_tpot_are_the_lone_request_times(tmp_path):
    """Arrivals 10 s apart never overlap (service ~1 s): every request sees an idle replica (the
    M/D/1 queue's low-load limit: waiting time 0), so all TTFTs equal and all TPOTs equal."""
    rows = [(10.0 * i, 2000, 50, 0) for i in range(5)]
    m = run(scenario(tmp_path, source=trace(tmp_path, rows))).metrics
    assert m["ttft_p99_s"] == pytest.approx(m["ttft_p50_s"], rel=1e-9)
    assert m["tpot_p99_s"] == pytest.approx(m["tpot_p50_s"], rel=1e-9)
    assert m["e2e_p50_s"] == pytest.approx(m["ttft_p50_s"] + 49 * m["tpot_p50_s"], rel=1e-9)


def test_a_request_arriving_during_a_prefill_waits_for_it(tmp_path):
    """No chunking, budget = one prompt: the second request (arriving at 0+) queues behind the first
    prefill (service D), so its TTFT is about twice the first's (M/D/1 with two arrivals)."""
    rows = [(0.0, 8000, 1, 0), (1e-6, 8000, 1, 0)]
    m = run(
        scenario(tmp_path, scheduler="{max_batch_tokens: 8000, chunked_prefill: false}", source=trace(tmp_path, rows))
    ).metrics
    d = m["ttft_s"]
    assert m["ttft_p99_s"] == pytest.approx(2 * d, rel=0.02)


def test_poisson_runs_are_deterministic_and_the_seed_matters(tmp_path):
    src = "arrivals: {rate_per_s: 20, count: 60, prompt_tokens: {dist: lognormal, mean: 500}, decode_tokens: 30}"
    a = run(scenario(tmp_path, source=src)).metrics
    b = run(scenario(tmp_path, source=src)).metrics
    c = run(scenario(tmp_path, source=src, sets=["seed=1"])).metrics
    assert a == b and a != c


def test_disaggregated_requests_move_their_kv_and_finish(tmp_path):
    pools = "[{name: p, replicas: 1, tp: 8, role: prefill}, {name: d, replicas: 1, tp: 8, role: decode}]"
    rows = [(0.05 * i, 1000, 40, 0) for i in range(20)]
    m = run(scenario(tmp_path, nodes=2, pools=pools, source=trace(tmp_path, rows))).metrics
    assert m["requests_finished"] == 20 and m["output_tokens"] == 800
    kv_per_token = 32 * 2 * 8 * 128 * 2  # llama3-8b: layers x K,V x KV heads x head dim x bf16
    assert m["kv_transfer_bytes"] == pytest.approx(20 * 1000 * kv_per_token)
    assert m["kv_transfer_p50_s"] > 0


def test_mixtral_counts_active_parameters():
    from sim.models.moe import MOE_PRESETS

    m = MOE_PRESETS["mixtral-8x7b"]
    assert m.params / 1e9 == pytest.approx(46.7, abs=0.05)  # paper: 47B parameters, 13B active
    assert (m.dense_flop_per_token() / 2 + m.embedding_params) / 1e9 == pytest.approx(12.9, abs=0.05)


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("workload.pools.0.tp", "3", "workload.pools.0.tp"),
        ("workload.router", "random", "workload.router"),
        ("workload.pools.0.replicas", "9", "workload.pools"),
        ("workload.scheduler.gpu_memory_fraction", "0.01", "workload.pools.0"),
    ],
)
def test_bad_input_is_a_one_line_error_naming_the_key(tmp_path, field, value, words):
    with pytest.raises(ScenarioError) as err:
        scenario(
            tmp_path,
            source="arrivals: {rate_per_s: 1, count: 2, prompt_tokens: 10, decode_tokens: 2}",
            sets=[f"{field}={value}"],
        )
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_bad_trace_row_is_a_one_line_error(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("arrival_s,prompt_tokens,decode_tokens\n0,abc,3\n")
    with pytest.raises(ScenarioError) as err:
        scenario(tmp_path, source=f"trace: {path}")
    assert "workload.trace" in str(err.value) and "line 2" in str(err.value)
