"""TorchRec's planner on a dcsim embedding scenario, its plan in dcsim's `manual` form.

Needs torchrec (1.8) with fbgemm-gpu-cpu; importing this module raises ImportError without them,
which benchmarks/planner_quality.py reports as "skipped".

`plan(data, repeats)` builds the scenario's tables as `EmbeddingBagConfig`s (fp16, the tables'
rows and dims), an `EmbeddingBagCollection` on the meta device, a `Topology` with the scenario's
hardware (GPU memory, memory bandwidth, host link as TorchRec's DDR bandwidth, scale-up and NIC
bandwidths, per-GPU share of the host DDR tier), pooling factors as `ParameterConstraints`, and
runs `EmbeddingShardingPlanner.plan` with the fused rowwise-Adagrad sharder. The result maps per
table: TorchRec's sharding type to dcsim's scheme (the same names), its ranks, and its compute
kernel to a placement (`fused` -> hbm, `fused_uvm` -> uvm, `fused_uvm_caching` -> uvm_cache), by
the one mapping of sim/workloads/embedding/torchrec_interop.py.
TorchRec reserves 15% of HBM by default (HeuristicalStorageReservation), like dcsim.
"""

from __future__ import annotations

import statistics
import time

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection

from sim.engine.simulation import Simulation
from sim.models.dlrm import expand_tables
from sim.scenario.model import scenario_from_dict
from sim.workloads.embedding.torchrec_interop import manual_tables

PER_MS = 1e-3  # TorchRec's bandwidths are bytes per millisecond


def tables_of(data: dict):
    sc = scenario_from_dict(data)
    explicit, generators = sc.workload.table_lists()
    return sc, expand_tables(explicit, generators, Simulation(sc.seed).rng)


def plan(data: dict, repeats: int = 1) -> tuple[dict, float]:
    """(manual `sharding.tables` for dcsim, median seconds of TorchRec's `plan` call)."""
    sc, tables = tables_of(data)
    hw, cfg = sc.hardware, sc.workload
    ddr = next((t for t in hw.memory_tiers if t.kind == "ddr"), None)
    topology = Topology(
        world_size=hw.num_gpus,
        local_world_size=hw.gpus_per_node,
        compute_device="cuda",
        hbm_cap=int(hw.gpu.memory),
        ddr_cap=int(ddr.capacity / hw.gpus_per_node) if ddr else 0,
        hbm_mem_bw=hw.gpu.memory_bandwidth * PER_MS,
        ddr_mem_bw=hw.host_link.achieved_bytes_per_s * PER_MS,
        intra_host_bw=hw.scale_up.achieved_bytes_per_s * PER_MS,
        inter_host_bw=hw.nic.achieved_bytes_per_s * PER_MS,
    )
    configs = [
        EmbeddingBagConfig(
            name=t.name,
            embedding_dim=t.dim,
            num_embeddings=t.rows,
            feature_names=[f"f_{t.name}"],
            data_type=DataType.FP16 if t.dtype == "fp16" else DataType.FP32,
        )
        for t in tables
    ]
    constraints = {
        t.name: ParameterConstraints(pooling_factors=[t.pooling / (cfg.dedup if t.dedup is None else t.dedup)])
        for t in tables
    }
    module = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
    sharder = EmbeddingBagCollectionSharder(fused_params={"optimizer": EmbOptimType.EXACT_ROWWISE_ADAGRAD})
    times, result = [], None
    for _ in range(repeats):
        planner = EmbeddingShardingPlanner(
            topology=topology, batch_size=cfg.batch_size_per_gpu, constraints=constraints, debug=False
        )
        start = time.perf_counter()
        result = planner.plan(module, [sharder])
        times.append(time.perf_counter() - start)
    return manual_tables(result, cfg.placements), statistics.median(times)
