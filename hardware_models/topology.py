"""Cluster topologies as graphs of directed, full-duplex links.

Every host holds `gpus_per_node` devices joined by a scale-up fabric (one NVSwitch node per host:
device <-> `h{i}/nvs` links at the scale-up bandwidth) and one NIC per device linking it to the
first switch of the scale-out network. Builders (`kind`):

- `single-switch`: every NIC on one switch.
- `fat-tree`: two-level leaf/spine. `hosts_per_leaf` hosts per leaf, `spines` spines, each leaf
  joined to every spine; `oversubscription` = leaf downlink capacity / leaf uplink capacity.
- `rail-optimized`: device j of every host on rail switch j; rail switches joined by spines.
  With `ecmp: even` the parallel spines of both are aggregated into one node of their summed
  capacity by default (`aggregate_spines`): every leaf reaches every spine over equal links, so the
  even split loads the k parallel links identically and one link of k x capacity carries exactly
  the same flows at the same rates (tested against explicit spines).
- `clos3`: three layers as in the Llama 3 cluster (docs/references.md#clusters): `gpus_per_tor` devices per ToR,
  `gpus_per_pod` per pod at full bisection, pods joined with `oversubscription` (default 7). Each
  layer of parallel spines is aggregated into one node per pod/core: with even ECMP splitting, k
  equal parallel links carry exactly what one link of k times the capacity carries.
- `ring` / `torus`: hosts on a ring or a 2D/3D torus (`dims`), each host's NICs bundled on a host
  router linked to its neighbours.
- `graph`: a user's GraphML or edge-list file of switches (`file`), with `hosts` naming the node
  each host attaches to (default: the graph's degree-1 nodes, in sorted order).

Extra host pools (storage, preprocessing) attach to the top switches (`Topology.attach_points`)
with their own NIC spec, so their traffic shares the same links.

Memory and storage tiers are endpoints too, so one mechanism (max-min fair flows) shares a tier's
bandwidth between everyone reading it: each host has a CPU/root-complex node `h{i}/cpu` joined to
each of its devices by a host link (PCIe), and each host tier (DDR, CXL, SCM, SSD) is a node
`h{i}/{tier}` hanging off `h{i}/cpu`; a pool host's media (disks) hang off the pool host. A tier's
read link carries min(bandwidth, iops x granularity) - every random access moves at least one
granule - and its write link the write bandwidth; the link latency is the tier's access latency.

Routing: endpoints (devices, pool hosts) hang off one first-hop switch; switch-to-switch paths are
all shortest paths on the switch graph (up to `max_paths`, deterministic order), cached per switch
pair. `routes(src, dst)` returns equal-cost paths as tuples of link ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import networkx as nx
import numpy as np
from pydantic import Field, model_validator
from scipy.sparse.csgraph import shortest_path

from hardware_models.memory import MemoryTierSpec
from hardware_models.nic import LinkSpec
from hardware_models.spec import Spec
from hardware_models.units import Seconds, parse_quantity

if TYPE_CHECKING:
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
    _switch_graph: nx.Graph | None = None
    _switch_paths: dict[tuple[str, str], list[tuple[int, ...]]] = field(default_factory=dict)
    _router: BatchRouter | None = None
    _hops: dict = field(default_factory=dict)  # switch graph as CSR and hop distances per switch (lazy)

    @property
    def graph(self) -> nx.DiGraph:
        """The directed graph of every link (edge attributes: capacity, latency, kind, id), built on
        demand from the link arrays (so it shows capacities as they are now, e.g. after stragglers)."""
        g = nx.DiGraph()
        g.add_edges_from(
            (u, v, {"capacity": float(c), "latency": float(l), "kind": k, "id": i})
            for i, (u, v, c, l, k) in enumerate(
                zip(self.link_src, self.link_dst, self.capacity, self.latency, self.link_kind)
            )
        )
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

    def link_id(self, src: str, dst: str) -> int:
        return self._edge_id[(src, dst)]

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
        return [(up, *middle, down) for middle in self._between_switches(s_sw, d_sw)]

    def path_latency_s(self, path: tuple[int, ...]) -> float:
        return float(self.latency[list(path)].sum()) if path else 0.0

    def _hop_distances(self, node: str) -> np.ndarray:
        """Hops from `node` to every switch (breadth-first search in scipy), one cached row per switch.
        A leaf switch (one neighbour, e.g. a ToR under its pod) is one hop further than its neighbour
        from every other switch, so its row is that one's plus one: no search of its own."""
        hops = self._hops
        if "adjacency" not in hops:
            assert self._switch_graph is not None, "switch hop distances of a topology without switches"
            order = list(self._switch_graph.nodes)
            hops.update(
                adjacency=nx.to_scipy_sparse_array(self._switch_graph, nodelist=order, format="csr"),
                index={n: i for i, n in enumerate(order)},
                order=order,
                rows={},
            )
        rows = hops["rows"]
        if node not in rows:
            i = hops["index"][node]
            adjacency = hops["adjacency"]
            neighbours = adjacency.indices[adjacency.indptr[i] : adjacency.indptr[i + 1]]
            parent = hops["order"][neighbours[0]] if len(neighbours) == 1 else None
            if parent is not None and adjacency.indptr[neighbours[0] + 1] - adjacency.indptr[neighbours[0]] > 1:
                row = self._hop_distances(parent) + 1.0
                row[i] = 0.0
            else:
                row = shortest_path(adjacency, unweighted=True, directed=False, indices=i)
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
            raise nx.NetworkXNoPath(f"no path between {a} and {b}")
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

    def _between_switches(self, a: str, b: str) -> list[tuple[int, ...]]:
        key = (a, b)
        if key not in self._switch_paths:
            paths: list[tuple[int, ...]] | None
            if a == b:
                paths = [()]
            else:
                paths = self._few_shortest_paths(a, b)
                if paths is None:  # more than max_paths: networkx's enumeration picks which
                    paths = []
                    for nodes in nx.all_shortest_paths(self._switch_graph, a, b):
                        paths.append(tuple(self._edge_id[(u, v)] for u, v in zip(nodes, nodes[1:])))
                        if len(paths) >= self.max_paths:
                            break
                paths.sort()
            self._switch_paths[key] = paths
        return self._switch_paths[key]


