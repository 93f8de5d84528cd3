"""Switch paths from cached hop distances are networkx's shortest paths, and a switch's hop distances
(a leaf switch's: its neighbour's plus one) are scipy's breadth-first search's
(hardware_models/topology.py searches level by level in numpy: no scipy to import)."""

import itertools

import networkx as nx
import numpy as np
import pytest
from scipy.sparse.csgraph import shortest_path

from hardware_models.topology import _adjacency, _breadth_first_hops
from tests.conftest import make_cluster

TOPOLOGIES = [
    dict(nodes=8, gpus_per_node=2, topology={"kind": "torus", "dims": [4, 2]}),
    dict(nodes=5, gpus_per_node=1, topology={"kind": "ring"}),
    dict(
        nodes=8,
        gpus_per_node=2,
        topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 3, "aggregate_spines": False},
    ),
    dict(nodes=16, gpus_per_node=2, topology={"kind": "clos3", "gpus_per_tor": 4, "gpus_per_pod": 8}),
    dict(nodes=4, gpus_per_node=2, topology={"kind": "rail-optimized", "spines": 2, "aggregate_spines": False}),
]


def networkx_paths(topo, a, b):
    return sorted(
        tuple(topo.link_id(u, v) for u, v in zip(p, p[1:])) for p in nx.all_shortest_paths(topo.switch_graph, a, b)
    )


@pytest.mark.parametrize("hardware", TOPOLOGIES, ids=lambda h: h["topology"]["kind"])
def test_switch_paths_are_networkx_shortest_paths(hardware):
    topo = make_cluster(**hardware).topology
    switches = list(topo.switch_graph.nodes)
    for a, b in itertools.permutations(switches, 2):
        assert topo.switch_paths(a, b) == networkx_paths(topo, a, b), (a, b)


@pytest.mark.parametrize("hardware", TOPOLOGIES, ids=lambda h: h["topology"]["kind"])
def test_hop_distances_match_a_breadth_first_search(hardware):
    topo = make_cluster(**hardware).topology
    graph = topo.switch_graph
    order = list(graph.nodes)
    expected = shortest_path(nx.to_scipy_sparse_array(graph, nodelist=order), unweighted=True, directed=False)
    leaves = [n for n in order if graph.degree(n) == 1]
    assert leaves or hardware["topology"]["kind"] != "clos3"  # the clos3 ToRs take the shortcut
    for i, n in enumerate(order):
        np.testing.assert_array_equal(topo._hop_distances(n), expected[i])


@pytest.mark.parametrize("seed", range(6))
def test_breadth_first_hops_are_scipys_on_random_graphs_with_parallel_links_and_islands(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    names = [f"s{i}" for i in range(n)]
    fabric = [(names[a], names[b]) for a, b in rng.integers(0, n, (int(rng.integers(0, 3 * n)), 2)) if a != b]
    fabric += fabric[:3]  # parallel links count once
    indptr, indices = _adjacency(fabric, {name: i for i, name in enumerate(names)})
    graph = nx.Graph()
    graph.add_nodes_from(names)
    graph.add_edges_from(fabric)
    expected = shortest_path(nx.to_scipy_sparse_array(graph, nodelist=names), unweighted=True, directed=False)
    for i in range(n):
        np.testing.assert_array_equal(_breadth_first_hops(indptr, indices, i), expected[i])


def test_more_paths_than_max_paths_fall_back_to_networkx_first_ones():
    topo = make_cluster(nodes=16, gpus_per_node=1, topology={"kind": "torus", "dims": [4, 4], "max_paths": 3}).topology
    a, b = "r0", "r10"  # two hops in each dimension: 6 shortest paths
    assert topo._few_shortest_paths(a, b) is None
    assert len(topo.switch_paths(a, b)) == 3
    assert set(topo.switch_paths(a, b)) <= set(networkx_paths(topo, a, b))


def test_a_paths_latency_is_numpys_sum_of_its_links_latencies_to_the_bit():
    """`path_latency_s` adds a short path's latencies in Python: numpy's sum of fewer than 8 values
    adds them one after another from 0.0, so the result is the same float; longer paths use numpy."""
    topo = make_cluster(**TOPOLOGIES[3]).topology
    rng = np.random.default_rng(0)
    topo.latency = rng.random(topo.num_links) * 10.0 ** rng.integers(-9, -4, topo.num_links)
    for n in range(0, 13):
        for _ in range(500):
            path = tuple(rng.integers(0, topo.num_links, n).tolist())
            expected = float(topo.latency[list(path)].sum()) if path else 0.0
            assert topo.path_latency_s(path) == expected
