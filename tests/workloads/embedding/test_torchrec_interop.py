"""TorchRec interop: plans in (JSON, printed, ShardingPlan object) and out, round trips.

The JSON and printed forms need no torchrec and always run; the ShardingPlan object round trip runs
where torchrec is installed (`dcsim[torchrec]`, see docs) and skips otherwise.
"""

from __future__ import annotations

import copy
import json

import pytest

from sim.engine.simulation import Simulation
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.torchrec_interop import (
    TorchRecInteropError,
    export,
    manual_tables,
    parse_printed,
    plan_dict,
    plan_to_torchrec,
    sharding_plan,
    tables_from_configs,
    workload_from_torchrec,
)
from sim.workloads.embedding.workload import prepare

GPN, NODES = 2, 2
W = GPN * NODES
CONFIGS = [  # EmbeddingBagConfig fields, as dicts
    {"name": "tw", "num_embeddings": 1000, "embedding_dim": 64, "data_type": "FP16"},
    {"name": "rw", "num_embeddings": 40_000, "embedding_dim": 64, "data_type": "FP16"},
    {"name": "cw", "num_embeddings": 2000, "embedding_dim": 128, "data_type": "FP32"},
    {"name": "twrw", "num_embeddings": 8000, "embedding_dim": 32, "data_type": "FP16"},
    {"name": "dp", "num_embeddings": 100, "embedding_dim": 16, "data_type": "FP16"},
    {"name": "uvm", "num_embeddings": 5000, "embedding_dim": 64, "data_type": "FP16"},
    {"name": "cached", "num_embeddings": 5000, "embedding_dim": 64, "data_type": "FP16"},
]


def _shards(kind, rows, dim, ranks):
    if kind in ("row_wise", "table_row_wise"):
        step = rows // len(ranks)
        return [
            {"shard_offsets": [i * step, 0], "shard_sizes": [step, dim], "placement": f"rank:{r}/cuda:{r % GPN}"}
            for i, r in enumerate(ranks)
        ]
    if kind == "column_wise":
        step = dim // len(ranks)
        return [
            {"shard_offsets": [0, i * step], "shard_sizes": [rows, step], "placement": f"rank:{r}/cuda:{r % GPN}"}
            for i, r in enumerate(ranks)
        ]
    return [{"shard_offsets": [0, 0], "shard_sizes": [rows, dim], "placement": f"rank:{ranks[0]}/cuda:0"}]


SPECS = {  # table -> (sharding type, compute kernel, ranks)
    "tw": ("table_wise", "fused", [3]),
    "rw": ("row_wise", "fused", [0, 1, 2, 3]),
    "cw": ("column_wise", "fused", [1, 2]),
    "twrw": ("table_row_wise", "fused", [2, 3]),
    "dp": ("data_parallel", "dense", [0, 1, 2, 3]),
    "uvm": ("table_wise", "fused_uvm", [0]),
    "cached": ("table_wise", "fused_uvm_caching", [1]),
}
ROWS = {c["name"]: (c["num_embeddings"], c["embedding_dim"]) for c in CONFIGS}
PLAN_JSON = {
    "plan": {
        "sparse.ebc": {
            name: {
                "sharding_type": kind,
                "compute_kernel": kernel,
                "ranks": ranks,
                **({"shards": _shards(kind, *ROWS[name], ranks)} if kind != "data_parallel" else {}),
            }
            for name, (kind, kernel, ranks) in SPECS.items()
        }
    }
}


def base_scenario(workload_fragment):
    return {
        "name": "torchrec-interop",
        "seed": 0,
        "hardware": {
            "gpu": "a100-sxm-80gb",
            "gpus_per_node": GPN,
            "nodes": NODES,
            "scale_up": "nvlink3",
            "nic": "cx7-200g-rdma",
            "host_link": "pcie4-x16",
            "topology": {"kind": "single-switch"},
            "memory_tiers": [{"base": "ddr5-host", "name": "ddr5-host"}],
        },
        "workload": {
            "kind": "embedding_training",
            "batch_size_per_gpu": 64,
            "dense": {"bottom_mlp": [13, 64, 16], "top_mlp": [64, 1], "interaction": "dot"},
            "iterations": 2,
            **workload_fragment,
        },
    }


def _essentials(plan) -> dict:
    """Per table what TorchRec's plan decides: sharding type, compute kernel, ranks, shard widths."""
    out = {}
    for name, ps in plan_dict(plan)["sparse.ebc"].items():
        widths = [s["shard_sizes"][1] for s in ps.get("shards") or []]
        out[name] = (ps["sharding_type"], ps["compute_kernel"], list(ps["ranks"]), widths)
    return out


def _round_trip(plan_in) -> dict:
    fragment = workload_from_torchrec(CONFIGS, plan_in, pooling=4.0)
    sc = scenario_from_dict(base_scenario(fragment))
    _, model, plan = prepare(Simulation(sc.seed), sc.hardware, sc.workload)
    return plan_to_torchrec(plan, model)


