"""Speed benchmarks: bare SimPy's event rate (the ceiling), then dcsim on each benchmark scenario.

    python benchmarks/run.py [--only NAME ...]

Prints one table: wall time, events, events/s, ratio to bare SimPy, and peak memory (RSS) per
scenario. Not part of the test suite: speed targets are measured here, not asserted in tests.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import simpy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def bare_simpy_events_per_s(n: int = 400_000) -> float:
    env = simpy.Environment()

    def ticker():
        for _ in range(n):
            yield env.timeout(1)

    env.process(ticker())
    start = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - start)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    from sim import load_scenario, run
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="scenario file stems to run")
    args = ap.parse_args()
    ceiling = bare_simpy_events_per_s()
    print(f"bare SimPy timeout loop: {ceiling:,.0f} events/s")
    print(f"{'scenario':40s} {'wall_s':>8s} {'events':>10s} {'events/s':>12s} {'vs simpy':>9s} {'peak MiB':>9s}  metric")
    for path in sorted((HERE / "scenarios").glob("*.yaml")):
        if args.only and path.stem not in args.only:
            continue
        result = run(load_scenario(path))
        rate = result.events / result.wall_s if result.wall_s > 0 else float("nan")
        key = next((k for k in ("time_s", "ttft_s", "iteration_s", "trainer_samples_per_s") if k in result.metrics), None)
        metric = f"{key}={result.metrics[key]:.4g}" if key else ""
        print(f"{path.stem:40s} {result.wall_s:8.2f} {result.events:10d} {rate:12,.0f} {rate / ceiling:9.2f} "
              f"{peak_rss_mib():9.0f}  {metric}")


if __name__ == "__main__":
    main()
