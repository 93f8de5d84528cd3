"""Building a cluster's `Topology` from its `TopologySpec`: one builder per kind, and shape checks.

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
with their own NIC spec, so their traffic shares the same links. `check_shape` tells at load time,
by arithmetic only, whether a kind can hold a cluster's hosts.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from hardware_models.memory import MemoryTierSpec
from hardware_models.nic import LinkSpec
from hardware_models.topology import HostPool, Topology, TopologySpec, tier_read_capacity
from hardware_models.units import parse_quantity


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
    switch_nodes = sorted(b.switches)  # then fabric ends not declared switches, as first seen
    switch_nodes += list(dict.fromkeys(n for pair in b.fabric for n in pair if n not in b.switches))
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
        _switch_nodes=switch_nodes,
        _fabric=list(b.fabric),
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
    import networkx as nx  # lazy: only graph files need it (start-up, issue 26)

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
