"""A cluster in a simulation: the topology, the network backend and the devices of every host.

`Cluster.build` turns the scenario's hardware section into live objects bound to one Simulation.
Several jobs may share one Cluster (multi-tenancy): they address devices by rank and share links.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware_models.topology import HostPool, Topology
from hardware_models.topology_builders import build_topology
from sim.cluster.stragglers import apply_stragglers
from sim.engine.compute import Device
from sim.engine.simulation import Simulation
from sim.network.backends import make_network
from sim.network.base import Network


@dataclass
class Cluster:
    sim: Simulation
    hardware: object  # sim.scenario.model.HardwareConfig
    topology: Topology
    network: Network
    devices: list[Device]
    hosts: list[list[Device]]

    @classmethod
    def build(
        cls, sim: Simulation, hardware, network_model: str = "flow", pools: list[HostPool] | None = None
    ) -> Cluster:
        topo = build_topology(
            hardware.topology,
            hardware.nodes,
            hardware.gpus_per_node,
            hardware.nic,
            hardware.scale_up,
            pools,
            hardware.host_link,
            hardware.memory_tiers,
        )
        network = make_network(network_model, sim, topo, hardware.topology.ecmp)
        hosts = [[Device(sim, node, hardware.gpu, h) for node in nodes] for h, nodes in enumerate(topo.hosts)]
        devices = [d for devs in hosts for d in devs]
        apply_stragglers(topo, devices, getattr(hardware, "stragglers", []))
        return cls(sim, hardware, topo, network, devices, hosts)

    @property
    def num_gpus(self) -> int:
        return len(self.devices)

    def nodes(self, ranks) -> list[str]:
        return [self.devices[r].node for r in ranks]

    def tier_node(self, host: int, tier_name: str) -> str:
        """The network node of a host's memory tier (reads from it are flows from this node)."""
        return f"h{host}/{tier_name}"

    def cpu_node(self, host: int) -> str:
        return f"h{host}/cpu"
