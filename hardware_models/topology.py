"""Cluster topologies as graphs of directed, full-duplex links: the spec, and the built `Topology`.

`TopologySpec` is the scenario's `hardware.topology`; hardware_models/topology_builders.py turns it into a
`Topology` (which builders exist and what each builds is described there).

Memory and storage tiers are endpoints too, so one mechanism (max-min fair flows) shares a tier's
bandwidth between everyone reading it: each host has a CPU/root-complex node `h{i}/cpu` joined to
each of its devices by a host link (PCIe), and each host tier (DDR, CXL, SCM, SSD) is a node
`h{i}/{tier}` hanging off `h{i}/cpu`; a pool host's media (disks) hang off the pool host. A tier's
read link carries min(bandwidth, iops x granularity) - every random access moves at least one
granule - and its write link the write bandwidth; the link latency is the tier's access latency.

Routing: endpoints (devices, pool hosts) hang off one first-hop switch; switch-to-switch paths are
all shortest paths on the switch graph (up to `max_paths`, deterministic order), cached per switch
pair, found from hop distances (a breadth-first search on the switch adjacency); networkx is
imported only for views (`graph`, `switch_graph`), graph files and more than `max_paths` paths.
`routes(src, dst)` returns equal-cost paths as tuples of link ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, model_validator

from hardware_models.memory import MemoryTierSpec
from hardware_models.nic import LinkSpec
from hardware_models.spec import Spec
from hardware_models.units import Seconds

if TYPE_CHECKING:
    import networkx as nx

    from hardware_models.routing import BatchRouter

TopologyKind = Literal["single-switch", "fat-tree", "rail-optimized", "clos3", "ring", "torus", "graph"]


class TopologySpec(Spec):
    kind: TopologyKind = "single-switch"
    hosts_per_leaf: int | None = Field(None, ge=1, description="fat-tree: hosts under one leaf")
    spines: int | None = Field(None, ge=1, description="fat-tree / rail-optimized: spine switches")
    aggregate_spines: bool | None = Field(
        None,
        description="model the spines as one node of their summed "
        "capacity (exact with ecmp: even; default: on for even, off for hash)",
    )
    oversubscription: float | None = Field(None, ge=1, description="downlink / uplink capacity")
    gpus_per_tor: int = Field(16, ge=1, description="clos3: devices per ToR (Llama 3: 16)")
    gpus_per_pod: int = Field(3072, ge=1, description="clos3: devices per pod (Llama 3: 3,072)")
    dims: list[int] | None = Field(None, description="torus: host grid dimensions (product = nodes)")
    file: str | None = Field(None, description="graph: GraphML or edge-list (src dst bandwidth latency)")
    hosts: list[str] | None = Field(None, description="graph: node each host attaches to")
    switch_latency: Seconds = Field(5e-7, ge=0, description="per switch hop, s (assumption: 0.5 us cut-through)")
    ecmp: Literal["even", "hash"] = "even"
    max_paths: int = Field(64, ge=1, description="cap on equal-cost paths per switch pair")

    @property
    def spines_aggregated(self) -> bool:
        return self.ecmp == "even" if self.aggregate_spines is None else self.aggregate_spines

    @model_validator(mode="after")
    def _check_kind_fields(self) -> TopologySpec:
        if self.aggregate_spines and self.ecmp == "hash":
            raise ValueError("aggregate_spines is exact only with ecmp: even")
        if self.kind == "torus" and not self.dims:
            raise ValueError("torus needs dims, e.g. [4, 4]")
        if self.kind == "graph" and not self.file:
            raise ValueError("graph needs file: a GraphML or edge-list path")
        return self


@dataclass
class HostPool:
    """Extra hosts (storage, preprocessing) attached to the network, each with optional media."""

    name: str
    count: int
    nic: LinkSpec
    media: list[MemoryTierSpec] = field(default_factory=list)


def tier_read_capacity(tier: MemoryTierSpec) -> float:
    """Bytes/s a tier serves to random accesses: bandwidth, or the access rate x one granule."""
    return min(tier.bandwidth, tier.max_iops * tier.granularity)


@dataclass
class Topology:
    """Nodes, directed links (as arrays indexed by link id) and routes between endpoints."""

    devices: list[str]  # global rank -> device node
    hosts: list[list[str]]  # host index -> its device nodes
    pools: dict[str, list[str]] = field(default_factory=dict)
    attach_points: list[str] = field(default_factory=list)
    link_src: list[str] = field(default_factory=list)
    link_dst: list[str] = field(default_factory=list)
    link_kind: list[str] = field(default_factory=list)
    capacity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    latency: np.ndarray = field(default_factory=lambda: np.zeros(0))
    max_paths: int = 64
    _edge_id: dict[tuple[str, str], int] = field(default_factory=dict)
    _first_hop: dict[str, str] = field(default_factory=dict)  # endpoint -> first switch
    _host_of: dict[str, int] = field(default_factory=dict)
    _parent: dict[str, str] = field(default_factory=dict)  # tier/media node -> node it hangs off
    _switch_nodes: list[str] = field(default_factory=list)  # the switches sorted, then other fabric ends
    _fabric: list[tuple[str, str]] = field(default_factory=list)  # switch-to-switch links, once per duplex pair
    _switch_paths: dict[tuple[str, str], list[tuple[int, ...]]] = field(default_factory=dict)
    _router: BatchRouter | None = None
    _hops: dict = field(default_factory=dict)  # switch graph as CSR and hop distances per switch (lazy)

    @property
    def graph(self) -> nx.DiGraph:
        """The directed graph of every link (edge attributes: capacity, latency, kind, id), built on
        demand from the link arrays (so it shows capacities as they are now, e.g. after stragglers)."""
        import networkx as nx  # lazy: routing needs no networkx (start-up, issue 26)

        g = nx.DiGraph()
        g.add_edges_from(
            (u, v, {"capacity": float(c), "latency": float(l), "kind": k, "id": i})
            for i, (u, v, c, l, k) in enumerate(
                zip(self.link_src, self.link_dst, self.capacity, self.latency, self.link_kind)
            )
        )
        return g

    @property
    def switch_graph(self) -> nx.Graph:
        """The undirected graph of the switches and the links between them (built on demand)."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(self._switch_nodes)
        g.add_edges_from(self._fabric)
        return g

    def route_batch(self, srcs: list[str], dsts: list[str]):
        """Routes of many pairs at once (hardware_models.routing.RoutedFlows), or None if some
        endpoint needs the per-pair path (memory tiers, media)."""
        if self._router is None:
            from hardware_models.routing import BatchRouter

            self._router = BatchRouter(self)
        return self._router.route(srcs, dsts)

    # ---- queries -------------------------------------------------------------------------
    @property
    def num_links(self) -> int:
        return len(self.link_src)

    def host_of(self, node: str) -> int | None:
        return self._host_of.get(node)

    def first_hop(self, endpoint: str) -> str | None:
        """The switch an endpoint's (device's, pool host's) NIC links to; None for other nodes."""
        return self._first_hop.get(endpoint)

    def endpoints(self) -> list[str]:
        """Every endpoint (device, pool host) with a first-hop switch, sorted by name."""
        return sorted(self._first_hop)

    def link_id(self, src: str, dst: str) -> int:
        return self._edge_id[(src, dst)]

    def link_id_or(self, src: str, dst: str, missing: int = -1) -> int:
        """The id of the link src -> dst, or `missing` where there is none."""
        return self._edge_id.get((src, dst), missing)

    def has_link(self, src: str, dst: str) -> bool:
        """Whether a directed link src -> dst exists (names as in `link_name`)."""
        return (src, dst) in self._edge_id

    def link_name(self, link_id: int) -> str:
        return f"{self.link_src[link_id]}->{self.link_dst[link_id]}"

    def routes(self, src: str, dst: str) -> list[tuple[int, ...]]:
        """Equal-cost paths from `src` to `dst` (endpoints), each a tuple of link ids."""
        if src == dst:
            return [()]
        if src in self._parent:
            up = self._edge_id[(src, self._parent[src])]
            return [(up, *p) for p in self.routes(self._parent[src], dst)]
        if dst in self._parent:
            down = self._edge_id[(self._parent[dst], dst)]
            return [(*p, down) for p in self.routes(src, self._parent[dst])]
        if (src, dst) in self._edge_id and self.link_kind[self._edge_id[(src, dst)]] == "host":
            return [(self._edge_id[(src, dst)],)]
        if (
            src not in self._first_hop
            and src not in self._host_of
            or dst not in self._first_hop
            and dst not in self._host_of
        ):
            raise ValueError(f"no route from {src!r} to {dst!r}")
        hs, hd = self._host_of.get(src), self._host_of.get(dst)
        if hs is not None and hs == hd:
            nvs = f"h{hs}/nvs"
            return [(self._edge_id[(src, nvs)], self._edge_id[(nvs, dst)])]
        s_sw, d_sw = self._first_hop[src], self._first_hop[dst]
        up, down = self._edge_id[(src, s_sw)], self._edge_id[(d_sw, dst)]
        return [(up, *middle, down) for middle in self.switch_paths(s_sw, d_sw)]

    def path_latency_s(self, path: tuple[int, ...]) -> float:
        """The summed latency of a path's links: numpy's sum of them, which adds fewer than 8 values
        one after another from 0.0 (the same additions here, without the arrays)."""
        if len(path) >= 8:
            return float(self.latency[list(path)].sum())
        total, latency = 0.0, self.latency
        for link in path:
            total += latency.item(link)
        return total

    def _hop_distances(self, node: str) -> np.ndarray:
        """Hops from `node` to every switch (breadth-first search in scipy), one cached row per switch.
        A leaf switch (one neighbour, e.g. a ToR under its pod) is one hop further than its neighbour
        from every other switch, so its row is that one's plus one: no search of its own."""
        hops = self._hops
        if "adjacency" not in hops:
            assert self._switch_nodes, "switch hop distances of a topology without switches"
            order = self._switch_nodes
            index = {n: i for i, n in enumerate(order)}
            hops.update(adjacency=_adjacency(self._fabric, index), index=index, order=order, rows={})
        rows = hops["rows"]
        if node not in rows:
            i = hops["index"][node]
            indptr, indices = hops["adjacency"]
            neighbours = indices[indptr[i] : indptr[i + 1]]
            parent = hops["order"][neighbours[0]] if len(neighbours) == 1 else None
            if parent is not None and indptr[neighbours[0] + 1] - indptr[neighbours[0]] > 1:
                row = self._hop_distances(parent) + 1.0
                row[i] = 0.0
            else:
                row = _breadth_first_hops(indptr, indices, i)
            rows[node] = row
        return rows[node]

    def _few_shortest_paths(self, a: str, b: str) -> list[tuple[int, ...]] | None:
        """All shortest switch paths a -> b as link-id tuples, or None if there are more than max_paths
        (the same set networkx enumerates, found from cached hop distances: fast for many pairs).
        The switches on some shortest path are those whose hops from a and to b add up to its length;
        paths grow level by level (hops from a) over the links between consecutive levels."""
        from_a, to_b = self._hop_distances(a), self._hop_distances(b)
        order, index = self._hops["order"], self._hops["index"]
        length = float(from_a[index[b]])
        if not math.isfinite(length):
            raise NoPathError(f"no path between {a} and {b}")
        on_path = np.flatnonzero(from_a + to_b == length)
        levels: list[list[str]] = [[] for _ in range(int(length) + 1)]
        for i, level in zip(on_path.tolist(), from_a[on_path].tolist()):
            levels[int(level)].append(order[i])
        edge_id = self._edge_id
        paths: list[tuple[str, tuple[int, ...]]] = [(a, ())]  # (last switch, links so far)
        for level in levels[1:]:
            paths = [(n, links + (edge_id[(last, n)],)) for last, links in paths for n in level if (last, n) in edge_id]
            if len(paths) > self.max_paths:  # partial paths never outnumber the whole ones
                return None
        return [links for _, links in paths]

    def switch_paths(self, a: str, b: str) -> list[tuple[int, ...]]:
        """The equal-cost paths between switches a and b (up to `max_paths`), each a tuple of link ids; cached."""
        key = (a, b)
        if key not in self._switch_paths:
            paths: list[tuple[int, ...]] | None
            if a == b:
                paths = [()]
            else:
                paths = self._few_shortest_paths(a, b)
                if paths is None:  # more than max_paths: networkx's enumeration picks which
                    paths = []
                    from networkx import all_shortest_paths

                    for nodes in all_shortest_paths(self.switch_graph, a, b):
                        paths.append(tuple(self._edge_id[(u, v)] for u, v in zip(nodes, nodes[1:])))
                        if len(paths) >= self.max_paths:
                            break
                paths.sort()
            self._switch_paths[key] = paths
        return self._switch_paths[key]


