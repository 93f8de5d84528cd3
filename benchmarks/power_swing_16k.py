"""Cluster power swing of a synthetic data-parallel training iteration on 16,384 H100 (study script).

There is no `kind: training` workload yet, so this builds the skeleton of an iteration from the
engine's parts on the Llama 3 cluster (benchmarks/scenarios/allreduce-16k-clos3.yaml: 2,048 hosts x
8 H100, three-layer Clos): every GPU runs a compute kernel (forward + backward, `--compute-s`,
default 2 s: an assumption, not a model) on its compute stream, then all GPUs all-reduce the
gradients (`--bytes`, tree algorithm on the analytical network), for `--iterations`. Power comes
from sim/energy/meter.py exactly as in `dcsim run`; the swing is the largest change of cluster power
within one second.

    python benchmarks/power_swing_16k.py [--nodes 2048] [--compute-s 2] [--bytes 1GiB] [--iterations 2]
                                         [--plot power.png]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    from hardware_models.units import parse_quantity
    from sim.cluster.cluster import Cluster
    from sim.energy.meter import EnergyMeter
    from sim.engine.simulation import Simulation
    from sim.network.collectives import collective
    from sim.scenario.model import load_scenario

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--compute-s", type=float, default=2.0)
    ap.add_argument("--bytes", default="1 GiB")
    ap.add_argument("--algorithm", default="tree")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--plot", default=None, help="write the power-over-time PNG here")
    args = ap.parse_args()
    scenario = load_scenario(
        HERE / "scenarios" / "allreduce-16k-clos3.yaml", [f"hardware.nodes={args.nodes}", "network_model=analytical"]
    )
    nbytes = parse_quantity(args.bytes, "bytes")
    wall = time.perf_counter()
    sim = Simulation(seed=scenario.seed, span_limit=scenario.trace_limit)
    cluster = Cluster.build(sim, scenario.hardware, scenario.network_model)
    meter = EnergyMeter.attach(sim, cluster, scenario)
    group = [d.node for d in cluster.devices]
    phases = []

    def iteration():
        for _ in range(args.iterations):
            start = sim.now
            yield sim.all_of([d.run("forward+backward", args.compute_s) for d in cluster.devices])
            mid = sim.now
            proc, _ = collective(cluster.network, "all_reduce", group, nbytes, args.algorithm, name="grad all_reduce")
            yield proc
            for node in group:  # every rank is inside the NCCL kernel throughout
                sim.span(node, "comm", "grad all_reduce", mid, category="comm")
            phases.append((start, mid, sim.now))

    sim.env.run(until=sim.process(iteration()))
    report = meter.report(float(sim.now))
    m = report.metrics()
    wall = time.perf_counter() - wall
    print(
        f"{len(group)} GPUs, {args.iterations} iterations of {args.compute_s} s compute + {args.bytes} "
        f"{args.algorithm} all-reduce; simulated {sim.now:.3f} s in {wall:.1f} s wall"
    )
    for i, (a, b, c) in enumerate(phases):
        print(f"  iteration {i}: compute {b - a:.3f} s, all-reduce {c - b:.3f} s")
    print(
        f"energy {m['energy_j'] / 3.6e6:.3f} kWh, avg {m['avg_power_w'] / 1e6:.3f} MW, "
        f"peak {m['peak_power_w'] / 1e6:.3f} MW (bins of {m['power_bin_s']:.3g} s)"
    )
    print(f"cluster_power_swing_w_per_s {m['cluster_power_swing_w_per_s'] / 1e6:.3f} MW")
    if args.plot:
        from sim.energy.plots import power_over_time

        power_over_time(report, title=f"{len(group)}-GPU synthetic iteration", path=args.plot)


if __name__ == "__main__":
    main()
