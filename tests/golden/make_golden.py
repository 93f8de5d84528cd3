"""Write (or check) the golden metrics of every shipped and benchmark scenario.

    python tests/golden/make_golden.py            # rewrite tests/golden/metrics.json
    python tests/golden/make_golden.py --check    # compare, print the differences, exit 1 on any

Metrics are what a run reports in `metrics` (wall_s and the like are outside it); a refactor that
keeps results unchanged keeps this file unchanged. Heavy benchmark scenarios run shortened by the
overrides in SHORTEN, so the whole set stays minutes, not hours.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "metrics.json"

# benchmark scenarios too heavy to run whole here: the overrides that shorten them
SHORTEN = {
    "benchmarks/scenarios/ingestion-1h-400workers.yaml": ["workload.duration_s=20"],
}


def scenario_paths() -> list[Path]:
    return sorted((ROOT / "scenarios").glob("*.yaml")) + sorted((ROOT / "benchmarks" / "scenarios").glob("*.yaml"))


def metrics_of(path: Path) -> dict:
    from sim import load_scenario, run

    rel = str(path.relative_to(ROOT))
    result = run(load_scenario(str(path), SHORTEN.get(rel, [])), limits=None)
    return json.loads(json.dumps(result.metrics, sort_keys=True))


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
        else:
            golden[rel] = metrics
            print(f"{rel}: {wall:.1f} s", flush=True)
            GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
