"""The cluster's network drawn as a graph with link utilisation (networkx + matplotlib).

Aggregation keeps big clusters readable: every node inside a host (GPUs, NVSwitch, CPU, memory
tiers) collapses into one host node `h3`, a pool host and its media into `storage2`; when there
are more than `max_hosts` hosts (or more than `max_switches` switches of one name family, e.g.
`leaf0..leaf63`, or more than 4 hosts in a pool), consecutive ones merge into blocks (`h0-15`). A drawn edge stands for all the
links between two drawn nodes, in both directions; it is coloured by the *highest* utilisation among
them (a hot link is not averaged away) and its width grows with their total capacity. Host nodes
are coloured by the busiest link inside them (NVLink, PCIe, memory tiers).

Layout: hosts at the bottom, then switches by hop distance from the hosts (leaf, spine, core),
pools above the top layer.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

import matplotlib
import matplotlib.pyplot as plt  # backend: chosen in sim.report.plots
import networkx as nx
import numpy as np
import pandas as pd

from sim.report.plots import finish

_HOST = re.compile(r"^h(\d+)(?:/.*)?$")
_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _block_name(prefix: str, k: int, size: int, count: int) -> str:
    if size <= 1:
        return f"{prefix}{k}"
    lo = (k // size) * size
    hi = min(lo + size, count) - 1
    return f"{prefix}{lo}-{hi}" if hi > lo else f"{prefix}{lo}"


def node_groups(
    topology, max_hosts: int = 16, max_switches: int = 16, max_pool_blocks: int = 4
) -> tuple[dict[str, str], dict[str, str]]:
    """(graph node -> drawn node, drawn node -> role in host | pool | switch)."""
    n_hosts = len(topology.hosts)
    host_block = math.ceil(n_hosts / max_hosts) if n_hosts > max_hosts else 1
    pool_of = {}
    for pool, names in topology.pools.items():
        size = math.ceil(len(names) / max_pool_blocks) if len(names) > max_pool_blocks else 1
        for k, name in enumerate(names):
            pool_of[name] = _block_name(pool, k, size, len(names))
    families: dict[str, list[int]] = defaultdict(list)
    nodes = list(topology.graph.nodes)
    for node in nodes:
        if _HOST.match(node) or node.split("/")[0] in pool_of:
            continue
        m = _NUMBERED.match(node)
        if m:
            families[m.group(1)].append(int(m.group(2)))
    mapping, role = {}, {}
    for node in nodes:
        m = _HOST.match(node)
        if m:
            drawn = _block_name("h", int(m.group(1)), host_block, n_hosts)
            mapping[node], role[drawn] = drawn, "host"
            continue
        top = node.split("/")[0]
        if top in pool_of:
            mapping[node], role[pool_of[top]] = pool_of[top], "pool"
            continue
        m = _NUMBERED.match(node)
        drawn = node
        if m and len(families[m.group(1)]) > max_switches:
            count = max(families[m.group(1)]) + 1
            drawn = _block_name(m.group(1), int(m.group(2)), math.ceil(count / max_switches), count)
        mapping[node], role[drawn] = drawn, "switch"
    return mapping, role


def natural_key(name: str) -> tuple:
    """Sort `h2` before `h10`, `leaf1` before `leaf10`."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def aggregate(topology, links: pd.DataFrame, mapping: dict[str, str]) -> tuple[nx.Graph, dict[str, float]]:
    """Undirected graph of drawn nodes with edge attributes `utilisation` (max over member links)
    and `capacity_bytes_per_s` (sum); and the max utilisation of links inside each drawn node."""
    g = nx.Graph()
    g.add_nodes_from(sorted(dict.fromkeys(mapping.values()), key=natural_key))  # layout order
    inside: dict[str, float] = defaultdict(float)
    util = links["utilisation"].to_numpy()
    cap = links["capacity_bytes_per_s"].to_numpy()
    for lid, (u, v) in enumerate(zip(topology.link_src, topology.link_dst)):
        a, b = mapping[u], mapping[v]
        if a == b:
            inside[a] = max(inside[a], float(util[lid]))
            continue
        if g.has_edge(a, b):
            e = g.edges[a, b]
            e["utilisation"] = max(e["utilisation"], float(util[lid]))
            e["capacity_bytes_per_s"] += float(cap[lid])
        else:
            g.add_edge(a, b, utilisation=float(util[lid]), capacity_bytes_per_s=float(cap[lid]))
    return g, dict(inside)


