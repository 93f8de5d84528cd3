"""Property tests (hypothesis): invariants that must hold for *every* input, not just the examples.

- Max-min fairness (sim/network/max_min.py `max_min_fair`, `max_min_rates`): no link carries more than its
  capacity, and no flow can gain without a flow with a lower or equal rate losing. Checked twice:
  by the characterisation (every flow crosses a saturated link on which its rate is the largest)
  and straight from the definition with a linear program per flow.
- Flow-network runs (`FlowNetwork`): at every rate recomputation no link is over capacity; bytes
  are conserved per link (the routes' share of every flow), in total and end to end; no flow
  finishes before latency + bytes / its slowest link; with and without ECMP splitting and with
  step replay on and off (identical results).
- Collectives (sim/network/collectives.py): the nccl-tests closed forms over random sizes and group shapes
  on single-switch clusters, on both backends, and the bytes each op puts on the wire.
- Workloads on small random configs: bytes and samples conserved, utilisations <= 1, spans inside
  the simulated time, breakdowns that add up, times monotone in the work.

The default run keeps `max_examples` small (about a minute in all); `pytest -m slow` runs the long
fuzz versions of the same properties.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from sim.network.collectives import collective
from sim.network.max_min import flow_matrix, max_min_fair, max_min_rates
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from tests.conftest import make_cluster

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# whole simulations: few examples and no shrinking (each example is a run; a failure prints its inputs)
RUNS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
SLOW = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-9


# ---------------------------------------------------------------------------------------------
# max-min fairness of one rate allocation


@st.composite
def flow_sets(draw, weighted: bool = False):
    """(links x flows) incidence with random capacities; some flows cross no link (rate inf)."""
    n_links = draw(st.integers(1, 7))
    capacity = np.array(draw(st.lists(st.floats(0.5, 1e3), min_size=n_links, max_size=n_links)))
    paths = draw(st.lists(st.lists(st.integers(0, n_links - 1), min_size=0, max_size=5), min_size=1, max_size=10))
    lengths = np.array([len(p) for p in paths], dtype=np.int64)
    flat = np.array([link for p in paths for link in p], dtype=np.int64)
    weights = None
    if weighted:
        weights = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=len(flat), max_size=len(flat))))
    return flow_matrix(lengths, flat, n_links, weights), capacity


def check_max_min(matrix, capacity: np.ndarray, rate: np.ndarray) -> None:
    dense = matrix.toarray()
    finite = np.isfinite(rate)
    crosses = dense.sum(axis=0) > 0
    assert np.array_equal(finite, crosses), "exactly the flows that cross no link are unconstrained"
    assert (rate[finite] > 0).all()
    load = dense[:, finite] @ rate[finite]
    assert (load <= capacity * (1 + TOL) + TOL).all(), "a link carries more than its capacity"
    saturated = load >= capacity * (1 - 1e-7)
    for f in np.flatnonzero(finite):
        on = (dense[:, f] > 0) & saturated
        assert on.any(), f"flow {f} crosses no saturated link: it could still grow"
        # the characterisation: on one of its saturated links, no flow has a higher rate
        best = [rate[(dense[link] > 0) & finite].max() for link in np.flatnonzero(on)]
        assert max(rate[f] / b for b in best) >= 1 - 1e-7, f"flow {f} is not the largest on any bottleneck"


def check_no_gain_without_a_poorer_flow_losing(matrix, capacity: np.ndarray, rate: np.ndarray) -> None:
    """The definition: maximise flow f's rate keeping every flow with rate <= rate[f] at its rate."""
    dense = matrix.toarray()
    finite = np.flatnonzero(np.isfinite(rate))
    a = dense[:, finite]
    r = rate[finite]
    for i in range(len(finite)):
        lower = np.zeros(len(finite))
        keep = r <= r[i] * (1 + 1e-12)
        keep[i] = False
        lower[keep] = r[keep] * (1 - 1e-9)
        cost = np.zeros(len(finite))
        cost[i] = -1.0
        res = linprog(cost, A_ub=a, b_ub=capacity, bounds=list(zip(lower, [None] * len(finite))), method="highs")
        assert res.status == 0
        assert -res.fun <= r[i] * (1 + 1e-6) + 1e-9, (
            f"flow {i} could gain {-res.fun - r[i]:.3g} without a poorer flow losing"
        )


