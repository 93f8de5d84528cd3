"""Planner quality: every planner's plan on several table sets, simulated in dcsim.

    python benchmarks/planner_quality.py [--only SET ...] [--iterations N] [--repeats N]

For each table set (a 2-host x 8 A100 cluster like scenarios/emb-dlrm-2x8-a100-recshard.yaml) it
plans with `recshard`, `size_greedy` and, where `import torchrec` works, TorchRec's
EmbeddingShardingPlanner (its plan fed to dcsim through the `manual` planner: per table the
sharding type, ranks and compute kernel, see torchrec_plan below), then simulates every plan and
prints one table: simulated iteration time (ms), the planner's own estimate (ms), load balance
(max / mean embedding-kernel time over GPUs), slow-tier accesses per iteration, the most HBM a GPU
holds for embeddings, and planning time (median of --repeats, ms; TorchRec's includes only its
`plan` call). Sets:

- `small`: 20 tables, 2e7-2e8 rows (the shipped DLRM's tables, fewer of them): all fit in HBM.
- `big`: 20 tables, 1e8-5e8 rows: about 1.4x the GPUs' embedding HBM, the rest in host DDR (UVM).
- `capacity`: the shipped 128-table DLRM (2.4 TiB, about 2.4x the GPUs' embedding HBM; host DDR
  1 TiB per host).
- `tight`: the same with host DDR cut to 800 GiB per host, so HBM plus DDR hold the tables with
  about 5% to spare.
- `uniform`: the `big` set with uniform access (zipf_alpha 0): no row is hotter than another.

Not part of the test suite (tests/workloads/embedding/test_planner_quality.py checks small sets);
the machine may be loaded while it runs, so planning times are indicative.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sim.engine.simulation import Simulation  # noqa: E402
from sim.runner import run  # noqa: E402
from sim.scenario.model import scenario_from_dict  # noqa: E402
from sim.workloads.embedding.workload import prepare  # noqa: E402

DLRM_TABLES = {"rows": {"min": 2.0e7, "max": 2.0e8}, "dim": 128, "pooling": {"min": 2, "max": 100}, "zipf_alpha": 1.05}
SETS = {
    "small": ({**DLRM_TABLES, "count": 20}, None),
    "big": ({**DLRM_TABLES, "count": 20, "rows": {"min": 1.0e8, "max": 5.0e8}}, None),
    "capacity": ({**DLRM_TABLES, "count": 128}, None),
    "tight": ({**DLRM_TABLES, "count": 128}, "800 GiB"),
    "uniform": ({**DLRM_TABLES, "count": 20, "rows": {"min": 1.0e8, "max": 5.0e8}, "zipf_alpha": 0.0}, None),
}


def scenario(tables: dict, ddr_capacity: str | None, planner: str, iterations: int) -> dict:
    ddr = {"base": "ddr5-host", "name": "ddr5-host", "queue_depth": 1024}
    if ddr_capacity:
        ddr["capacity"] = ddr_capacity
    return {
        "name": "planner-quality",
        "seed": 0,
        "network_model": "flow",
        "hardware": {
            "gpu": "a100-sxm-80gb",
            "gpus_per_node": 8,
            "nodes": 2,
            "scale_up": "nvlink3",
            "nic": "cx7-200g-rdma",
            "host_link": "pcie4-x16",
            "topology": {"kind": "single-switch"},
            "memory_tiers": [ddr],
        },
        "workload": {
            "kind": "embedding_training",
            "batch_size_per_gpu": 4096,
            "tables": tables,
            "dense": {"bottom_mlp": [13, 512, 256, 128], "top_mlp": [1024, 1024, 512, 256, 1], "interaction": "dot"},
            "optimizer": "rowwise_adagrad",
            "sharding": {"planner": planner},
            "placements": ["hbm", "uvm"],
            "iterations": iterations,
        },
    }


def plan_time_s(data: dict, repeats: int) -> float:
    """Median wall time of planning (tables expanded, cost model built, plan made and checked)."""
    sc = scenario_from_dict(data)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        prepare(Simulation(sc.seed), sc.hardware, sc.workload)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def simulate(data: dict) -> dict:
    return run(scenario_from_dict(data), limits=None).metrics


def row(set_name: str, planner: str, metrics: dict, plan_s: float) -> list[str]:
    return [
        set_name,
        planner,
        f"{1e3 * metrics['iteration_s']:.3f}",
        f"{1e3 * metrics['planner_estimate_s']:.3f}",
        f"{metrics['load_imbalance']:.3f}",
        f"{metrics['slow_tier_accesses_per_iteration']:.3g}",
        f"{metrics['hbm_bytes_per_gpu_max'] / 2**30:.1f}",
        f"{1e3 * plan_s:.0f}",
    ]


COLUMNS = ["set", "planner", "iteration ms", "estimate ms", "balance", "slow acc/iter", "HBM GiB max", "plan ms"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--planners", nargs="*", default=["recshard", "size_greedy", "torchrec"])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        from benchmarks import torchrec_plan
    except ImportError as err:  # torchrec (and fbgemm-gpu-cpu) not installed: skip its planner
        print(f"TorchRec planner skipped: {err}")
        torchrec_plan = None
    rows = []
    for name, (tables, ddr) in SETS.items():
        if args.only and name not in args.only:
            continue
        for planner in args.planners:
            data = scenario(copy.deepcopy(tables), ddr, planner if planner != "torchrec" else "manual", args.iterations)
            if planner == "torchrec":
                if torchrec_plan is None:
                    continue
                try:
                    manual, plan_s = torchrec_plan.plan(data, args.repeats)
                except Exception as err:  # noqa: BLE001  the planner's own failure is a result here
                    print(f"{name}: TorchRec planner failed: {type(err).__name__}: {str(err)[:200]}")
                    continue
                data["workload"]["sharding"]["tables"] = manual
            else:
                plan_s = plan_time_s(data, args.repeats)
            try:
                metrics = simulate(data)
            except Exception as err:  # noqa: BLE001
                print(f"{name}: {planner} plan not simulated: {type(err).__name__}: {str(err)[:200]}")
                continue
            rows.append(row(name, planner, metrics, plan_s))
            print("  ".join(rows[-1]), flush=True)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)] if rows else []
    print()
    print("  ".join(c.rjust(w) for c, w in zip(COLUMNS, widths)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
