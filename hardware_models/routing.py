"""Vectorised routing of many flows at once (the bulk path of the flow network).

`Topology.routes(src, dst)` answers one pair in Python; a 1,024-GPU all-to-all asks a million
pairs. `BatchRouter` precomputes, per endpoint (device or pool host), its NIC up/down links, its
first-hop switch, its host and its scale-up links, and then routes whole arrays of (src, dst)
pairs with numpy: same-host pairs over the scale-up fabric, others as NIC up-link + every
equal-cost switch path between the two first-hop switches (computed once per switch pair) + NIC
down-link. The result is identical to calling `routes` per pair (tested); endpoints that hang off
other nodes (memory tiers, media) are not handled here and make `route` return None, so the caller
falls back to the per-pair path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RoutedFlows:
    flat: np.ndarray  # link ids of all sub-flows, concatenated
    lengths: np.ndarray  # links per sub-flow
    owner: np.ndarray  # index of the flow each sub-flow belongs to (sub-flows of a flow are contiguous)
    share: np.ndarray  # fraction of its flow's bytes each sub-flow carries (1 / number of paths)
    latency: np.ndarray  # path latency per sub-flow, s


class BatchRouter:
    def __init__(self, topology) -> None:
        self.topo = topology
        endpoints = topology.endpoints()
        self.index = {name: i for i, name in enumerate(endpoints)}
        first_hop = [topology.first_hop(e) for e in endpoints]
        switches = sorted(set(first_hop))
        self.switches = switches
        sw_index = {s: i for i, s in enumerate(switches)}
        self.up = np.array([topology.link_id(e, s) for e, s in zip(endpoints, first_hop)], dtype=np.int64)
        self.down = np.array([topology.link_id(s, e) for e, s in zip(endpoints, first_hop)], dtype=np.int64)
        self.switch = np.array([sw_index[s] for s in first_hop], dtype=np.int64)
        hosts = [-1 if (h := topology.host_of(e)) is None else h for e in endpoints]
        self.host = np.array(hosts, dtype=np.int64)
        self.nvs_up = np.array([topology.link_id_or(e, f"h{h}/nvs") for e, h in zip(endpoints, hosts)], dtype=np.int64)
        self.nvs_down = np.array(
            [topology.link_id_or(f"h{h}/nvs", e) for e, h in zip(endpoints, hosts)], dtype=np.int64
        )
        self._pair_paths: dict[int, tuple[int, int]] = {}  # switch pair key -> (first path id, count)
        self._paths: list[tuple[int, ...]] = []
        self._table: tuple[np.ndarray, np.ndarray] | None = None

    def _pair(self, key: int) -> tuple[int, int]:
        if key not in self._pair_paths:
            n = len(self.switches)
            a, b = self.switches[key // n], self.switches[key % n]
            paths = self.topo.switch_paths(a, b)
            self._pair_paths[key] = (len(self._paths), len(paths))
            self._paths.extend(paths)
        return self._pair_paths[key]

    def _path_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Every switch path known so far as a -1-padded (paths x hops) array, and its latency;
        extended by the paths of switch pairs routed since (rebuilt whole only when a longer path
        widens it: the rows and sums a whole rebuild would give)."""
        table, paths = self._table, self._paths
        built = 0 if table is None else len(table[0])
        if built == len(paths):
            assert table is not None
            return table
        width = max(len(p) for p in paths[built:])  # of the new paths
        if table is not None and width > table[0].shape[1]:
            table, built = None, 0  # a longer path: every row padded anew
        if table is not None:
            width = table[0].shape[1]
        padded = np.full((len(paths) - built, width), -1, dtype=np.int64)
        for i, p in enumerate(paths[built:]):
            padded[i, : len(p)] = p
        lat = self.topo.latency
        latency = np.where(padded >= 0, lat[np.maximum(padded, 0)], 0.0).sum(axis=1)
        if table is not None:
            padded, latency = np.concatenate([table[0], padded]), np.concatenate([table[1], latency])
        self._table = (padded, latency)
        return self._table

    def route(self, srcs: list[str], dsts: list[str]) -> RoutedFlows | None:
        try:
            s = np.fromiter((self.index[x] for x in srcs), dtype=np.int64, count=len(srcs))
            d = np.fromiter((self.index[x] for x in dsts), dtype=np.int64, count=len(dsts))
        except KeyError:
            return None
        lat = self.topo.latency
        flows = np.arange(len(s))
        same_host = (self.host[s] == self.host[d]) & (self.host[s] >= 0) & (s != d)
        local = s == d
        cross = ~same_host & ~local
        parts = []
        # same host: over the scale-up fabric
        if same_host.any():
            f = flows[same_host]
            rows = np.stack([self.nvs_up[s[f]], self.nvs_down[d[f]]], axis=1)
            parts.append((f, rows, np.ones(len(f)), lat[rows].sum(axis=1)))
        # across hosts: NIC up + each equal-cost switch path + NIC down
        if cross.any():
            f = flows[cross]
            keys = self.switch[s[f]] * len(self.switches) + self.switch[d[f]]
            uniq, inverse = np.unique(keys, return_inverse=True)
            table = np.array([self._pair(int(k)) for k in uniq], dtype=np.int64)
            first, count = table[inverse, 0], table[inverse, 1]
            padded, path_lat = self._path_table()
            owner = np.repeat(f, count)
            starts = np.repeat(np.cumsum(count) - count, count)
            path_id = np.repeat(first, count) + (np.arange(len(owner)) - starts)
            rows = np.concatenate([self.up[s[owner]][:, None], padded[path_id], self.down[d[owner]][:, None]], axis=1)
            latency = lat[self.up[s[owner]]] + path_lat[path_id] + lat[self.down[d[owner]]]
            parts.append((owner, rows, 1.0 / np.repeat(count, count), latency))
        if local.any():
            f = flows[local]
            parts.append((f, np.zeros((len(f), 0), dtype=np.int64), np.ones(len(f)), np.zeros(len(f))))
        # each flow lives in exactly one part and its sub-flows are contiguous there
        masks = [rows >= 0 for _, rows, _, _ in parts]
        flat = np.concatenate([rows[m] for (_, rows, _, _), m in zip(parts, masks)])
        lengths = np.concatenate([m.sum(axis=1) for m in masks])
        return RoutedFlows(
            flat.astype(np.int64),
            lengths.astype(np.int64),
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
        )
