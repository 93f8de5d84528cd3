"""Eager PyTorch's memory-bound passes around the dense GEMMs, and the unfused embedding update.

`DenseConfig.pointwise_passes` lists the kernels that are not GEMMs (bias, ReLU, their gradients,
the interaction's data movement, the loss, the SGD update per parameter tensor); every user of
the dense cost (simulation, estimate, planner score) charges them the same way:
`dense_times_s`. `embedding_backward: unfused` updates a row once per lookup and materialises
every lookup's gradient row, as an eager autograd reference does.
"""

from __future__ import annotations

import pytest

from sim.models.dlrm import DenseConfig, DensePasses
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.estimate import dense_times_s
from tests.workloads.embedding.test_embedding import SMALL, plan_of, scenario


def _bytes(passes, name):
    return sum(b for n, b in passes if n == name)


def test_mlp_passes_follow_the_closed_form_per_layer():
    dense = DenseConfig(bottom_mlp=[13, 128, 64], top_mlp=[256, 1], interaction="dot", dtype="fp32")
    B, e = 1024, 4
    p = dense.pointwise_passes(B, [64, 64])
    # bottom forward: bias into both outputs (2 B n e), ReLU on the hidden layer only (2 B n e)
    assert _bytes(p.bottom_fwd, "bottom0.bias") == 2 * B * 128 * e
    assert _bytes(p.bottom_fwd, "bottom0.relu") == 2 * B * 128 * e
    assert _bytes(p.bottom_fwd, "bottom1.relu") == 0  # an MLP's last layer has no ReLU
    # bottom backward: ReLU mask 3 B n e, bias gradient B n e, then SGD: 12 bytes per parameter
    assert _bytes(p.bottom_bwd, "bottom0.relu_grad") == 3 * B * 128 * e
    assert _bytes(p.bottom_bwd, "bottom1.bias_grad") == B * 64 * e
    params = dense.dense_params([64, 64])
    sgd = sum(b for n, b in p.bottom_bwd if n.startswith("sgd."))
    assert sgd == pytest.approx(12.0 * params)
    # dot interaction over f = 3 vectors of d = 64: 3 pairs, output width d + 3
    assert _bytes(p.top, "interaction.triu") == 2 * B * 3 * e
    assert _bytes(p.top, "interaction.triu_grad") == B * 9 * e + 2 * B * 3 * e
    assert _bytes(p.top, "interaction.cat") == 2 * B * (64 + 3) * e
    assert _bytes(p.top, "top0.bias") == 2 * B * 256 * e


def test_dense_time_is_the_gemms_plus_one_kernel_per_pass():
    data = scenario([SMALL, SMALL | {"name": "s2"}])
    sc = scenario_from_dict(data)
    tables, _, _ = plan_of(data)
    gpu, dense = sc.hardware.gpu, sc.workload.dense
    passes = dense.pointwise_passes(sc.workload.batch_size_per_gpu, [t.dim for t in tables])
    bottom_fwd, top, bottom_bwd = dense_times_s(gpu, sc.workload, tables)
    launches = len(passes.bottom_fwd) + len(passes.top) + len(passes.bottom_bwd)
    assert launches > 10
    # every pass pays at least its launch; the passes' time is the memory roofline + launch each
    assert DensePasses.time_s(gpu, passes.top) >= len(passes.top) * gpu.launch_overhead
    assert DensePasses.time_s(gpu, passes.top) == pytest.approx(
        sum(gpu.memory_time_s(b) for _, b in passes.top), rel=1e-12
    )
    assert min(bottom_fwd, top, bottom_bwd) > 0


def _iteration(**workload):
    data = scenario([SMALL | {"rows": 100_000, "pooling": 20, "zipf_alpha": 1.2}], placements=("hbm",), **workload)
    return run(scenario_from_dict(data), limits=None).metrics


def test_unfused_update_moves_every_lookups_row_and_gradient():
    fused, unfused = _iteration(), _iteration(embedding_backward="unfused")
    assert unfused["breakdown_s"]["embedding_fwd"] == pytest.approx(fused["breakdown_s"]["embedding_fwd"])
    assert unfused["breakdown_s"]["embedding_bwd"] > fused["breakdown_s"]["embedding_bwd"]
    assert unfused["iteration_s"] >= fused["iteration_s"]


def test_unfused_update_traffic_closed_form():
    data = scenario([SMALL | {"rows": 100_000, "pooling": 20, "zipf_alpha": 1.2}], placements=("hbm",))
    tables, model, plan = plan_of(data)
    data_u = scenario(
        [SMALL | {"rows": 100_000, "pooling": 20, "zipf_alpha": 1.2}], placements=("hbm",), embedding_backward="unfused"
    )
    _, model_u, plan_u = plan_of(data_u)
    for s, su in zip(plan.shards, plan_u.shards):
        t, tu = model.traffic(s), model_u.traffic(su)
        lookups = s.lookups
        # rows read and written once per lookup instead of once per distinct row
        assert sum(a.count for a in tu.bwd if not a.write) == pytest.approx(lookups)
        assert sum(a.count for a in t.bwd if not a.write) < lookups
        # plus every lookup's gradient row written and read back
        grad = 2 * lookups * s.dim * s.table.element_bytes
        assert tu.bwd_hbm_extra_bytes - t.bwd_hbm_extra_bytes == pytest.approx(grad)


def test_unknown_embedding_backward_is_a_one_line_error():
    from sim.errors import ScenarioError

    with pytest.raises(ScenarioError, match="embedding_backward"):
        scenario_from_dict(scenario([SMALL], embedding_backward="fastest"))
