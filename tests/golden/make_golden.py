"""Write (or check) the golden metrics of every shipped and benchmark scenario.

    python tests/golden/make_golden.py            # rewrite tests/golden/metrics.json
    python tests/golden/make_golden.py --check    # compare, print the differences, exit 1 on any

Metrics are what a run reports in `metrics` (wall_s and the like are outside it); a refactor that
keeps results unchanged keeps this file unchanged. Heavy benchmark scenarios run shortened by the
overrides in SHORTEN, so the whole set stays minutes, not hours.

Golden metrics are kept per CPU class (`cpu_class`): on a CPU with AVX-512, numpy computes float64
exp, log and power (and SVML's other functions) with SIMD code of its own, elsewhere with the C
library's, and the two differ in the last bit now and then. Most metrics then differ by ~1e-16
relative, but a discrete decision taken on such a value (a tiered-memory page promoted or not) can
tip, and what follows it differs more (promotions 631 against 668 in tiered-dram-cxl-alloc-burst).
A run is deterministic on one machine (tests/end_to_end/test_hardening.py), not across CPU classes.
tests/golden/metrics.json holds the AVX-512 class's metrics (the other tests read it as the
reference set of metric names), metrics.no-avx512.json the others'. A model change rewrites the file
of the class it is made on; the other class's file is rewritten on a machine of that class.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cpu_class() -> str:
    """The class of this CPU: `avx512` where numpy runs its own AVX-512 loops for float64 exp/log/power, else `no-avx512`."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__  # numpy >= 2
    except ImportError:  # pragma: no cover (numpy 1.x)
        from numpy.core._multiarray_umath import __cpu_features__
    return "avx512" if __cpu_features__.get("AVX512F") and __cpu_features__.get("AVX512_SKX") else "no-avx512"


GOLDEN_FILES = {"avx512": "metrics.json", "no-avx512": "metrics.no-avx512.json"}
GOLDEN = ROOT / "tests" / "golden" / GOLDEN_FILES[cpu_class()]  # this machine's class (module docstring)

# benchmark scenarios too heavy to run whole here: the overrides that shorten them
SHORTEN = {
    "benchmarks/scenarios/ingestion-1h-400workers.yaml": ["workload.duration_s=20"],
    # one replica of 16 stage groups (2,048 GPUs), one iteration of 16 micro-batches
    "benchmarks/scenarios/training-16k-cp16-flow.yaml": [
        "hardware.nodes=256",
        "workload.parallelism.dp=1",
        "workload.iterations=1",
        "workload.global_batch_tokens=2097152",
    ],
}


def scenario_paths() -> list[Path]:
    return sorted((ROOT / "scenarios").glob("*.yaml")) + sorted((ROOT / "benchmarks" / "scenarios").glob("*.yaml"))


def metrics_of(path: Path) -> dict:
    from sim import load_scenario, run

    rel = str(path.relative_to(ROOT))
    result = run(load_scenario(str(path), SHORTEN.get(rel, [])), limits=None)
    return json.loads(json.dumps(result.metrics, sort_keys=True))


def differences(old, new, path: str = "") -> list[tuple[str, object, object, float]]:
    """(key path, golden, now, relative difference) of every leaf that differs (inf: not numbers)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += differences(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in differences(a, b, f"{path}[{i}]")]
    if old == new:
        return []
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
    rel = abs(new - old) / max(abs(old), abs(new)) if numbers else float("inf")  # type: ignore[operator]
    return [(path, old, new, rel)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    bad = 0
    for path in scenario_paths():
        rel = str(path.relative_to(ROOT))
        if args.only and not any(o in rel for o in args.only):
            continue
        start = time.perf_counter()
        metrics = metrics_of(path)
        wall = time.perf_counter() - start
        if args.check:
            same = golden.get(rel) == metrics
            bad += not same
            print(f"{'ok  ' if same else 'DIFF'} {rel} ({wall:.1f} s)", flush=True)
            if not same:
                diffs = differences(golden.get(rel), metrics)
                worst = max(d[3] for d in diffs)
                print(f"     {len(diffs)} values differ, largest relative difference {worst:.1e}:", flush=True)
                for key, old, new, r in sorted(diffs, key=lambda d: -d[3])[:5]:
                    print(f"     {key}: {old!r} -> {new!r} ({r:.1e})", flush=True)
        else:
            golden[rel] = metrics
            print(f"{rel}: {wall:.1f} s", flush=True)
            GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