class _Builder:
    """Accumulates nodes and full-duplex links, then freezes them into a Topology."""

    def __init__(self, switch_latency_s: float):
        self.switch_latency_s = switch_latency_s
        self.src: list[str] = []
        self.dst: list[str] = []
        self.kind: list[str] = []
        self.cap: list[float] = []
        self.lat: list[float] = []
        self.first_hop: dict[str, str] = {}
        self.switches: set[str] = set()
        self.fabric: list[tuple[str, str]] = []  # switch-to-switch links, once per duplex pair

    def duplex(self, a: str, b: str, capacity: float, kind: str, lat_ab: float, lat_ba: float) -> None:
        if kind == "fabric":
            self.fabric.append((a, b))
        self.src += (a, b)
        self.dst += (b, a)
        self.kind += (kind, kind)
        self.cap += (capacity, capacity)
        self.lat += (lat_ab, lat_ba)

    def switch_link(self, a: str, b: str, capacity: float) -> None:
        self.switches.update((a, b))
        self.duplex(a, b, capacity, "fabric", self.switch_latency_s, self.switch_latency_s)

    def hang(self, node: str, parent: str, tier: MemoryTierSpec, parents: dict[str, str]) -> None:
        """A tier/media node below `parent`: read link tier->parent, write link parent->tier."""
        parents[node] = parent
        for u, v, cap in ((node, parent, tier_read_capacity(tier)), (parent, node, tier.write_bandwidth_bytes_per_s)):
            self.src.append(u)
            self.dst.append(v)
            self.kind.append("memory")
            self.cap.append(cap)
            self.lat.append(tier.latency)

    def endpoint(self, node: str, switch: str, nic: LinkSpec) -> None:
        """A NIC: the endpoint's egress pays the NIC latency, the switch's egress one hop."""
        self.switches.add(switch)
        self.first_hop[node] = switch
        self.duplex(node, switch, nic.achieved_bytes_per_s, "nic", nic.latency, self.switch_latency_s)


