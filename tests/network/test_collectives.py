"""Collective schedules against their closed forms (nccl-tests conventions), on both network backends:
the schedules as built, run lock-step (`protocol=None`); NCCL's model of running them is tested in
tests/network/test_nccl_collectives.py."""

import pytest

from sim.network.collectives import bus_factor, collective, schedule
from tests.conftest import make_cluster


def time_collective(cluster, op, nbytes, algorithm, ranks=None, background=()):
    sim, net = cluster.sim, cluster.network
    group = cluster.nodes(ranks or range(cluster.num_gpus))
    for s, d, b in background:
        net.transfer(cluster.devices[s].node, cluster.devices[d].node, b, name="background")
    proc, algo = collective(net, op, group, nbytes, algorithm, protocol=None)
    sim.env.run(until=proc)
    return sim.now, algo


def nic_step(cluster):
    """Bandwidth B and per-step latency a of a NIC hop through one switch (one GPU per host)."""
    topo = cluster.topology
    a = topo.path_latency_s(topo.routes(cluster.devices[0].node, cluster.devices[1].node)[0])
    return cluster.hardware.nic.achieved_bytes_per_s, a


@pytest.mark.parametrize("network_model", ["flow", "analytical"])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_all_reduce_closed_form(network_model, n):
    c = make_cluster(network_model, nodes=n)
    B, a = nic_step(c)
    S = 256 * 2**20
    t, _ = time_collective(c, "all_reduce", S, "ring")
    assert t == pytest.approx(2 * (n - 1) / n * S / B + 2 * (n - 1) * a, rel=0.01)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_all_gather_and_reduce_scatter_take_half_the_bandwidth_term(op):
    n = 8
    c = make_cluster(nodes=n)
    B, a = nic_step(c)
    S = 256 * 2**20
    t, _ = time_collective(c, op, S, "ring")
    assert t == pytest.approx((n - 1) / n * S / B + (n - 1) * a, rel=0.01)


def test_all_to_all_on_a_single_switch():
    n = 8
    c = make_cluster(nodes=n)
    B, a = nic_step(c)
    S = 1 * 2**30
    t, _ = time_collective(c, "all_to_all", S, "direct")
    assert t == pytest.approx((n - 1) / n * S / B + a, rel=0.01)


def hierarchical_closed_form(cluster, S):
    """RS + AG inside hosts (L-1 ring steps of S/L each on the scale-up fabric) + a ring across the
    H hosts per rail carrying S/L (2(H-1) steps of S/(L H) on the NICs)."""
    L, H = cluster.hardware.gpus_per_node, cluster.hardware.nodes
    topo = cluster.topology
    nvl, nic = cluster.hardware.scale_up.achieved_bytes_per_s, cluster.hardware.nic.achieved_bytes_per_s
    a_nvl = topo.path_latency_s(topo.routes("h0/g0", "h0/g1")[0])
    a_nic = topo.path_latency_s(topo.routes("h0/g0", "h1/g0")[0])
    intra = 2 * (L - 1) * (S / L / nvl + a_nvl)
    inter = 2 * (H - 1) * (S / L / H / nic + a_nic)
    return intra, inter


@pytest.mark.parametrize("nodes", [2, 4])
def test_hierarchical_all_reduce_closed_form(nodes):
    S = 1 * 2**30
    c = make_cluster(nodes=nodes, gpus_per_node=8)
    t, _ = time_collective(c, "all_reduce", S, "hierarchical")
    assert t == pytest.approx(sum(hierarchical_closed_form(c, S)), rel=0.01)


def test_hierarchical_all_reduce_across_hosts_is_limited_by_the_nics_not_nvlink():
    S = 1 * 2**30
    tcp = dict(nodes=4, gpus_per_node=8, nic="tcp-100g")
    t_base, _ = time_collective(make_cluster(**tcp), "all_reduce", S, "hierarchical")
    intra, inter = hierarchical_closed_form(make_cluster(**tcp), S)
    assert inter > 5 * intra  # the NIC phase dominates
    half_nic = make_cluster(**{**tcp, "nic": {"base": "tcp-100g", "bandwidth": "50 Gbit/s"}})
    t_half_nic, _ = time_collective(half_nic, "all_reduce", S, "hierarchical")
    double_nvl = make_cluster(**{**tcp, "scale_up": {"base": "nvlink4", "bandwidth": "900 GB/s"}})
    t_double_nvl, _ = time_collective(double_nvl, "all_reduce", S, "hierarchical")
    assert t_half_nic / t_base > 1.8  # halving the NIC almost doubles the time
    assert t_base / t_double_nvl < 1.1  # doubling NVLink barely helps


