"""What draws power in a cluster: every component, its power spec, its group, rack and price.

`Inventory(cluster, hardware, pools)` walks the cluster's topology and hardware config (never a
workload) and lists:

- groups: one per GPU host `h{i}`, per pool host (storage, preprocessing ...) and per switch node;
  each group has a rack (a GPU host's rack is its first-hop switch - ToR, leaf or the one switch;
  pool hosts form `pool:{name}`; switches above the racks form `network`);
- per GPU host: GPUs, CPU sockets, DRAM (a `ddr` tier if listed, else `hardware.power.host_dram`),
  the chassis (`hardware.power.gpu_host`), per-GPU NIC, scale-up port and host link, memory tiers;
- per pool host: cores (`hardware.power.pool_cores` / `pool_host_cores`) at the host CPU's power
  per core, the chassis (`hardware.power.cpu_host`), its NIC and its media;
- per switch node: boxes = ceil(ports / radix), ports = the node's egress capacity in NIC-port
  equivalents (topology builders aggregate parallel spines into one node; this undoes it);
- per directed link, which rows its bytes charge and how many joules per byte (`link_coefficients`):
  a NIC, scale-up port or host link at full duplex line rate draws its max, so each direction
  charges (max - idle) / (2 x capacity); a switch box at full load moves radix x port rate in and
  out, so each byte entering or leaving a switch node charges (max - idle) / (2 x box capacity); a
  memory tier link (read or write) charges (max - idle) / its capacity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from hardware_models.spec import PowerSpec
from sim.engine.codes import factorize

CLASSES = ("gpu", "cpu", "dram", "chassis", "nic", "scale_up", "host_link", "memory_tier", "switch", "facility")
CLASS_ROW = {c: i for i, c in enumerate(CLASSES)}
_HOST = re.compile(r"h(\d+)$")


def dynamic_w(power: PowerSpec) -> float:
    return max(power.max - power.idle, 0.0)


@dataclass
class InventoryGroup:
    name: str
    kind: str  # gpu_host | pool_host | switch
    rack: str
    pool: str | None = None
    idle_w: dict[str, float] = field(default_factory=dict)  # class -> W
    price_per_hour: dict[str, float] = field(default_factory=dict)

    def add(self, cls: str, idle_w: float, price_per_hour: float = 0.0, count: float = 1.0) -> None:
        self.idle_w[cls] = self.idle_w.get(cls, 0.0) + idle_w * count
        self.price_per_hour[cls] = self.price_per_hour.get(cls, 0.0) + price_per_hour * count


class Inventory:
    def __init__(self, cluster, hardware, pools) -> None:
        self.cluster, self.hw, self.site = cluster, hardware, hardware.power
        topo = cluster.topology
        self.topology = topo
        self.pools = {p.name: p for p in pools}
        self.pool_of: dict[str, str] = {n: name for name, nodes in topo.pools.items() for n in nodes}
        self.device_index = {node: i for i, node in enumerate(topo.devices)}
        self.ddr_tier = hardware.tier("ddr")
        self.groups: list[InventoryGroup] = []
        self.group_index: dict[str, int] = {}
        self.switch_boxes: dict[str, int] = {}
        self.pool_gpus: set[str] = set()
        for h, devs in enumerate(topo.hosts):
            self._add_gpu_host(h, len(devs), (topo.first_hop(devs[0]) or "network") if devs else "network")
        for node, pool in self.pool_of.items():
            self._add_pool_host(node, pool)
        racks = {g.rack for g in self.groups}
        for sw, ports in self._switch_ports().items():
            boxes = max(1, math.ceil(ports / self.site.switch_radix - 1e-9))
            self.switch_boxes[sw] = boxes
            g = self._new_group(sw, "switch", sw if sw in racks else "network")
            g.add("switch", self.site.switch.power.idle, self.site.switch.power.price_per_hour, boxes)

    # ---- per-component figures -----------------------------------------------------------------
    @property
    def gpu_dynamic_w(self) -> float:
        return max(self.hw.gpu.max_power_w - self.hw.gpu.power.idle, 0.0)

    @property
    def host_cores(self) -> int:
        return self.hw.host_cpu.cores * self.hw.host_cpus

    def cpu_core_dynamic_w(self) -> float:
        return dynamic_w(self.hw.host_cpu.power) / self.hw.host_cpu.cores

    def pool_cores(self, node: str) -> int:
        return self.site.cores_of_pool(self.pool_of[node])

    # ---- building ---------------------------------------------------------------------------------
    def _new_group(self, name: str, kind: str, rack: str, pool: str | None = None) -> InventoryGroup:
        g = InventoryGroup(name, kind, rack, pool)
        self.group_index[name] = len(self.groups)
        self.groups.append(g)
        return g

    def _add_gpu_host(self, h: int, gpus: int, rack: str) -> None:
        hw, site = self.hw, self.site
        g = self._new_group(f"h{h}", "gpu_host", rack)
        g.add("gpu", hw.gpu.power.idle, hw.gpu.power.price_per_hour, gpus)
        g.add("cpu", hw.host_cpu.power.idle, hw.host_cpu.power.price_per_hour, hw.host_cpus)
        if self.ddr_tier is None:
            g.add("dram", site.host_dram.idle, site.host_dram.price_per_hour)
        g.add("chassis", site.gpu_host.idle, site.gpu_host.price_per_hour)
        g.add("nic", hw.nic.power.idle, hw.nic.power.price_per_hour, gpus)
        g.add("scale_up", hw.scale_up.power.idle, hw.scale_up.power.price_per_hour, gpus)
        g.add("host_link", hw.host_link.power.idle, hw.host_link.power.price_per_hour, gpus)
        for tier in hw.memory_tiers:
            g.add("memory_tier", tier.power.idle, tier.power.price_per_hour)

    def _add_pool_host(self, node: str, pool_name: str) -> None:
        pool, site, cpu = self.pools.get(pool_name), self.site, self.hw.host_cpu
        g = self._new_group(node, "pool_host", f"pool:{pool_name}", pool_name)
        cores = self.pool_cores(node)
        g.add("cpu", cpu.power.idle / cpu.cores, site.price_per_core_hour, cores)
        g.add("chassis", site.cpu_host.idle, site.cpu_host.price_per_hour)
        if pool is not None:
            g.add("nic", pool.nic.power.idle, pool.nic.power.price_per_hour)
            for medium in pool.media:
                g.add("memory_tier", medium.power.idle, medium.power.price_per_hour)

    def add_pool_gpu(self, component: str, node: str) -> None:
        """A GPU found on a pool host (e.g. a media worker's): powered like the cluster's GPU."""
        if component not in self.pool_gpus:
            self.pool_gpus.add(component)
            gpu = self.hw.gpu
            self.groups[self.group_index[node]].add("gpu", gpu.power.idle, gpu.power.price_per_hour)

    def _switch_ports(self) -> dict[str, float]:
        """Switch node -> egress capacity in NIC-port equivalents (port line rate x NIC efficiency)."""
        topo, endpoints = self.topology, set(self.device_index) | set(self.pool_of)
        port = self.site.switch.bandwidth * self.hw.nic.efficiency
        capacity = topo.capacity.tolist()
        ports: dict[str, float] = {}
        for i in [i for i, k in enumerate(topo.link_kind) if k == "nic" or k == "fabric"]:
            s, d = topo.link_src[i], topo.link_dst[i]
            for node in (s, d):
                if node not in endpoints:
                    ports.setdefault(node, 0.0)
            if s not in endpoints:
                ports[s] += capacity[i] / port
        return ports

    # ---- traffic ------------------------------------------------------------------------------------
    def owner_group(self, node: str) -> int | None:
        """Group of an endpoint-side node: its GPU host or pool host."""
        if node in self.pool_of:
            return self.group_index[node]
        if "/" in node:
            head = node.split("/")[0]
            if head in self.group_index:
                return self.group_index[head]
        return None

    def link_coefficients(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per directed link, two slots: (class rows, group rows, joules per byte).

        NIC and fabric links: a slot per end that is a switch box (switch energy) or, on NIC links,
        a NIC (its host's NIC energy); scale-up and host links: the device end's host; memory links:
        the tier (or medium) end's host. Attributes are found once per node, then set per link."""
        topo, hw, site = self.topology, self.hw, self.site
        n = topo.num_links
        codes, nodes = factorize(np.asarray(topo.link_src + topo.link_dst, dtype=object))
        src, dst = codes[:n], codes[n:]
        kind_codes, kinds = factorize(np.asarray(topo.link_kind, dtype=object))
        is_kind = {k: kind_codes == i for i, k in enumerate(kinds)}
        none = np.zeros(n, dtype=bool)
        cap = np.asarray(topo.capacity, dtype=float)
        tiers = {t.name: t for t in hw.memory_tiers}
        media = {m.name: m for p in self.pools.values() for m in p.media}
        nic_w = dynamic_w(hw.nic.power)
        # per node: switch-box group, owner group, NIC / memory-end dynamic power, "CPU-side" flag
        names, pool_of, group_index = nodes.tolist(), self.pool_of, self.group_index
        box = np.array([group_index[n] if n in self.switch_boxes else -1 for n in names], dtype=np.int64)
        owner = np.array([-1 if g is None else g for g in map(self.owner_group, names)], dtype=np.int64)
        node_nic_w = np.array(
            [dynamic_w(self.pools[pool_of[n]].nic.power) if n in pool_of else nic_w for n in names], dtype=float
        )
        cpu_side = np.array([n.endswith("/cpu") or n in pool_of for n in names], dtype=bool)
        device = np.array([n in self.device_index for n in names], dtype=bool)

        def memory_end_w(node: str) -> float:
            head, _, name = node.partition("/")
            spec = media.get(name) if head in pool_of else tiers.get(name)
            return dynamic_w(spec.power) if spec is not None else 0.0

        memory_w = np.array([memory_end_w(n) for n in names] if tiers or media else np.zeros(len(names)), dtype=float)
        cls = np.zeros((n, 2), dtype=np.int64)
        grp = np.zeros((n, 2), dtype=np.int64)
        coef = np.zeros((n, 2))
        slot = np.zeros(n, dtype=np.int64)  # next free slot per link

        def put(mask: np.ndarray, row: int | np.ndarray, group: np.ndarray, k: np.ndarray) -> None:
            """Fill the next slot of the links of `mask` (a slot with no group or no energy stays
            unused but is taken, as the per-link rule lists it)."""
            links = np.flatnonzero(mask)
            j = slot[links]
            ok = (j < 2) & (group[links] >= 0) & (k[links] > 0)
            row_of = row[links] if isinstance(row, np.ndarray) else np.full(len(links), row)
            cls[links[ok], j[ok]], grp[links[ok], j[ok]], coef[links[ok], j[ok]] = (
                row_of[ok],
                group[links][ok],
                k[links][ok],
            )
            slot[links] += 1

        network = is_kind.get("nic", none) | is_kind.get("fabric", none)
        sw_j_per_byte = dynamic_w(site.switch.power) / (2.0 * site.switch_capacity_bytes_per_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            for end in (src, dst):
                at_box = network & (box[end] >= 0)
                nic_end = is_kind.get("nic", none) & (box[end] < 0)
                row = np.where(at_box, CLASS_ROW["switch"], CLASS_ROW["nic"])
                group = np.where(at_box, box[end], owner[end])
                k = np.where(at_box, sw_j_per_byte, node_nic_w[end] / (2.0 * cap))
                put(at_box | nic_end, row, group, k)
            for kind, spec, row in (
                ("scale_up", hw.scale_up, CLASS_ROW["scale_up"]),
                ("host", hw.host_link, CLASS_ROW["host_link"]),
            ):
                mask = is_kind.get(kind, none)
                if mask.any():
                    dev = np.where(device[src], src, dst)
                    put(mask, row, owner[dev], dynamic_w(spec.power) / (2.0 * cap))
            mask = is_kind.get("memory", none)
            if mask.any():
                end = np.where(cpu_side[src], dst, src)  # the tier / medium end
                put(mask & (memory_w[end] > 0), CLASS_ROW["memory_tier"], owner[end], memory_w[end] / cap)
        return cls, grp, coef

    # ---- activity targets ---------------------------------------------------------------------------
    def gpu_host_of(self, component: str) -> int | None:
        m = _HOST.match(component)
        return int(m.group(1)) if m and int(m.group(1)) < len(self.topology.hosts) else None
