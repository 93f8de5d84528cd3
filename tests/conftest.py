"""Shared helpers for the tests: small clusters built straight from specs."""

from __future__ import annotations

import pytest

from hardware_models import catalog
from sim.cluster.cluster import Cluster
from sim.engine.simulation import Simulation
from sim.scenario.model import scenario_from_dict


def make_scenario(workload: dict, **hardware) -> object:
    hw = {
        "gpu": "h100-sxm",
        "gpus_per_node": 1,
        "nodes": 4,
        "scale_up": "nvlink4",
        "nic": "cx7-400g-rdma",
        "topology": {"kind": "single-switch"},
    }
    hw.update(hardware)
    network_model = hw.pop("network_model", "flow")
    return scenario_from_dict({"name": "test", "network_model": network_model, "hardware": hw, "workload": workload})


def make_cluster(network_model: str = "flow", **hardware) -> Cluster:
    scenario = make_scenario({"kind": "collective", "bytes": 1}, network_model=network_model, **hardware)
    sim = Simulation(seed=0)
    return Cluster.build(sim, scenario.hardware, scenario.network_model)


@pytest.fixture
def nic():
    return catalog.link("cx7-400g-rdma")
