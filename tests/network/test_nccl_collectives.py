"""Collectives as NCCL runs them (sim/network/nccl.py, sim/network/pipeline.py): channels on rails,
pipelined slices, protocols and their latency accounting, the tuner's choice by size."""

import dataclasses

import numpy as np
import pytest

from sim.network import nccl
from sim.network.collectives import (
    bus_factor,
    channel_ring_schedule,
    collective,
    plan,
    rail_rings,
    run_schedule,
)
from sim.network.pipeline import run_pipelined
from tests.conftest import make_cluster

GiB = 2**30


def run(cluster, op, nbytes, algorithm="auto", protocol="auto"):
    group = cluster.nodes(range(cluster.num_gpus))
    proc, algo = collective(cluster.network, op, group, nbytes, algorithm, protocol=protocol)
    cluster.sim.env.run(until=proc)
    return cluster.sim.now, algo


def run_with_slices(cluster, op, nbytes, algorithm, protocol, slices):
    """The plan of the tuner, forced to `slices` slices."""
    group = cluster.nodes(range(cluster.num_gpus))
    chosen, steps, costs = plan(cluster.network, op, algorithm, protocol, group, nbytes)
    chosen = dataclasses.replace(chosen, slices=slices)
    proc = run_pipelined(cluster.network, steps, chosen, costs.bandwidth_s, costs.wire_latency_s)
    cluster.sim.env.run(until=proc)
    return cluster.sim.now, chosen


def test_pipelined_ring_approaches_the_bandwidth_term_as_slices_grow():
    """A uniform ring of n hosts (one GPU each, link B): k slices hide the hop latencies under the
    bandwidth time, so the time falls towards base + S/B x 2(n-1)/n."""
    n, S = 8, 64 * 2**20
    B = make_cluster(nodes=n).hardware.nic.achieved_bytes_per_s
    bandwidth_term = 2 * (n - 1) / n * S / B
    times = {k: run_with_slices(make_cluster(nodes=n), "all_reduce", S, "ring", "Simple", k) for k in (1, 2, 4, 8)}
    base = nccl.base_latency_s("ring", "Simple")
    one, plan_one = times[1]
    assert one == pytest.approx(base + bandwidth_term + sum(plan_one.step_latency_s), rel=1e-6)  # lock-step
    excess = [times[k][0] - base - bandwidth_term for k in (1, 2, 4, 8)]
    assert all(a >= b - 1e-12 for a, b in zip(excess, excess[1:]))  # never grows with k
    assert excess[-1] <= max(plan_one.step_latency_s) * 1.001  # all but the last hop's latency hidden
    assert times[8][0] == pytest.approx(base + bandwidth_term, rel=0.02)


def test_closed_form_of_the_wavefront():
    """m steps of bandwidth time b and latency l, k slices: sum(b/k + l) + (k-1) b/k, at least the
    busiest link's total (here every step uses it: m b)."""
    m, b, l = 10, 1.0, 0.05
    assert nccl.pipelined_time_s([b] * m, [l] * m, 1, 0.0) == pytest.approx(m * (b + l))
    for k in (2, 4, 8, 64):
        path = m * (b / k + l) + (k - 1) * b / k
        assert nccl.pipelined_time_s([b] * m, [l] * m, k, m * b) == pytest.approx(max(path, m * b + l))
    # a chain of different phases (no shared link): as k grows, only the slowest phase remains
    phases = [0.2, 1.0, 0.2]
    far = nccl.pipelined_time_s(phases, [0.0] * 3, 1000, 1.0)
    assert far == pytest.approx(1.0, rel=0.01)


def test_rail_rings_use_every_nic_once_per_direction():
    c = make_cluster(nodes=2, gpus_per_node=4)
    group = c.nodes(range(8))
    rings = rail_rings(group, c.topology.host_of)
    assert len(rings) == 4 and all(sorted(r) == sorted(group) for r in rings)
    leaving = [r[i] for r in rings for i in range(8) if c.topology.host_of(r[i]) != c.topology.host_of(r[(i + 1) % 8])]
    entering = [
        r[(i + 1) % 8]
        for r in rings
        for i in range(8)
        if c.topology.host_of(r[i]) != c.topology.host_of(r[(i + 1) % 8])
    ]
    assert sorted(leaving) == sorted(group) and sorted(entering) == sorted(group)
    assert rail_rings(c.nodes(range(4)), c.topology.host_of) == [c.nodes(range(4))]  # one host: one ring