def build_topology(
    spec: TopologySpec,
    nodes: int,
    gpus_per_node: int,
    nic: LinkSpec,
    scale_up: LinkSpec,
    pools: list[HostPool] | None = None,
    host_link: LinkSpec | None = None,
    host_tiers: list[MemoryTierSpec] | None = None,
) -> Topology:
    """Build the cluster's graph: hosts with scale-up fabrics, host links and tiers, NICs, switches
    and host pools."""
    b = _Builder(spec.switch_latency)
    hosts: list[list[str]] = []
    host_of: dict[str, int] = {}
    parents: dict[str, str] = {}
    scale_up_bw = scale_up.achieved_bytes_per_s
    host_bw = host_link.achieved_bytes_per_s if host_link is not None else 0.0
    for h in range(nodes):
        nvs, cpu = f"h{h}/nvs", f"h{h}/cpu"
        devs = [f"h{h}/g{j}" for j in range(gpus_per_node)]
        host_of[cpu] = h
        for d in devs:
            b.duplex(d, nvs, scale_up_bw, "scale_up", scale_up.latency, 0.0)
            if host_link is not None:
                b.duplex(cpu, d, host_bw, "host", host_link.latency, host_link.latency)
            host_of[d] = h
        for tier in host_tiers or []:
            b.hang(f"h{h}/{tier.name}", cpu, tier, parents)
        hosts.append(devs)
    attach = _BUILDERS[spec.kind](b, spec, hosts, nic)
    pool_nodes: dict[str, list[str]] = {}
    for pool in pools or []:
        names = [f"{pool.name}{k}" for k in range(pool.count)]
        for k, name in enumerate(names):
            b.endpoint(name, attach[k % len(attach)], pool.nic)
            for medium in pool.media:
                b.hang(f"{name}/{medium.name}", name, medium, parents)
        pool_nodes[pool.name] = names
    switch_graph = nx.Graph()
    switch_graph.add_nodes_from(sorted(b.switches))
    switch_graph.add_edges_from(b.fabric)
    topo = Topology(
        devices=[d for devs in hosts for d in devs],
        hosts=hosts,
        pools=pool_nodes,
        attach_points=attach,
        link_src=b.src,
        link_dst=b.dst,
        link_kind=b.kind,
        capacity=np.asarray(b.cap, dtype=float),
        latency=np.asarray(b.lat, dtype=float),
        max_paths=spec.max_paths,
        _edge_id=dict(zip(zip(b.src, b.dst), range(len(b.src)))),
        _first_hop=b.first_hop,
        _host_of=host_of,
        _parent=parents,
        _switch_graph=switch_graph,
    )
    return topo