@FAST
@given(flow_sets())
def test_max_min_rates_fill_links_fairly(case):
    matrix, capacity = case
    rate = max_min_fair(matrix, capacity)
    check_max_min(matrix, capacity, rate)
    check_no_gain_without_a_poorer_flow_losing(matrix, capacity, rate)


@FAST
@given(flow_sets(weighted=True))
def test_weighted_max_min_rates_ecmp_fractions(case):
    """ECMP splitting puts a fraction of a flow on each path's links: the same properties hold."""
    matrix, capacity = case
    rate = max_min_fair(matrix, capacity)
    check_max_min(matrix, capacity, rate)
    check_no_gain_without_a_poorer_flow_losing(matrix, capacity, rate)


def test_max_min_rates_closed_form_two_links():
    # flows 0 and 1 share link 0 (cap 10); flow 1 also crosses link 1 (cap 2): 1 gets 2, 0 gets 8
    rate = max_min_rates([[0], [0, 1], []], np.array([10.0, 2.0]))
    assert rate[:2] == pytest.approx([8.0, 2.0]) and np.isinf(rate[2])


@pytest.mark.slow
@SLOW
@given(flow_sets(weighted=True))
def test_max_min_fuzz_long(case):
    matrix, capacity = case
    rate = max_min_fair(matrix, capacity)
    check_max_min(matrix, capacity, rate)
    check_no_gain_without_a_poorer_flow_losing(matrix, capacity, rate)


# ---------------------------------------------------------------------------------------------
# flow-network runs