def test_c_channels_on_c_rails_divide_the_time_by_c_when_nics_bound():
    """Lock-step rings, 2 hosts x 4 GPUs: the bandwidth term 2(n-1)/n S/B of one ring through one NIC
    per host boundary becomes 1/4 of it with 4 rings on 4 rails; the 2(n-1) hop latencies remain."""
    S = 256 * 2**20
    n = 8
    probe = make_cluster(nodes=2, gpus_per_node=4)
    a = probe.topology.path_latency_s(probe.topology.routes("h0/g3", "h1/g0")[0])
    times = []
    for rings in ("one", "rails"):
        c = make_cluster(nodes=2, gpus_per_node=4)
        group = c.nodes(range(8))
        ring_set = [group] if rings == "one" else rail_rings(group, c.topology.host_of)
        proc = run_schedule(c.network, channel_ring_schedule("all_reduce", ring_set, S))
        c.sim.env.run(until=proc)
        times.append(c.sim.now)
    latency = 2 * (n - 1) * a
    assert (times[0] - latency) / (times[1] - latency) == pytest.approx(4, rel=1e-6)


def test_flat_ring_on_2x8_h100_reaches_the_nic_bound():
    """Eight 400G NICs per host: busbw within 10 % of 8 x the NIC's achieved rate."""
    c = make_cluster(nodes=2, gpus_per_node=8)
    t, _ = run(c, "all_reduce", GiB, "ring")
    busbw = GiB / t * bus_factor("all_reduce", 16)
    nic_bound = 8 * c.hardware.nic.achieved_bytes_per_s
    assert busbw == pytest.approx(nic_bound, rel=0.10)


def test_pipelined_hierarchical_overlaps_its_phases():
    lockstep = make_cluster(nodes=2, gpus_per_node=8)
    group = lockstep.nodes(range(16))
    proc, _ = collective(lockstep.network, "all_reduce", group, GiB, "hierarchical", protocol=None)
    lockstep.sim.env.run(until=proc)
    t_pipe, _ = run(make_cluster(nodes=2, gpus_per_node=8), "all_reduce", GiB, "hierarchical", "Simple")
    assert t_pipe < 0.8 * lockstep.sim.now


@pytest.mark.parametrize("protocol", nccl.PROTOCOLS)
def test_latency_accounting_of_a_tiny_message(protocol):
    """8 bytes on one host's ring: per-operation latency + steps x per-step latency (the larger of
    the protocol's hop latency and the topology's path latency), bandwidth negligible."""
    c = make_cluster(nodes=1, gpus_per_node=8)
    t, _ = run(c, "all_reduce", 8, "ring", protocol)
    wire = c.topology.path_latency_s(c.topology.routes("h0/g0", "h0/g1")[0])
    hop = nccl.HOP_LATENCY_US["nvlink"]["ring"][protocol] * 1e-6
    expected = nccl.base_latency_s("ring", protocol) + 14 * max(hop, wire)
    assert t == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("size", [8, 2**20, GiB])
@pytest.mark.parametrize("network_model", ["flow", "analytical"])
def test_kernel_launch_is_paid_once_per_operation_and_never_changes_the_choice(size, network_model):
    """`launch_s` (the device's launch overhead, left out of NCCL's tuner) adds exactly itself to the
    estimate and to the simulated time, and the tuner picks the same algorithm and protocol."""
    launch = 4e-6
    group = make_cluster(network_model, nodes=2, gpus_per_node=8).nodes(range(16))
    c = make_cluster(network_model, nodes=2, gpus_per_node=8)
    plain, _, _ = plan(c.network, "all_reduce", "auto", "auto", group, size)
    launched, _, _ = plan(c.network, "all_reduce", "auto", "auto", group, size, launch)
    assert (launched.algorithm, launched.protocol, launched.slices) == (plain.algorithm, plain.protocol, plain.slices)
    assert launched.estimate_s == pytest.approx(plain.estimate_s + launch, rel=1e-12)
    t0, _ = run(make_cluster(network_model, nodes=2, gpus_per_node=8), "all_reduce", size)
    c1 = make_cluster(network_model, nodes=2, gpus_per_node=8)
    proc, _ = collective(c1.network, "all_reduce", group, size, launch_s=launch)
    c1.sim.env.run(until=proc)
    assert c1.sim.now == pytest.approx(t0 + launch, rel=1e-9)