def check_shape(spec: TopologySpec, nodes: int, gpus_per_node: int) -> None:
    """Raise ValueError if the topology cannot hold `nodes` hosts of `gpus_per_node` devices."""
    if spec.kind == "fat-tree":
        per_leaf = spec.hosts_per_leaf or min(nodes, max(1, 16 // gpus_per_node))
        _check_divides(nodes, per_leaf, "leaves")
    elif spec.kind == "clos3":
        if spec.gpus_per_tor % gpus_per_node or spec.gpus_per_pod % spec.gpus_per_tor:
            raise ValueError(
                f"clos3: gpus_per_tor {spec.gpus_per_tor} must be a multiple of gpus_per_node "
                f"{gpus_per_node} and divide gpus_per_pod {spec.gpus_per_pod}"
            )
        _check_divides(nodes, spec.gpus_per_tor // gpus_per_node, "ToRs")
    elif spec.kind in ("ring", "torus"):
        dims = spec.dims or [nodes]
        if math.prod(dims) != nodes:  # Python ints: np.prod would overflow silently
            raise ValueError(f"{spec.kind} dims {dims} hold {math.prod(dims)} hosts, cluster has {nodes}")


def _check_divides(n: int, size: int, what: str) -> None:
    """Load-time shape check: arithmetic only (a huge `nodes` must not build anything here)."""
    if n % size:
        raise ValueError(f"{n} hosts do not divide into {what} of {size}")


def _host_groups(n: int, size: int, what: str) -> list[range]:
    _check_divides(n, size, what)
    return [range(i, i + size) for i in range(0, n, size)]


def _single_switch(b: _Builder, spec: TopologySpec, hosts, nic) -> list[str]:
    for devs in hosts:
        for d in devs:
            b.endpoint(d, "switch", nic)
    return ["switch"]


def _fat_tree(b: _Builder, spec: TopologySpec, hosts, nic) -> list[str]:
    gpn = len(hosts[0])
    per_leaf = spec.hosts_per_leaf or min(len(hosts), max(1, 16 // gpn))
    spines = spec.spines or max(1, min(per_leaf * gpn, 16))
    over = spec.oversubscription or 1.0
    leaves = _host_groups(len(hosts), per_leaf, "leaves")
    uplink = per_leaf * gpn * nic.achieved_bytes_per_s / over / spines
    names, uplink = _spine_layer(spec, spines, uplink)
    for li, group in enumerate(leaves):
        for h in group:
            for d in hosts[h]:
                b.endpoint(d, f"leaf{li}", nic)
        for name in names:
            b.switch_link(f"leaf{li}", name, uplink)
    return names


def _spine_layer(spec: TopologySpec, spines: int, uplink: float) -> tuple[list[str], float]:
    """Spine node names and the capacity of each leaf-spine link (aggregated or explicit)."""
    if spec.spines_aggregated:
        return ["spines"], uplink * spines
    return [f"spine{s}" for s in range(spines)], uplink


def _rail_optimized(b: _Builder, spec: TopologySpec, hosts, nic) -> list[str]:
    gpn = len(hosts[0])
    spines = spec.spines or gpn
    over = spec.oversubscription or 1.0
    uplink = len(hosts) * nic.achieved_bytes_per_s / over / spines
    names, uplink = _spine_layer(spec, spines, uplink)
    for r in range(gpn):
        for devs in hosts:
            b.endpoint(devs[r], f"rail{r}", nic)
        for name in names:
            b.switch_link(f"rail{r}", name, uplink)
    return names


def _clos3(b: _Builder, spec: TopologySpec, hosts, nic) -> list[str]:
    gpn = len(hosts[0])
    if spec.gpus_per_tor % gpn or spec.gpus_per_pod % spec.gpus_per_tor:
        raise ValueError(
            f"clos3: gpus_per_tor {spec.gpus_per_tor} must be a multiple of gpus_per_node {gpn} "
            f"and divide gpus_per_pod {spec.gpus_per_pod}"
        )
    hosts_per_tor = spec.gpus_per_tor // gpn
    tors_per_pod = spec.gpus_per_pod // spec.gpus_per_tor
    over = spec.oversubscription or 7.0
    tor_bw = spec.gpus_per_tor * nic.achieved_bytes_per_s
    tors = _host_groups(len(hosts), hosts_per_tor, "ToRs")
    pods = (len(tors) + tors_per_pod - 1) // tors_per_pod
    for t, group in enumerate(tors):
        pod = t // tors_per_pod
        for h in group:
            for d in hosts[h]:
                b.endpoint(d, f"tor{t}", nic)
        b.switch_link(f"tor{t}", f"pod{pod}", tor_bw)  # full bisection inside a pod
    if pods > 1:
        for p in range(pods):
            n_tors = min(tors_per_pod, len(tors) - p * tors_per_pod)
            b.switch_link(f"pod{p}", "core", n_tors * tor_bw / over)
        return ["core"]
    return ["pod0"]


def _ring_or_torus(b: _Builder, spec: TopologySpec, hosts, nic) -> list[str]:
    dims = spec.dims or [len(hosts)]
    if int(np.prod(dims)) != len(hosts):
        raise ValueError(f"{spec.kind} dims {dims} hold {int(np.prod(dims))} hosts, cluster has {len(hosts)}")
    bundle = len(hosts[0]) * nic.achieved_bytes_per_s
    for h, devs in enumerate(hosts):
        for d in devs:
            b.endpoint(d, f"r{h}", nic)
    coords = list(np.ndindex(*dims))
    index = {c: i for i, c in enumerate(coords)}
    done = set()
    for c in coords:
        for axis, size in enumerate(dims):
            if size < 2:
                continue
            nb = list(c)
            nb[axis] = (c[axis] + 1) % size
            pair = tuple(sorted((index[c], index[tuple(nb)])))
            if pair[0] != pair[1] and pair not in done:
                done.add(pair)
                b.switch_link(f"r{pair[0]}", f"r{pair[1]}", bundle)
    return [f"r{h}" for h in range(len(hosts))]


def _graph_file(b: _Builder, spec: TopologySpec, hosts, nic) -> list[str]:
    assert spec.file is not None, "TopologySpec requires file for kind graph"
    path = Path(spec.file)
    if not path.is_file():
        raise ValueError(f"topology file {spec.file!r} not found")
    if path.suffix.lower() in (".graphml", ".xml"):
        try:
            g = nx.read_graphml(path)
        except Exception as exc:  # noqa: BLE001 - XML ParseError, NetworkXError, KeyError...: all "bad file"
            raise ValueError(f"{path}: not a readable GraphML file ({type(exc).__name__}: {exc})") from None
    else:
        g = nx.Graph()
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            parts = line.split("#")[0].split()
            if not parts:
                continue
            if len(parts) < 3:
                raise ValueError(f"{path}:{lineno}: expected 'src dst bandwidth [latency]'")
            attrs = {"bandwidth": parts[2]}
            if len(parts) > 3:
                attrs["latency"] = parts[3]
            g.add_edge(parts[0], parts[1], **attrs)
    g = nx.relabel_nodes(g, str)
    if g.number_of_edges() == 0:
        raise ValueError(f"{path}: the graph has no edges")
    for u, v, data in g.edges(data=True):
        if "bandwidth" not in data:
            raise ValueError(f"{path}: edge {u}-{v} has no bandwidth")
        try:
            cap = parse_quantity(
                str(data["bandwidth"]).replace("_", " ") if isinstance(data["bandwidth"], str) else data["bandwidth"],
                "bytes_per_s",
            )
            lat = parse_quantity(data.get("latency", spec.switch_latency), "seconds")
        except ValueError as exc:
            raise ValueError(f"{path}: edge {u}-{v}: {exc}") from None
        if cap <= 0 or lat < 0 or u == v:
            raise ValueError(f"{path}: edge {u}-{v} needs two distinct nodes, bandwidth > 0 and latency >= 0")
        b.switches.update((u, v))
        b.duplex(u, v, cap, "fabric", lat, lat)
    attach = spec.hosts or sorted(n for n in g.nodes if g.degree(n) == 1)
    if len(attach) < len(hosts):
        raise ValueError(f"graph {path} offers {len(attach)} host attachment nodes, cluster has {len(hosts)} hosts")
    for h, devs in enumerate(hosts):
        if attach[h] not in g:
            raise ValueError(f"graph {path} has no node {attach[h]!r}")
        for d in devs:
            b.endpoint(d, attach[h], nic)
    reachable = nx.node_connected_component(g.to_undirected(as_view=True), attach[0])
    apart = [a for a in attach[: len(hosts)] if a not in reachable]
    if apart:
        raise ValueError(f"graph {path}: host attachment node {apart[0]!r} is not connected to {attach[0]!r}")
    return sorted(reachable)[:1]


_BUILDERS = {
    "single-switch": _single_switch,
    "fat-tree": _fat_tree,
    "rail-optimized": _rail_optimized,
    "clos3": _clos3,
    "ring": _ring_or_torus,
    "torus": _ring_or_torus,
    "graph": _graph_file,
}
