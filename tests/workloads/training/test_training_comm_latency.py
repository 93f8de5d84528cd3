"""NCCL's per-operation software latency in training (sim/network/operation_cost.py): every TP / CP /
EP collective pays it before its flows, so the exposed TP time of a run without overlap is, per
collective, that latency plus the uncontended time of its schedule."""

from __future__ import annotations

import pytest

from sim.cluster.cluster import Cluster
from sim.engine.simulation import Simulation
from sim.models.training_shapes import CommOp
from sim.network.collectives import choose, estimate_s
from sim.network.operation_cost import operation_cost
from sim.runner import run
from sim.workloads.parallel_layout import ParallelLayout
from sim.workloads.training.layout import GroupComm
from sim.workloads.training.plan import TrainingPlan
from tests.workloads.training.test_training import TINY, scenario


def test_each_tp_collective_pays_nccls_latency_then_its_flows():
    sc = scenario(
        {"parallelism": {"tp": 2, "pp": 1, "dp": 1}, "global_batch_size": 1, "model": {**TINY, "layers": 2}},
        nodes=1,
        gpus_per_node=2,
        network="analytical",
    )
    metrics = run(sc).metrics
    cluster = Cluster.build(Simulation(seed=0), sc.hardware, sc.network_model)
    config = sc.workload
    layout = ParallelLayout(cluster, 2, 1, 1, 1)
    plan = TrainingPlan(config, config.family, cluster.devices[0].spec, config.shape())
    comm = GroupComm(cluster.network, layout.group(0, 0), 2, 1, config.collective_algorithm)
    expected, latency = 0.0, 0.0
    for kind in ("F", "B"):
        for _, items, _ in plan.expanded(kind, 0):
            for item in items:
                if isinstance(item, CommOp):
                    steps = comm.steps(item.group, item.op, item.nbytes)
                    lat = comm.latency_s(item.group, item.op, item.nbytes)
                    group = comm.subgroups(item.group)[0]
                    algo, _ = choose(cluster.network, item.op, config.collective_algorithm, group, item.nbytes)
                    assert lat == operation_cost(cluster.network, item.op, group, item.nbytes, algo).software_latency_s
                    assert lat > 0
                    latency += lat
                    expected += lat + estimate_s(cluster.network, steps)
    assert latency > 0.05 * expected  # small activations: the latency is a visible part
    assert metrics["breakdown_s"]["exposed_tp_cp_s"] == pytest.approx(expected, rel=1e-9)