def layers(g: nx.Graph, role: dict[str, str]) -> dict[str, int]:
    """Hosts 0, switches by hop distance from the nearest host, pools above the top layer."""
    hosts = [n for n in g if role[n] == "host"]
    dist = nx.multi_source_dijkstra_path_length(g, hosts) if hosts else {}
    layer = {n: (0 if role[n] == "host" else int(dist.get(n, 1))) for n in g}
    top = max([layer[n] for n in g if role[n] == "switch"], default=0)
    for n in g:
        if role[n] == "pool":
            layer[n] = top + 1
    return layer


def topology(
    topo,
    links: pd.DataFrame,
    title: str = "Topology and link utilisation",
    path=None,
    max_hosts: int = 16,
    max_switches: int = 16,
):
    """Draw the aggregated switch graph; edge colour = max link utilisation, width ~ capacity."""
    mapping, role = node_groups(topo, max_hosts, max_switches)
    g, inside = aggregate(topo, links, mapping)
    layer = layers(g, role)
    by_layer: dict[int, list[str]] = defaultdict(list)
    for n in g:  # g's node order is natural order
        by_layer[layer[n]].append(n)
    pos = nx.multipartite_layout(g, subset_key=dict(by_layer), align="horizontal", scale=1.0)
    cmap = plt.get_cmap("plasma")
    norm = matplotlib.colors.Normalize(vmin=0, vmax=100)
    widest = max(np.bincount(list(layer.values())))
    fig, ax = plt.subplots(figsize=(min(max(8.0, 0.8 * widest + 3), 18), 6.5 if len(g) > 12 else 5))
    edges = list(g.edges(data=True))
    if edges:
        caps = np.array([d["capacity_bytes_per_s"] for _, _, d in edges])
        widths = 2.0 + 4.0 * (np.log10(caps) - np.log10(caps.min())) / max(np.ptp(np.log10(caps)), 1e-9)
        nx.draw_networkx_edges(
            g,
            pos,
            ax=ax,
            edgelist=[(u, v) for u, v, _ in edges],
            width=widths,
            edge_color=[cmap(norm(d["utilisation"] * 100)) for _, _, d in edges],
        )
        if len(edges) <= 40:
            nx.draw_networkx_edge_labels(
                g,
                pos,
                ax=ax,
                font_size=7,
                rotate=False,
                edge_labels={(u, v): f"{d['utilisation']:.0%}" for u, v, d in edges},
            )
    styles = {"host": ("s", 700), "switch": ("o", 450), "pool": ("D", 500)}
    for r, (shape, size) in styles.items():
        nodes = [n for n in g if role[n] == r]
        if not nodes:
            continue
        colors = [cmap(norm(inside.get(n, 0.0) * 100)) if r == "host" else "lightsteelblue" for n in nodes]
        nx.draw_networkx_nodes(
            g,
            pos,
            nodelist=nodes,
            node_shape=shape,
            node_size=size,
            node_color=colors,
            edgecolors="black",
            linewidths=0.6,
            ax=ax,
        )
    small = len(g) < 40
    names = {n: (f"{n}\n{inside.get(n, 0.0):.0%}" if role[n] == "host" and small else n) for n in g}
    nx.draw_networkx_labels(
        g,
        pos,
        labels=names,
        ax=ax,
        font_size=7 if small else 5,
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
    )
    sm = matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap)
    cbar = fig.colorbar(sm, ax=ax, fraction=0.035, pad=0.02)
    cbar.set_label(
        "link utilisation over the run (%)\n(edges: max of member links; hosts: busiest internal link)", fontsize=8
    )
    handles = [
        plt.Line2D(
            [],
            [],
            marker=styles[r][0],
            linestyle="",
            markersize=8,
            markerfacecolor="white",
            markeredgecolor="black",
            label=r,
        )
        for r in styles
        if any(role[n] == r for n in g)
    ]
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles), fontsize=8, frameon=False
    )
    ax.set_title(title + f"  ({len(topo.hosts)} hosts, {topo.num_links} directed links; width ~ capacity)", fontsize=10)
    ax.axis("off")
    return finish(fig, path)