class NoPathError(ValueError):
    """Two switches of a topology are not connected."""


def _adjacency(fabric: list[tuple[str, str]], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The switch graph's adjacency as CSR (indptr, indices: each switch's neighbours ascending, both
    directions; parallel links count once), rows in `index` order."""
    pairs = {(index[u], index[v]) for u, v in fabric} | {(index[v], index[u]) for u, v in fabric}
    rows, cols = (np.array(c, dtype=np.int64) for c in zip(*sorted(pairs))) if pairs else (np.zeros(0, np.int64),) * 2
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(index)))])
    return indptr, cols


def _breadth_first_hops(indptr: np.ndarray, indices: np.ndarray, source: int) -> np.ndarray:
    """Hops from switch `source` to every switch (inf: unreachable) over the CSR adjacency, a level
    at a time (the frontier's neighbours not reached yet)."""
    hops = np.full(len(indptr) - 1, np.inf)
    hops[source] = 0.0
    frontier, level = np.array([source]), 0.0
    while len(frontier):
        level += 1.0
        reached = np.concatenate([indices[indptr[k] : indptr[k + 1]] for k in frontier.tolist()])
        new = np.zeros(len(hops), dtype=bool)
        new[reached[hops[reached] == np.inf]] = True
        frontier = np.flatnonzero(new)
        hops[frontier] = level
    return hops