def test_json_plan_round_trips_through_dcsim():
    out = _round_trip(copy.deepcopy(PLAN_JSON))
    assert _essentials(out) == _essentials(PLAN_JSON)
    assert out == json.loads(json.dumps(out))  # plain JSON
    fragment = workload_from_torchrec(CONFIGS, json.dumps(PLAN_JSON), pooling={c["name"]: 2.0 for c in CONFIGS})
    assert fragment["placements"] == ["hbm", "uvm", "uvm_cache"]
    assert fragment["sharding"]["column_shard_dim"] == 64  # the plan's column-wise shard width
    assert fragment["sharding"]["tables"]["cached"] == {"scheme": "table_wise", "placement": "uvm_cache", "ranks": [1]}
    assert fragment["tables"][2] == {
        "name": "cw",
        "rows": 2000,
        "dim": 128,
        "pooling": 2.0,
        "zipf_alpha": 1.05,
        "dtype": "fp32",
    }


def test_printed_plan_reads_as_its_json_form():
    printed = """module: sparse.ebc

param | sharding type | compute kernel |    ranks
----- | ------------- | -------------- | ------------
tw    | table_wise    | fused          | [3]
dp    | data_parallel | dense          | [0, 1, 2, 3]

param | shard offsets | shard sizes |   placement
----- | ------------- | ----------- | -------------
tw    | [0, 0]        | [1000, 64]  | rank:3/cuda:1
"""
    parsed = parse_printed(printed)
    assert parsed["sparse.ebc"]["tw"] == PLAN_JSON["plan"]["sparse.ebc"]["tw"] | {
        "shards": [{"shard_offsets": [0, 0], "shard_sizes": [1000, 64], "placement": "rank:3/cuda:1"}]
    }
    assert manual_tables(printed) == {
        "tw": {"scheme": "table_wise", "placement": "hbm", "ranks": [3]},
        "dp": {"scheme": "data_parallel", "placement": "hbm", "ranks": [0, 1, 2, 3]},
    }


def test_dcsim_plans_export_with_every_shard_accounted_for():
    data = base_scenario(
        {
            "tables": tables_from_configs(CONFIGS, pooling=4.0),
            "placements": ["hbm", "uvm"],
            "sharding": {"planner": "recshard"},
        }
    )
    sc = scenario_from_dict(data)
    out = export(sc.hardware, sc.workload, sc.seed)["plan"]["sparse.ebc"]
    assert set(out) == set(ROWS)
    for name, ps in out.items():
        rows, dim = ROWS[name]
        if ps["sharding_type"] == "data_parallel":
            assert ps["ranks"] == list(range(W)) and "shards" not in ps
            continue
        sizes = [s["shard_sizes"] for s in ps["shards"]]
        if ps["sharding_type"] in ("row_wise", "table_row_wise"):
            assert sum(r for r, _ in sizes) == rows and all(d == dim for _, d in sizes)
        else:
            assert sum(d for _, d in sizes) == dim and all(r == rows for r, _ in sizes)
        assert [int(s["placement"].split("/")[0][5:]) for s in ps["shards"]] == ps["ranks"]


def test_unknown_sharding_types_and_kernels_say_what_is_allowed():
    bad = copy.deepcopy(PLAN_JSON)
    bad["plan"]["sparse.ebc"]["tw"]["sharding_type"] = "grid_shard"
    with pytest.raises(TorchRecInteropError, match=r"plan\.tw\.sharding_type: 'grid_shard'.*allowed: table_wise"):
        manual_tables(bad)
    bad["plan"]["sparse.ebc"]["tw"] |= {"sharding_type": "table_wise", "compute_kernel": "customized_kernel"}
    with pytest.raises(TorchRecInteropError, match=r"compute_kernel: 'customized_kernel'.*allowed: fused"):
        manual_tables(bad)
    with pytest.raises(TorchRecInteropError, match="data_type"):
        tables_from_configs([{"name": "x", "num_embeddings": 1, "embedding_dim": 1, "data_type": "INT2"}])


def test_sharding_plan_object_round_trips_where_torchrec_is_installed():
    pytest.importorskip("torchrec")
    pytest.importorskip("fbgemm_gpu")
    from torchrec.distributed.types import ShardingPlan
    from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig

    configs = [
        EmbeddingBagConfig(
            name=c["name"],
            num_embeddings=c["num_embeddings"],
            embedding_dim=c["embedding_dim"],
            feature_names=[f"f_{c['name']}"],
            data_type=DataType[c["data_type"]],
        )
        for c in CONFIGS
    ]
    plan_in = sharding_plan(PLAN_JSON)
    assert isinstance(plan_in, ShardingPlan)
    fragment = workload_from_torchrec(configs, plan_in, pooling=4.0)
    assert fragment["tables"] == workload_from_torchrec(CONFIGS, PLAN_JSON, pooling=4.0)["tables"]
    sc = scenario_from_dict(base_scenario(fragment))
    _, model, plan = prepare(Simulation(sc.seed), sc.hardware, sc.workload)
    plan_out = sharding_plan(plan_to_torchrec(plan, model))
    assert isinstance(plan_out, ShardingPlan)
    for name, ps in plan_in.plan["sparse.ebc"].items():
        out = plan_out.plan["sparse.ebc"][name]
        assert (out.sharding_type, out.compute_kernel, out.ranks) == (ps.sharding_type, ps.compute_kernel, ps.ranks)
    assert _essentials(plan_out) == _essentials(plan_in)
    assert _essentials(str(plan_out)) == _essentials(plan_in)  # the printed form reads back too
