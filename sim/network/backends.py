"""The network backends by name (scenario `network_model`): `make_network`.

- `flow` (the default): max-min fair flows with contention (sim/network/flow.py);
- `analytical`: alpha-beta transfers without contention, for very large scale (sim/network/analytical.py).
Both implement the interface of sim/network/base.py.
"""

from __future__ import annotations

from hardware_models.topology import Topology
from sim.engine.simulation import Simulation
from sim.network.analytical import AnalyticalNetwork
from sim.network.base import Network
from sim.network.flow import FlowNetwork

NETWORK_MODELS: dict[str, type[Network]] = {"flow": FlowNetwork, "analytical": AnalyticalNetwork}


def make_network(model: str, sim: Simulation, topology: Topology, ecmp: str = "even") -> Network:
    """The backend `model` on `topology`."""
    if model not in NETWORK_MODELS:
        raise ValueError(f"unknown network_model {model!r}; allowed: flow, analytical")
    return NETWORK_MODELS[model](sim, topology, ecmp)