TOPOLOGIES = st.sampled_from(
    [
        ({"kind": "single-switch"}, 1),
        ({"kind": "single-switch"}, 2),
        ({"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2, "oversubscription": 2, "aggregate_spines": False}, 1),
        ({"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 3}, 2),
        ({"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2, "ecmp": "hash"}, 1),
    ]
)


@st.composite
def network_runs(draw):
    topology, gpus_per_node = draw(TOPOLOGIES)
    nodes = draw(st.sampled_from([2, 4, 6]) if topology["kind"] == "fat-tree" else st.integers(2, 6))
    n = nodes * gpus_per_node
    flows = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(1e3, 5e8), st.floats(0, 2e-3)),
            min_size=1,
            max_size=16,
        )
    )
    return topology, gpus_per_node, nodes, flows


def run_flows(topology, gpus_per_node, nodes, flows, replay=True, collective_op=None):
    """Start each (src, dst, bytes, at_s) flow at its time; returns (cluster, finish time per flow)."""
    cluster = make_cluster("flow", nodes=nodes, gpus_per_node=gpus_per_node, topology=topology)
    net = cluster.network
    net.replay = replay
    overloads = []
    recompute = net._recompute

    def checked_recompute():  # capacity at every rate change, not just on average
        recompute()
        if net._matrix is not None:
            load = net._matrix @ net._rate
            overloads.append(float(np.max(load / net._capacity)))

    net._recompute = checked_recompute
    sim, finish = cluster.sim, [None] * len(flows)

    def one(i, s, d, b, at):
        yield sim.timeout(at)
        yield net.transfer(cluster.devices[s].node, cluster.devices[d].node, b)
        finish[i] = sim.now

    for i, (s, d, b, at) in enumerate(flows):
        sim.process(one(i, s, d, b, at))
    if collective_op is not None:
        group = cluster.nodes(range(cluster.num_gpus))  # the lock-step schedule: its steps are replayed
        proc, _ = collective(net, collective_op, group, 64e6, "ring", protocol=None)
        proc.callbacks.append(lambda _e: finish.append(sim.now))  # the collective's end, last
    sim.env.run()
    assert max(overloads, default=0.0) <= 1 + 1e-9, "a link was over capacity"
    return cluster, finish


def expected_link_bytes(cluster, flows) -> np.ndarray:
    """Per link: each flow's bytes split evenly over its equal-cost paths."""
    topo = cluster.topology
    out = np.zeros(topo.num_links)
    for s, d, b, _ in flows:
        paths = topo.routes(cluster.devices[s].node, cluster.devices[d].node)
        for p in paths:
            np.add.at(out, list(p), b / len(paths))
    return out


@RUNS
@given(network_runs())
def test_flow_network_conserves_bytes_and_respects_capacity(case):
    topology, gpn, nodes, flows = case
    cluster, finish = run_flows(topology, gpn, nodes, flows)
    net, topo = cluster.network, cluster.topology
    total = sum(b for _, _, b, _ in flows)
    assert all(t is not None for t in finish), "every flow completes"
    assert net.bytes_sent == pytest.approx(total) and net.bytes_delivered == pytest.approx(total)
    hops = sum(b * len(topo.routes(cluster.devices[s].node, cluster.devices[d].node)[0]) for s, d, b, _ in flows)
    assert net.link_bytes.sum() == pytest.approx(hops, rel=1e-6), "bytes x hops conserved in total"
    if topology.get("ecmp", "even") == "even":
        assert net.link_bytes == pytest.approx(expected_link_bytes(cluster, flows), rel=1e-6, abs=1.0)
    busy = net.link_busy_s
    assert (net.link_bytes <= topo.capacity * busy * (1 + 1e-6) + 1.0).all(), "utilisation while busy <= 1"
    assert (busy <= cluster.sim.now * (1 + 1e-12)).all()
    for (s, d, b, at), t in zip(flows, finish):
        paths = topo.routes(cluster.devices[s].node, cluster.devices[d].node)
        fastest = min(
            topo.path_latency_s(p) + b / len(paths) / topo.capacity[list(p)].min() if p else 0.0 for p in paths
        )
        assert t - at >= fastest * (1 - 1e-9), "no flow beats its own path's latency + bytes / bottleneck"


@RUNS
@given(network_runs(), st.sampled_from(["all_reduce", "all_gather", "all_to_all"]))
def test_step_replay_changes_nothing(case, op):
    """A ring collective's repeated steps are replayed; flows that start during a replay
    materialise it. Results must equal the plain recomputation exactly (up to rounding)."""
    topology, gpn, nodes, flows = case
    if topology.get("ecmp") == "hash":
        topology = {k: v for k, v in topology.items() if k != "ecmp"}
    plain, t_plain = run_flows(topology, gpn, nodes, flows, replay=False, collective_op=op)
    fast, t_fast = run_flows(topology, gpn, nodes, flows, replay=True, collective_op=op)
    assert fast.sim.now == pytest.approx(plain.sim.now, rel=1e-9)
    assert t_fast == pytest.approx(t_plain, rel=1e-9)
    assert fast.network.link_bytes == pytest.approx(plain.network.link_bytes, rel=1e-6, abs=1.0)
    assert fast.network.bytes_delivered == pytest.approx(plain.network.bytes_delivered)


def test_a_transfer_starting_during_a_replayed_step():
    """Found by test_step_replay_changes_nothing: the recorded trajectory took flows that arrived at
    a breakpoint but were admitted just after its snapshot for finished ones, so a transfer starting
    during the replay ended the step early and lost its bytes (fixed in sim/network/replay.py)."""
    flows = [(0, 0, 1000.0, 8.788336057847339e-4)]  # a local copy while the 2nd ring step replays
    plain, t_plain = run_flows({"kind": "single-switch"}, 1, 2, flows, replay=False, collective_op="all_reduce")
    fast, t_fast = run_flows({"kind": "single-switch"}, 1, 2, flows, replay=True, collective_op="all_reduce")
    assert fast.network.replayed_steps == 1
    assert t_fast == pytest.approx(t_plain, rel=1e-12)
    assert fast.network.link_bytes == pytest.approx(plain.network.link_bytes, rel=1e-9)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(network_runs(), st.sampled_from(["all_reduce", "all_gather", "all_to_all", None]))
def test_flow_network_fuzz_long(case, op):
    topology, gpn, nodes, flows = case
    if op is not None and topology.get("ecmp") == "hash":
        topology = {k: v for k, v in topology.items() if k != "ecmp"}
    plain, t_plain = run_flows(topology, gpn, nodes, flows, replay=False, collective_op=op)
    fast, t_fast = run_flows(topology, gpn, nodes, flows, replay=True, collective_op=op)
    if topology.get("ecmp") != "hash":  # hash draws paths from the rng: same order, same draws
        assert t_fast == pytest.approx(t_plain, rel=1e-9)
        assert fast.network.link_bytes == pytest.approx(plain.network.link_bytes, rel=1e-6, abs=1.0)


# ---------------------------------------------------------------------------------------------
# collectives: closed forms over random sizes and group shapes

WIRE_BYTES = {  # bytes all ranks put on the wire, n ranks, nccl-tests size S
    "all_reduce": lambda n, s: 2 * (n - 1) * s,
    "all_gather": lambda n, s: (n - 1) * s,
    "reduce_scatter": lambda n, s: (n - 1) * s,
    "all_to_all": lambda n, s: (n - 1) * s,
    "send_recv": lambda n, s: n * s,
}
CLOSED_FORM = {  # time on one switch, one GPU per host: NIC bandwidth B, per-hop latency a
    ("all_reduce", "ring"): lambda n, s, b, a: 2 * (n - 1) * (s / n / b + a),
    ("all_gather", "ring"): lambda n, s, b, a: (n - 1) * (s / n / b + a),
    ("reduce_scatter", "ring"): lambda n, s, b, a: (n - 1) * (s / n / b + a),
    ("all_to_all", "direct"): lambda n, s, b, a: (n - 1) / n * s / b + a,
    ("all_to_all", "ring"): lambda n, s, b, a: (n - 1) * (s / n / b + a),
    ("send_recv", "direct"): lambda n, s, b, a: s / b + a,
}
# the analytical backend has no contention: a direct all-to-all's n-1 flows per NIC each get all of it


@RUNS
@given(
    st.sampled_from(sorted(CLOSED_FORM)),
    st.integers(2, 9),
    st.floats(1e4, 2e9),
    st.sampled_from(["flow", "analytical"]),
)
def test_collective_closed_forms_on_one_switch(op_algo, n, size, model):
    op, algo = op_algo
    cluster = make_cluster(model, nodes=n)
    topo, net = cluster.topology, cluster.network
    b = cluster.hardware.nic.achieved_bytes_per_s
    a = topo.path_latency_s(topo.routes(cluster.devices[0].node, cluster.devices[1].node)[0])
    proc, used = collective(net, op, cluster.nodes(range(n)), size, algo, protocol=None)  # lock-step steps
    cluster.sim.env.run(until=proc)
    assert used == algo
    form = CLOSED_FORM[op_algo]  # both backends: a step's flows share the sender's NIC
    assert cluster.sim.now == pytest.approx(form(n, size, b, a), rel=1e-6)
    assert net.bytes_delivered == pytest.approx(WIRE_BYTES[op](n, size), rel=1e-9)


@RUNS
@given(st.integers(2, 4), st.integers(2, 4), st.floats(1e6, 1e9))
def test_hierarchical_all_reduce_closed_form(nodes, gpus_per_node, size):
    c = make_cluster(nodes=nodes, gpus_per_node=gpus_per_node)
    topo = c.topology
    nvl, nic = c.hardware.scale_up.achieved_bytes_per_s, c.hardware.nic.achieved_bytes_per_s
    a_nvl = topo.path_latency_s(topo.routes("h0/g0", "h0/g1")[0])
    a_nic = topo.path_latency_s(topo.routes("h0/g0", "h1/g0")[0])
    L, H = gpus_per_node, nodes
    expected = 2 * (L - 1) * (size / L / nvl + a_nvl) + 2 * (H - 1) * (size / L / H / nic + a_nic)
    proc, _ = collective(c.network, "all_reduce", c.nodes(range(c.num_gpus)), size, "hierarchical", protocol=None)
    c.sim.env.run(until=proc)
    assert c.sim.now == pytest.approx(expected, rel=1e-6)
    # every rank sends 2(L-1)/L S inside its host and 2(H-1)/(L H) S across hosts
    wire = H * L * (2 * (L - 1) * size / L + 2 * (H - 1) * size / (L * H))
    assert c.network.bytes_delivered == pytest.approx(wire, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# workloads: invariants on small random configs


def check_run_invariants(result) -> None:
    """What every run must satisfy: spans inside [0, end], no link over capacity on average (flow
    backend; the analytical one ignores contention by design), no more bytes delivered than sent."""
    spans = result.spans
    assert (spans["end_s"] >= spans["start_s"] - 1e-12).all(), "a span ends before it starts"
    assert (spans["start_s"] >= 0).all() and (spans["end_s"] <= result.sim_time_s * (1 + 1e-9) + 1e-12).all()
    links = result.links
    if result.sim_time_s > 0 and result.scenario.network_model == "flow":  # analytical: no contention
        assert (links["utilisation"] <= 1 + 1e-6).all(), "a link carried more than capacity x time"
    net = result.cluster.network
    assert net.bytes_delivered <= net.bytes_sent * (1 + 1e-9) + 1.0


def hardware(nodes: int, gpus_per_node: int, **extra) -> dict:
    return {
        "gpu": "h100-sxm",
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
        "scale_up": "nvlink4",
        "nic": "cx7-400g-rdma",
        "topology": {"kind": "single-switch"},
        **extra,
    }


@RUNS
@given(
    st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]),
    st.integers(2, 4),
    st.integers(1, 4),
    st.lists(st.floats(1e4, 1e9), min_size=2, max_size=4, unique=True),
    st.sampled_from(["flow", "analytical"]),
)
def test_collective_workload_time_grows_with_bytes(op, nodes, gpn, sizes, model):
    algo = "direct" if op == "all_to_all" else "ring"
    result = run(
        scenario_from_dict(
            {
                "name": "p",
                "network_model": model,
                "hardware": hardware(nodes, gpn),
                # Simple: the wire carries the payload only (LL/LL128 add their flag bytes)
                "workload": {"kind": "collective", "op": op, "bytes": sizes, "algorithm": algo, "protocol": "Simple"},
            }
        )
    )
    check_run_invariants(result)
    rows = sorted(result.metrics["per_size"], key=lambda r: r["bytes"])
    times = [r["time_s"] for r in rows]
    assert times == sorted(times), "more bytes never take less time"
    n = nodes * gpn
    assert result.cluster.network.bytes_delivered == pytest.approx(sum(WIRE_BYTES[op](n, s) for s in sizes), rel=1e-9)
    assert all(r["busbw_bytes_per_s"] <= result.cluster.hardware.scale_up.bandwidth * (1 + 1e-9) for r in rows)


TINY_MODEL = {"name": "tiny", "layers": 2, "hidden": 512, "ffn": 1024, "heads": 8, "kv_heads": 2, "vocab": 1000}


@RUNS
@given(
    st.sampled_from([(2, 2, 2), (4, 1, 4), (2, 2, 4), (1, 2, 1)]),
    st.integers(64, 4096),
    st.sampled_from(["pass-kv", "pass-q"]),
    st.integers(0, 2),
    st.integers(0, 2048),
)
def test_cp_inference_invariants(shape, prompt, ring, decode, cached):
    nodes, gpn, cp = shape
    tp = nodes * gpn // cp
    reqs = [
        {"prompt_tokens": prompt, "cached_tokens": cached, "decode_tokens": decode},
        {"prompt_tokens": 2 * prompt, "cached_tokens": cached, "decode_tokens": decode},
    ]
    data = {
        "name": "p",
        "hardware": hardware(nodes, gpn),
        "workload": {
            "kind": "cp_inference",
            "model": TINY_MODEL,
            "dtype": "bf16",
            "ring": ring,
            "parallelism": {"tp": tp, "cp": cp},
            "requests": reqs,
        },
    }
    result = run(scenario_from_dict(data))
    check_run_invariants(result)
    m = result.metrics
    assert 0 < m["mfu"] <= 1
    parts = {k: v for k, v in m["prefill_breakdown_s"].items() if k != "total"}
    assert sum(parts.values()) == pytest.approx(m["prefill_breakdown_s"]["total"], rel=1e-6)
    assert all(v >= -1e-12 for v in parts.values())
    ttft, queue, prefill = m["ttft_s_per_request"], m["queue_s_per_request"], m["prefill_s_per_request"]
    assert ttft == pytest.approx([q + p for q, p in zip(queue, prefill)])
    assert prefill[1] >= prefill[0] * (1 - 1e-9), "a longer prompt never prefills faster"
    assert result.sim_time_s >= sum(prefill) * (1 - 1e-9)


SMALL_TABLE = {"name": "t", "rows": 2000, "dim": 16, "pooling": 3, "zipf_alpha": 1.0}


@RUNS
@given(
    st.integers(1, 2),
    st.sampled_from([1, 2]),
    st.integers(8, 256),
    st.integers(1, 3),
    st.sampled_from(["size_greedy", "recshard"]),
    st.floats(1.0, 3.0),
)
def test_embedding_training_invariants(nodes, gpn, batch, tables, planner, dedup):
    data = {
        "name": "p",
        "seed": 1,
        "hardware": hardware(
            nodes,
            gpn,
            gpu="a100-sxm-80gb",
            scale_up="nvlink3",
            memory_tiers=[{"base": "ddr5-host", "name": "ddr5-host"}],
        ),
        "workload": {
            "kind": "embedding_training",
            "batch_size_per_gpu": batch,
            "tables": [{**SMALL_TABLE, "name": f"t{i}", "rows": 2000 * (i + 1)} for i in range(tables)],
            "dense": {"bottom_mlp": [13, 32, 16], "top_mlp": [32, 1], "interaction": "dcn", "interaction_rank": 8},
            "sharding": {"planner": planner},
            "dedup": dedup,
            "iterations": 2,
        },
    }
    result = run(scenario_from_dict(data))
    check_run_invariants(result)
    m, w = result.metrics, nodes * gpn
    assert m["samples_per_s"] * m["iteration_s"] == pytest.approx(batch * w), "samples conserved"
    assert sum(m["breakdown_s"].values()) == pytest.approx(m["iteration_s"], rel=1e-6)
    assert m["load_imbalance"] >= 1 - 1e-12
    assert result.cluster.network.bytes_delivered == pytest.approx(result.cluster.network.bytes_sent)


INGEST = {
    "dataset": {
        "samples": 1_000_000,
        "bytes_per_sample": 1000,
        "columns": 10,
        "columns_read": 0.5,
        "compression": 2.0,
        "partition_bytes": 8192 * 500,
    },
    "storage": {"nodes": 2, "media": "nvme-ssd", "replication": 2, "nic": "eth-25g-tcp"},
    "preprocessing": {
        "mode": "disaggregated",
        "workers": 2,
        "worker": {"cores": 4, "memory": "16 GiB"},
        "cpu_s_per_sample": {"decode": 1.0e-4, "transform": 3.0e-4},
        "batch_samples": 1024,
    },
    "trainers": {"demand_samples_per_s_per_host": 20_000, "buffer_batches": 4},
}


@RUNS
@given(
    st.sampled_from(["disaggregated", "on_trainer"]),
    st.integers(1, 3),
    st.floats(5e3, 4e4),
    st.floats(1.0, 4.0),
    st.integers(0, 2**31 - 1),
)
def test_ingestion_conserves_samples(mode, workers, demand, dedup, seed):
    wl = {
        "kind": "ingestion",
        **INGEST,
        "duration_s": 6,
        "warmup_s": 1,
        "dedup": dedup,
        "trainers": {**INGEST["trainers"], "demand_samples_per_s_per_host": demand},
    }
    wl["preprocessing"] = {**INGEST["preprocessing"], "mode": mode}
    if mode == "on_trainer":
        wl["preprocessing"].pop("workers")
        wl["preprocessing"].pop("worker")
    else:
        wl["preprocessing"]["workers"] = workers
    result = run(scenario_from_dict({"name": "p", "seed": seed, "hardware": hardware(1, 2), "workload": wl}))
    check_run_invariants(result)
    m, ledger = result.metrics, result.metrics["exactly_once"]
    assert m["samples_lost"] == 0 and ledger["samples_lost"] == 0 and ledger["samples_duplicated"] == 0
    assert ledger["samples_issued"] == ledger["samples_delivered"] + ledger["samples_pending"], "samples conserved"
    # trainers count whole batches: over the measured window at most one batch above their demand
    window_s = wl["duration_s"] - wl["warmup_s"]
    assert m["trainer_samples_per_s"] <= m["trainer_demand_samples_per_s"] + 1024 / window_s + 1e-9
    assert 0 <= m["data_stall_fraction"] <= 1 + 1e-9
    assert all(v is None or -1e-12 <= v <= 1 + 1e-6 for v in m["utilisation"].values()), m["utilisation"]
    totals = m["totals"]
    if mode == "disaggregated":  # on_trainer hands batches over locally: nothing is sent
        assert totals["bytes_delivered"] <= totals["bytes_sent"] * (1 + 1e-9) + 1.0


@RUNS
@given(
    st.sampled_from(
        [(2, 2, {"tp": 2, "pp": 2}), (1, 4, {"tp": 2, "pp": 2}), (2, 2, {"tp": 1, "pp": 2}), (1, 2, {"tp": 2, "pp": 1})]
    ),
    st.sampled_from([4, 8]),
    st.sampled_from(["1f1b", "interleaved_1f1b"]),
    st.sampled_from(["fsdp", "ddp"]),
    st.sampled_from(["flow", "analytical"]),
)
def test_training_invariants(shape, batch, schedule, data_parallel, model):
    nodes, gpn, par = shape
    wl = {
        "kind": "training",
        "model": {**TINY_MODEL, "layers": 4},
        "parallelism": par,
        "sequence_length": 512,
        "global_batch_size": batch,
        "micro_batch_size": 1,
        "schedule": schedule,
        "data_parallel": data_parallel,
        "iterations": 2,
        **({"virtual_stages": 2} if schedule == "interleaved_1f1b" else {}),
    }
    if schedule == "interleaved_1f1b" and par["pp"] == 1:
        wl.update(schedule="1f1b", virtual_stages=1)
    result = run(
        scenario_from_dict({"name": "p", "network_model": model, "hardware": hardware(nodes, gpn), "workload": wl})
    )
    check_run_invariants(result)
    m = result.metrics
    assert m["tokens_per_s"] * m["iteration_s"] == pytest.approx(m["tokens_per_iteration"]), "tokens conserved"
    assert 0 < m["mfu"] <= m["hfu"] <= 1 and 0 <= m["bubble_fraction"] < 1
    assert sum(m["breakdown_s"].values()) == pytest.approx(m["iteration_s"], rel=1e-6)
    assert result.sim_time_s >= 2 * m["iteration_s"] * (1 - 1e-9)


@RUNS
@given(
    st.sampled_from(["static", "lru", "numa_balancing", "tpp"]),
    st.sampled_from(["1:4", "1:1", "2:1"]),
    st.sampled_from(["4 MiB", "16 MiB"]),
    st.sampled_from([None, "5 ms"]),
    st.floats(0.0, 1.5),
)
def test_tiered_memory_invariants(policy, ratio, footprint, phase_s, alpha):
    data = {
        "name": "p",
        "hardware": {
            "gpus_per_node": 1,
            "nodes": 1,
            "memory_tiers": [
                {"base": "ddr5-host", "name": "ddr5-host"},
                {"base": "cxl-expander", "name": "cxl-expander"},
            ],
        },
        "workload": {
            "kind": "tiered_memory",
            "policy": policy,
            "fast_tier": "ddr5-host",
            "slow_tier": "cxl-expander",
            "ratio": ratio,
            "footprint": footprint,
            "duration_s": "20 ms",
            "epoch_accesses": 100_000,
            **({"duration_s": "0.5 ms", "epoch_accesses": 200} if policy == "lru" else {}),  # lru: epoch <= fast pages
            "access": {"zipf_alpha": alpha, **({"phase_s": phase_s} if phase_s else {})},
        },
    }
    result = run(scenario_from_dict(data))
    check_run_invariants(result)
    m = result.metrics
    assert 0 <= m["local_traffic_fraction"] <= 1
    assert all(0 <= f <= 1 for f in m["local_traffic_fraction_by_phase"])
    assert m["accesses_per_s"] * result.sim_time_s == pytest.approx(m["accesses"], rel=1e-9), "accesses conserved"
    assert m["promotions"] >= 0 and m["demotions"] >= 0
    if policy == "static":
        assert m["promotions"] == m["demotions"] == 0
    # a page promoted beyond the fast tier's room must have pushed another one out
    assert m["promotions"] - m["demotions"] <= m["fast_pages"]


@RUNS
@given(
    st.floats(1.0, 30.0),
    st.sampled_from(["1 day", "5 day"]),
    st.integers(1, 4),
    st.sampled_from([60.0, 600.0, "young-daly"]),
    st.floats(1.0, 200.0),
)
def test_training_campaign_invariants(iteration_s, horizon, replicas, interval, count):
    data = {
        "name": "p",
        "network_model": "analytical",
        "hardware": hardware(4, 8),
        "workload": {
            "kind": "training_campaign",
            "iteration_s": iteration_s,
            "horizon": horizon,
            "replicas": replicas,
            "checkpoint": {"interval": interval, "bytes": "100 GB"},
            "storage": {"bandwidth": "100 GB/s"},
            "restart": {"detection": "5 min", "restart": "10 min"},
            "faults": [{"cause": "gpu", "count": count, "period": "30 day"}],
        },
    }
    result = run(scenario_from_dict(data))
    m = result.metrics
    for value in m["effective_training_time_fraction_per_replica"]:
        assert 0 <= value <= 1
    assert m["lost_work_s"] >= 0 and m["checkpoint_overhead_s"] >= 0 and m["recovery_s"] >= 0
    assert m["useful_training_s"] <= result.sim_time_s * (1 + 1e-9)
    assert m["interruptions"] == pytest.approx(m["unexpected_interruptions"] + m["planned_interruptions"])


@RUNS
@given(st.sampled_from(["packed", "spread"]), st.floats(1e6, 1e9), st.sampled_from(["all_reduce", "all_to_all"]))
def test_jobs_sharing_a_cluster(placement, size, op):
    algo = "direct" if op == "all_to_all" else "ring"
    job = {
        "kind": "collective",
        "op": op,
        "algorithm": algo,
        "bytes": size,
        "hosts": {"count": 2, "placement": placement},
    }
    data = {
        "name": "p",
        "hardware": hardware(
            4, 2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 1, "oversubscription": 2}
        ),
        "workloads": [{**job, "name": "a"}, {**job, "name": "b"}],
    }
    result = run(scenario_from_dict(data))
    check_run_invariants(result)
    jobs = result.metrics["jobs"]
    assert result.metrics["makespan_s"] == pytest.approx(max(j["completion_s"] for j in jobs.values()))
    assert sorted(h for j in jobs.values() for h in j["hosts"]) == [0, 1, 2, 3], "every host placed once"
    for j in jobs.values():
        assert j["slowdown_vs_alone"] == pytest.approx(j["completion_s"] / j["alone_completion_s"])
        assert j["time_s"] <= j["completion_s"] * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0, 5), min_size=1, max_size=40), st.floats(0.01, 50))