def test_multi_node_ring_latency_is_ncclS_formula():
    """Across hosts a ring's hops cost NCCL's (nsteps - nInter) x intra + nInter x inter in total."""
    ranks, nodes = 16, 2
    nsteps, n_inter = nccl.ring_steps("all_reduce", ranks, nodes)
    lat = nccl.step_latencies_s("all_reduce", "ring", "LL", [True] * nsteps, ranks, nodes)
    intra = max(nccl.HOP_LATENCY_US["nvlink"]["ring"]["LL"], nccl.NET_OVERHEAD_US) * 1e-6
    inter = nccl.HOP_LATENCY_US["net"]["ring"]["LL"] * 1e-6
    assert sum(lat) == pytest.approx((nsteps - n_inter) * intra + n_inter * inter)


@pytest.mark.parametrize("nodes,gpus_per_node", [(1, 8), (2, 8)])
@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
def test_protocol_choice_is_monotone_in_size(nodes, gpus_per_node, algorithm):
    if algorithm == "hierarchical" and nodes == 1:
        pytest.skip("hierarchical needs hosts")
    c = make_cluster(nodes=nodes, gpus_per_node=gpus_per_node)
    group = c.nodes(range(c.num_gpus))
    order = []
    for size in [8 * 4**i for i in range(16)]:  # 8 B .. 8 GiB
        chosen, _, _ = plan(c.network, "all_reduce", algorithm, "auto", group, size)
        order.append(nccl.PROTOCOLS.index(chosen.protocol))
    assert order == sorted(order)
    assert order[0] == 0 and order[-1] == 2  # LL for tiny messages, Simple for huge ones


def test_analytical_backend_gives_the_tuners_closed_form():
    c = make_cluster("analytical", nodes=2, gpus_per_node=8)
    group = c.nodes(range(16))
    for size in (8, 2**20, GiB):
        chosen, _, _ = plan(c.network, "all_reduce", "ring", "auto", group, size)
        assert chosen.slices == 1
        t, _ = run(make_cluster("analytical", nodes=2, gpus_per_node=8), "all_reduce", size, "ring")
        assert t == pytest.approx(chosen.estimate_s, rel=1e-9)


def test_explicit_algorithm_and_protocol_and_bad_protocol():
    c = make_cluster(nodes=2, gpus_per_node=4)
    t, algo = run(c, "all_gather", 2**20, "ring", "LL128")
    assert algo == "ring" and t > 0
    with pytest.raises(ValueError, match="protocol"):
        plan(c.network, "all_reduce", "ring", "LL64", c.nodes(range(8)), 8)


def _naive_costs(network, steps):
    """`step_costs` the straightforward way: every step costed and its link loads added in order."""
    from sim.network.collectives import _one_step_costs

    link_s = np.zeros(network.topology.num_links)
    for step in steps:
        _, _, _, loads = _one_step_costs(network, step)
        if loads is not None:
            link_s += loads
    return float(link_s.max(initial=0.0)), max((b for step in steps for _, _, b in step), default=0.0)


@pytest.mark.parametrize(
    "op, algorithm, hardware",
    [
        ("all_reduce", "ring", {"nodes": 4, "gpus_per_node": 4}),
        ("all_reduce", "ring", {"nodes": 3, "gpus_per_node": 2, "topology": {"kind": "fat-tree"}}),
        ("all_reduce", "tree", {"nodes": 4, "gpus_per_node": 2}),
        ("all_reduce", "hierarchical", {"nodes": 2, "gpus_per_node": 4}),
        ("reduce_scatter", "hierarchical", {"nodes": 3, "gpus_per_node": 2}),
        ("all_gather", "ring", {"nodes": 5, "gpus_per_node": 1}),
        ("all_to_all", "direct", {"nodes": 2, "gpus_per_node": 2}),
    ],
)
def test_step_costs_shortcuts_give_the_ordered_sums(op, algorithm, hardware):
    """`step_costs` sums only the candidate links step by step and `largest_flow_bytes` looks at each
    distinct step once: the same floats as adding every step's link loads in order and scanning
    every step's flows."""
    from sim.network.collectives import largest_flow_bytes, nccl_schedule, step_costs

    c = make_cluster(**hardware)
    group = c.nodes(range(c.num_gpus))
    steps = nccl_schedule(op, algorithm, group, 3.7e6, c.topology.host_of)
    busiest, largest = _naive_costs(c.network, steps)
    assert step_costs(c.network, steps).busiest_link_s == busiest  # exact, not approx
    assert largest_flow_bytes(steps) == largest
