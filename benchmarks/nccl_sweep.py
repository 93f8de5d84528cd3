"""nccl-tests-style sweep of dcsim's NCCL collective model against published figures.

For all_reduce, all_gather, reduce_scatter and all_to_all on 1 x 8, 2 x 8 and 16 x 8 H100 (NVLink4,
one 400 Gb/s RDMA NIC per GPU, one switch), sizes 8 B .. 8 GiB (x4 apart; `--every-power-of-two`
for x2), algorithm and protocol `auto` (NCCL's tuner, sim/network/nccl.py) unless given, prints the
nccl-tests columns (size, time, algbw, busbw) with the algorithm and protocol chosen, then every
point that has a published figure (docs/references.md#nccl-collectives-validation) with its error.
Every operation pays the collective kernel's launch (the GPU's catalog `launch_overhead`, 4 us on
H100: an assumption, not fitted), which NCCL's tuner leaves out (`--no-launch`: without it).
No constant of the model is fitted to these figures.

    python benchmarks/nccl_sweep.py [--shapes 2x8] [--ops all_reduce] [--algorithm ring] [--network-model flow]
"""

from __future__ import annotations

import argparse
import time

from sim.cluster.cluster import Cluster
from sim.engine.simulation import Simulation
from sim.network.collectives import bus_factor, collective, plan
from sim.scenario.model import scenario_from_dict

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
SHAPES = ("1x8", "2x8", "16x8")
GiB = 2**30

# (shape, op, algorithm or None for any, size in bytes, metric, low, high, source): published figures
# as ranges (docs/references.md#nccl-collectives-validation); the error is against the middle.
REFERENCES = [
    ("1x8", "all_reduce", None, 1 * GiB, "busbw GB/s", 360.0, 370.0, "nccl-tests #212/#290: NVLink4 ring busbw"),
    ("2x8", "all_reduce", "ring", 1 * GiB, "busbw GB/s", 368.0, 384.0, "NCCL #812: 8 NICs x 46-48 GB/s (derived)"),
    (
        "2x8",
        "all_reduce",
        "hierarchical",
        1 * GiB,
        "busbw GB/s",
        368.0,
        384.0,
        "NCCL #812: 8 NICs x 46-48 GB/s (derived)",
    ),
    ("2x8", "all_reduce", None, 8, "time us", 46.0, 48.0, "NCCL #1244: 4 B-1 KB all-reduce, 2 x 8 GPUs"),
    ("2x8", "all_reduce", None, 1024, "time us", 46.0, 48.0, "NCCL #1244: 4 B-1 KB all-reduce, 2 x 8 GPUs"),
]


def cluster_for(shape: str, network_model: str) -> Cluster:
    nodes, per_node = (int(x) for x in shape.split("x"))
    scenario = scenario_from_dict(
        {
            "name": "nccl-sweep",
            "network_model": network_model,
            "hardware": {
                "gpu": "h100-sxm",
                "gpus_per_node": per_node,
                "nodes": nodes,
                "scale_up": "nvlink4",
                "nic": "cx7-400g-rdma",
                "topology": {"kind": "single-switch"},
            },
            "workload": {"kind": "collective", "bytes": 1},
        }
    )
    return Cluster.build(Simulation(seed=0), scenario.hardware, scenario.network_model)


def launch_s(cluster: Cluster) -> float:
    """The collective kernel's launch: the GPU's `launch_overhead` (catalog), as every compute kernel pays."""
    return float(cluster.hardware.gpu.launch_overhead)  # type: ignore[attr-defined]


def one_point(
    shape: str, op: str, size: float, algorithm: str, protocol: str, network_model: str, with_launch: bool = True
) -> dict:
    cluster = cluster_for(shape, network_model)
    group = cluster.nodes(range(cluster.num_gpus))
    launch = launch_s(cluster) if with_launch else 0.0
    chosen, _, _ = plan(cluster.network, op, algorithm, protocol, group, size, launch)
    proc, algo = collective(cluster.network, op, group, size, algorithm, protocol=protocol, launch_s=launch)
    cluster.sim.env.run(until=proc)
    t = cluster.sim.now
    algbw = size / t
    return {
        "shape": shape,
        "op": op,
        "bytes": size,
        "time_s": t,
        "algbw": algbw,
        "busbw": algbw * bus_factor(op, len(group)),
        "algorithm": algo,
        "protocol": chosen.protocol,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="hosts x GPUs, comma-separated")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--algorithm", default="auto")
    parser.add_argument("--protocol", default="auto")
    parser.add_argument("--network-model", default="flow", choices=("flow", "analytical"))
    parser.add_argument("--every-power-of-two", action="store_true", help="sizes x2 apart instead of x4")
    parser.add_argument(
        "--no-launch", action="store_true", help="leave out the collective kernel's launch (NCCL's tuner alone)"
    )
    args = parser.parse_args()
    ratio = 2 if args.every_power_of_two else 4
    sizes = []
    size = 8
    while size <= 8 * GiB:
        sizes.append(size)
        size *= ratio
    rows = []
    for shape in args.shapes.split(","):
        for op in args.ops.split(","):
            algorithm = (
                "direct" if op == "all_to_all" and args.algorithm in ("ring", "hierarchical") else args.algorithm
            )
            print(f"\n# {op} on {shape} H100 ({args.network_model}; algorithm {algorithm}, protocol {args.protocol})")
            print(f"{'size (B)':>12} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}  algorithm/protocol")
            wall = time.perf_counter()
            for size in sizes:
                row = one_point(shape, op, size, algorithm, args.protocol, args.network_model, not args.no_launch)
                rows.append(row)
                print(
                    f"{size:>12d} {row['time_s'] * 1e6:>12.1f} {row['algbw'] / 1e9:>13.2f} {row['busbw'] / 1e9:>13.2f}"
                    f"  {row['algorithm']}/{row['protocol']}"
                )
            print(f"# wall {time.perf_counter() - wall:.1f} s (the machine may be loaded)")
    print("\n# against published figures (error vs the middle of the published range)")
    print(
        f"{'shape':>6} {'op':>11} {'algorithm':>13} {'size (B)':>11} {'metric':>11} {'dcsim':>8} {'published':>11} error  source"
    )
    for shape, op, algorithm, size, metric, low, high, source in REFERENCES:
        if shape not in args.shapes.split(",") or op not in args.ops.split(","):
            continue
        row = one_point(
            shape, op, size, algorithm or args.algorithm, args.protocol, args.network_model, not args.no_launch
        )
        value = row["busbw"] / 1e9 if metric.startswith("busbw") else row["time_s"] * 1e6
        mid = (low + high) / 2
        print(
            f"{shape:>6} {op:>11} {row['algorithm']:>13} {size:>11d} {metric:>11} {value:>8.1f} "
            f"{low:>5.0f}-{high:<5.0f} {100 * (value - mid) / mid:+5.1f}%  {source}"
        )


if __name__ == "__main__":
    main()
