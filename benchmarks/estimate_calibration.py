"""Calibrate the wall-time estimate's machine scaling (sim/scenario/estimate.py) on this machine.

    python benchmarks/estimate_calibration.py [--only SUBSTRING ...]

`dcsim check` and `dcsim run` estimate a run's wall time from its counted events and links with
constants measured once (`EVENTS_PER_S`, a kind's `event_cost`), then scale it by this machine's
speed: the engine probe's rate here (sim/engine/speed_probe.py) over `REFERENCE_EVENTS_PER_S`, the
probe rate of a machine on which those constants are right. This script measures that rate: it runs
every shipped scenario (scenarios/*.yaml) once in this process, prints its wall time, events and
the unscaled estimate, and takes the median of estimate / wall time over the runs of at least
`LONG_S` (the runs a warning is about; shorter ones are dominated by building and reports, which
the estimate does not count). A machine on which that median is 1 runs the probe at
probe / median: that is `REFERENCE_EVENTS_PER_S`. The probe is taken before and after the runs
(best of its loops each time). Run it on a quiet machine: load slows runs and probe differently.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LONG_S = 5.0


def main() -> None:
    from sim import load_scenario, run
    from sim.engine.speed_probe import engine_events_per_s
    from sim.scenario.estimate import estimate, wall_time_s

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="run only scenarios whose file name contains one of these")
    args = ap.parse_args()
    paths = sorted((HERE.parent / "scenarios").glob("*.yaml"))
    if args.only:
        paths = [p for p in paths if any(s in p.name for s in args.only)]
    before = engine_events_per_s()
    print(f"engine probe before: {before:,.0f} events/s")
    ratios = []
    for path in paths:
        scenario = load_scenario(path, [])
        estimated = wall_time_s(estimate(scenario))
        result = run(scenario)
        print(
            f"{path.name:52s} {result.wall_s:8.2f} s {result.events:9d} events, estimated {estimated:8.2f} s "
            f"({estimated / result.wall_s:5.2f}x)",
            flush=True,
        )
        if result.wall_s >= LONG_S:
            ratios.append(estimated / result.wall_s)
    after = engine_events_per_s()
    probe = statistics.median([before, after])
    print(f"engine probe after: {after:,.0f} events/s")
    if not ratios:
        raise SystemExit(f"no run took {LONG_S:g} s or more: nothing to calibrate on")
    median = statistics.median(ratios)
    print(
        f"median estimate / wall time over the {len(ratios)} runs of {LONG_S:g} s or more: {median:.2f} "
        f"-> REFERENCE_EVENTS_PER_S = {probe:,.0f} / {median:.2f} = {probe / median:.3g}"
    )


if __name__ == "__main__":
    main()