def test_hierarchical_beats_flat_ring_across_hosts():
    S = 1 * 2**30
    t_ring, _ = time_collective(make_cluster(nodes=2, gpus_per_node=8), "all_reduce", S, "ring")
    t_hier, _ = time_collective(make_cluster(nodes=2, gpus_per_node=8), "all_reduce", S, "hierarchical")
    t_auto, algo = time_collective(make_cluster(nodes=2, gpus_per_node=8), "all_reduce", S, "auto")
    assert t_hier < t_ring / 3
    assert algo == "hierarchical" and t_auto == pytest.approx(t_hier)


def test_tree_wins_for_small_messages_on_many_ranks():
    c = make_cluster(nodes=16)
    _, algo = time_collective(c, "all_reduce", 4096, "auto")
    assert algo == "tree"


def test_competing_flow_slows_ring_all_reduce_by_the_predicted_amount():
    n, S = 4, 256 * 2**20
    quiet = make_cluster(nodes=n)
    B, a = nic_step(quiet)
    t_quiet, _ = time_collective(quiet, "all_reduce", S, "ring")
    busy = make_cluster(nodes=n)
    # a long background flow h0 -> h1 shares every ring step's h0->h1 flow's links: that flow gets B/2
    t_busy, _ = time_collective(busy, "all_reduce", S, "ring", background=[(0, 1, 100e9)])
    assert t_quiet == pytest.approx(2 * (n - 1) * (S / n / B + a), rel=0.01)
    assert t_busy == pytest.approx(2 * (n - 1) * (S / n / (B / 2) + a), rel=0.01)


@pytest.mark.parametrize("oversubscription,expected_factor", [(1, 0.875), (4, 2.0)])
def test_cross_leaf_all_to_all_on_an_oversubscribed_fat_tree(oversubscription, expected_factor):
    # 2 leaves x 4 hosts (1 GPU each): S bytes per host, host link B
    c = make_cluster(
        nodes=8, topology={"kind": "fat-tree", "hosts_per_leaf": 4, "spines": 2, "oversubscription": oversubscription}
    )
    B = c.hardware.nic.achieved_bytes_per_s
    S = 4 * 2**30
    t, _ = time_collective(c, "all_to_all", S, "direct")
    assert t == pytest.approx(expected_factor * S / B, rel=0.01)
    uplinks = [c.topology.link_id(f"leaf{l}", "spines") for l in range(2)]  # spines aggregated (even ECMP)
    util = c.network.link_bytes[uplinks] / (c.topology.capacity[uplinks] * t)
    assert util.max() <= 1 + 1e-9


def test_flow_and_analytical_backends_agree_without_contention():
    for op, algo in [
        ("all_reduce", "ring"),
        ("all_reduce", "hierarchical"),
        ("all_gather", "ring"),
        ("all_to_all", "direct"),
    ]:
        times = [
            time_collective(make_cluster(m, nodes=2, gpus_per_node=4), op, 64 * 2**20, algo)[0]
            for m in ("flow", "analytical")
        ]
        if op == "all_to_all":  # all-to-all contends on NVLink/NIC links in the flow model by design
            continue
        assert times[0] == pytest.approx(times[1], rel=0.01), op


def test_schedules_move_the_right_bytes():
    group = [f"r{i}" for i in range(4)]
    steps = schedule("all_reduce", "ring", group, 400.0)
    assert len(steps) == 6 and all(b == 100.0 for step in steps for _, _, b in step)
    assert sum(b for _, _, b in schedule("all_to_all", "direct", group, 400.0)[0]) == 4 * 300.0
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