def test_event_count_is_the_number_of_events_processed(delays, stop_at):
    """`events` in summaries: the events the engine counts equal the steps a plain SimPy environment
    takes for the same processes, run until a time then until an event, or until none is left."""
    from sim.engine.simulation import Simulation

    def proc(env):
        for d in delays:
            yield env.timeout(d)
            env.timeout(d / 2)  # events nobody waits for count too
        return len(delays)

    def counting_plain_env():
        plain = simpy.Environment()
        plain.steps = 0
        step = plain.step

        def counted_step():
            plain.steps += plain.peek() < float("inf")  # a step with an event to process
            step()

        plain.step = counted_step
        return plain

    plain, sim = counting_plain_env(), Simulation(seed=0)
    p_plain, p_sim = plain.process(proc(plain)), sim.process(proc(sim.env))
    plain.run(until=stop_at)
    sim.env.run(until=stop_at)
    assert sim.env.events_processed == plain.steps
    assert sim.env.run(until=p_sim) == plain.run(until=p_plain) == len(delays)
    assert sim.env.events_processed == plain.steps
    # (SimPy's own run(until=event) queues the event again to stop; a later run would count it twice)
    plain, sim = counting_plain_env(), Simulation(seed=0)
    plain.process(proc(plain))
    sim.process(proc(sim.env))
    plain.run()
    sim.env.run()
    assert sim.env.events_processed == plain.steps and sim.now == plain.now


def test_a_failing_process_raises_its_own_exception_from_run():
    """run(until=process) raises the process's exception itself (a ScenarioError keeps its key path)."""
    from sim.engine.simulation import Simulation
    from sim.errors import ScenarioError

    sim = Simulation(seed=0)

    def proc():
        yield sim.timeout(1)
        raise ScenarioError("bad", path="workload.x", value=3)

    p = sim.process(proc())
    with pytest.raises(ScenarioError) as info:
        sim.env.run(until=p)
    assert info.value.path == "workload.x" and sim.env.events_processed == 3
    with pytest.raises(RuntimeError, match="No scheduled events left"):
        sim.env.run(until=sim.env.event())
