"""Wall time of the checks that must stay cheap however large the scenario (their tests assert memory,
not time; time is measured here, on a quiet machine):

    python benchmarks/cheap_checks.py [--repeat N]

- estimating a 10^12-flow all-to-all on 10^6 GPUs (sim/scenario/estimate.py): target < 1 s;
- refusing a 10^6-node / 2*10^9-node cluster while loading the scenario: target < 5 s.
Prints the median over the repeats and whether each target is met.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.errors import ScenarioError  # noqa: E402
from sim.scenario.estimate import estimate  # noqa: E402
from sim.scenario.model import load_scenario  # noqa: E402


def estimate_exploding_all_to_all() -> None:
    estimate(load_scenario(ROOT / "benchmarks" / "scenarios" / "alltoall-1024gpu.yaml", ["hardware.nodes=125000"]))


def refuse_huge_clusters() -> None:
    base = ROOT / "scenarios" / "train-llama3-405b-16k-gpus-seq128k-cp16.yaml"
    for nodes in ("999998", "2048000000"):
        try:
            load_scenario(base, [f"hardware.nodes={nodes}"])
        except ScenarioError:
            continue
        raise AssertionError(f"hardware.nodes={nodes} was accepted")


CHECKS = [
    ("estimate: 10^12-flow all-to-all, 10^6 GPUs", estimate_exploding_all_to_all, 1.0),
    ("load: refuse 10^6- and 2*10^9-node clusters", refuse_huge_clusters, 5.0),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, check, target_s in CHECKS:
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            check()
            walls.append(time.perf_counter() - start)
        median = statistics.median(walls)
        print(
            f"{name:48s} median {median:7.3f} s  target < {target_s:g} s  {'met' if median < target_s else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
