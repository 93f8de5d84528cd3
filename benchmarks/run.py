"""Speed benchmarks: bare SimPy's event rate (the ceiling), then dcsim on each benchmark scenario.

    python benchmarks/run.py [--only NAME ...] [--set KEY=VALUE ...] [--repeats N]

NAME is a file stem of benchmarks/scenarios/*.yaml (e.g. cp-405b-1m-16hosts); --set overrides
scenario fields as `dcsim run --set` does (e.g. workload.duration_s=60 for a shortened ingestion run;
its target then no longer applies and shows as "n/a").

Prints one table. First start-up (issue 26), each command a fresh process run `--startup-repeats`
times (median wall time, peak resident memory of the process): `python -c "import numpy"` (the
yardstick), `dcsim --help`, `python -c "import sim.cli"` and the README's first command (`dcsim run
scenarios/allreduce-2x8-h100.yaml`; `dcsim` is the console script beside this interpreter, see
`dcsim_command`), with their ratio to the yardstick; targets: `dcsim --help` at
most 4x `import numpy`, the small scenario under 1 s (on a quiet machine; the ratio is less
sensitive to load). Then, all runs in this one process: bare SimPy's and dcsim's engine events/s on
a timeout loop, the engine probe's rate and this machine's speed relative to the machine the
wall-time estimates are calibrated on (sim/engine/speed_probe.py), then per scenario the wall time,
events processed, events/s, the ratio to bare SimPy's events/s, the peak memory (resident set, reset
before each run where Linux allows it, else the process's peak so far), issue 13's targets for it
and whether they are met; with `--repeats N` each scenario runs N times in a row and its row shows
the median wall time (targets are judged on it), every run's wall time and the largest peak.
Targets: events/s at least half of bare SimPy's and memory under 4 GiB for every scenario, plus a
wall-time target per scenario (see TARGETS). Not part of the test suite:
speed targets are measured here, not asserted in tests.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# issue 13 ("Simulator performance and scale") wall-time targets, by scenario file stem
TARGETS = {
    "cp-405b-1m-16hosts": 2.0,  # 16-host 1M-token CP prefill under 2 s
    "embedding-1024gpu": 10.0,  # 1,024-GPU embedding iteration, flow-level all-to-all, under 10 s
    "allreduce-16k-clos3": 60.0,  # 16K-GPU flow-level ring all-reduce under 60 s
    "training-16k-analytical": 1.0,  # 16K-GPU analytical training iteration under 1 s
    "ingestion-1h-400workers": 120.0,  # 1 simulated hour, 400 workers: "a minute or two" (lead's brief)
    "training-16k-cp16-flow": 60.0,  # issue 26: 16K-GPU 128K CP16 training on the flow network under 60 s
}
MIN_RATIO = 0.5  # events/s at least half of bare SimPy's
MAX_MEMORY_MIB = 4096.0
README_SCENARIO = "scenarios/allreduce-2x8-h100.yaml"  # the README's first command runs it
# issue 26 start-up targets: (most x `import numpy`, most seconds) per command
STARTUP_TARGETS = {"dcsim --help": (4.0, None), "dcsim run (README)": (None, 1.0)}


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set (Linux: VmHWM via clear_refs); False if not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    """Peak resident set since the last reset (Linux VmHWM), else since the process started."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Runs one command from a small interpreter and prints its wall time, peak resident KiB and exit code.
# (A child's peak resident set includes the memory of the process that forked it, so the command
# is not started from this benchmark process, which holds the scenarios' runs.)
_LAUNCHER = """import os, sys, time
quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
start = time.perf_counter()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ, file_actions=quiet)
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def timed_process(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of one run of `argv` as a fresh process, output discarded."""
    launch = [sys.executable, "-I", "-S", "-c", _LAUNCHER, *argv]
    out = subprocess.run(launch, cwd=HERE.parent, capture_output=True, text=True, check=True).stdout.split()
    wall_s, peak_kib, code = float(out[0]), int(out[1]), int(out[2])
    if code != 0:
        raise SystemExit(f"start-up command failed (exit {code}): {' '.join(argv)}")
    return wall_s, peak_kib / 1024  # Linux reports KiB


def modules_without_bytecode(root: Path) -> int:
    """How many of dcsim's modules (sim/, hardware_models/ under `root`) have no .pyc that Python
    would use (missing, or written for another source: the timestamp check, as the import system
    makes it)."""
    import importlib.util

    missing = 0
    for source in [*root.glob("sim/**/*.py"), *root.glob("hardware_models/**/*.py")]:
        cached = Path(importlib.util.cache_from_source(str(source)))
        try:
            header = cached.read_bytes()[:16]
        except OSError:
            missing += 1
            continue
        stat = source.stat()
        flags, mtime, size = (int.from_bytes(header[i : i + 4], "little") for i in (4, 8, 12))
        if flags != 0 or mtime != int(stat.st_mtime) & 0xFFFFFFFF or size != stat.st_size & 0xFFFFFFFF:
            missing += 1
    return missing


def dcsim_command() -> list[str]:
    """How the start-up rows start `dcsim`: the console script `pip install` wrote beside this
    interpreter (what `dcsim` is in a virtual environment), else the first `dcsim` on PATH, else
    `python -m sim.cli`. The script beside the interpreter comes first because a version manager's
    `dcsim` on PATH (pyenv's shims) is a shell script that finds the interpreter before starting it:
    50-100 ms of its own on this machine, which `python -c "import numpy"`, run by this
    interpreter, does not pay either."""
    beside = Path(sys.executable).parent / "dcsim"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("dcsim")
    return [found] if found else [sys.executable, "-m", "sim.cli"]


def startup_rows(repeats: int) -> None:
    """Start-up rows of the table: median wall time of `repeats` fresh processes per command."""
    dcsim = dcsim_command()
    commands = {
        "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
        "dcsim --help": [*dcsim, "--help"],
        "python -c 'import sim.cli'": [sys.executable, "-c", "import sim.cli"],
        "dcsim run (README)": [*dcsim, "run", README_SCENARIO],
    }
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, float] = dict.fromkeys(commands, 0.0)
    for _ in range(repeats):  # interleaved, so that a change of load hits every command alike
        for name, argv in commands.items():
            wall, peak = timed_process(argv)
            walls[name].append(wall)
            peaks[name] = max(peaks[name], peak)
    numpy_s = statistics.median(walls["python -c 'import numpy'"])
    for name in commands:
        median = statistics.median(walls[name])
        most_ratio, most_s = STARTUP_TARGETS.get(name, (None, None))
        targets, missed = [], []
        if most_ratio is not None:
            targets.append(f"<={most_ratio:g}x numpy")
            missed += ["ratio"] if median > most_ratio * numpy_s else []
        if most_s is not None:
            targets.append(f"wall<{most_s:g}s (quiet)")
            missed += ["wall"] if not median < most_s else []
        targets.append(f"mem<{MAX_MEMORY_MIB / 1024:g}GiB")
        missed += ["mem"] if not peaks[name] < MAX_MEMORY_MIB else []
        met = "yes" if not missed else "no:" + "+".join(missed)
        print(
            f"{'start-up: ' + name:36s} {median:8.3f} {'-':>10s} {'-':>11s} {'-':>8s} {peaks[name]:8.0f}  "
            f"{', '.join(targets):32s} {met:12s} {median / numpy_s:.1f}x import numpy; median of {repeats} "
            f"processes (min {min(walls[name]):.3f} s)",
            flush=True,
        )


def verdict(stem: str, wall_s: float, ratio: float, memory_mib: float, overridden: bool) -> tuple[str, str]:
    """(targets, met) columns: 'yes', or 'no:' and the targets missed."""
    wall_target = None if overridden else TARGETS.get(stem)
    targets = [f"ev/s>={MIN_RATIO:g}x", f"mem<{MAX_MEMORY_MIB / 1024:g}GiB"]
    missed = []
    if wall_target is not None:
        targets.insert(0, f"wall<{wall_target:g}s")
        if not wall_s < wall_target:
            missed.append("wall")
    elif stem in TARGETS:
        targets.insert(0, "wall n/a")
    if not ratio >= MIN_RATIO:
        missed.append("ev/s")
    if not memory_mib < MAX_MEMORY_MIB:
        missed.append("mem")
    return ", ".join(targets), "yes" if not missed else "no:" + "+".join(missed)


def main() -> None:
    from sim import load_scenario, run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="scenario file stems to run (default: all)")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field (repeatable)",
    )
    ap.add_argument("--startup-repeats", type=int, default=5, metavar="N", help="processes per start-up row")
    ap.add_argument("--no-startup", action="store_true", help="leave the start-up rows out")
    ap.add_argument(
        "--repeats", type=int, default=1, metavar="N", help="runs per scenario: the row shows their median wall time"
    )
    args = ap.parse_args()
    paths = sorted((HERE / "scenarios").glob("*.yaml"))
    if args.only:
        unknown = set(args.only) - {p.stem for p in paths}
        if unknown:
            ap.error(f"no benchmark scenario {', '.join(sorted(unknown))}; have: {', '.join(p.stem for p in paths)}")
        paths = [p for p in paths if p.stem in args.only]
    header = (
        f"{'scenario':36s} {'wall_s':>8s} {'events':>10s} {'events/s':>11s} {'vs simpy':>8s} {'peak MiB':>8s}  "
        f"{'targets':32s} {'met':12s} metric"
    )
    if not args.no_startup:
        uncached = modules_without_bytecode(HERE.parent)
        if sys.flags.dont_write_bytecode and uncached:
            print(
                f"note: bytecode caching is off here (PYTHONDONTWRITEBYTECODE) and {uncached} of dcsim's modules have no "
                "up-to-date .pyc: every process compiles them (`python -m compileall -q sim hardware_models` writes them)"
            )
        print(header)
        startup_rows(args.startup_repeats)
        print()
    from sim.engine.speed_probe import engine_events_per_s, timeout_loop_events_per_s
    from sim.scenario.estimate import REFERENCE_EVENTS_PER_S

    ceiling = timeout_loop_events_per_s(events=400_000)
    print(f"bare SimPy timeout loop: {ceiling:,.0f} events/s")
    probe = engine_events_per_s()
    print(
        f"engine probe (sim/engine/speed_probe.py): {probe:,.0f} events/s, {probe / REFERENCE_EVENTS_PER_S:.2f} x the "
        "machine the wall-time estimates are calibrated on (compare tables across machines by it)"
    )
    from sim.engine.simulation import Simulation

    engine = timeout_loop_events_per_s(Simulation(seed=0).env, events=400_000)
    print(
        f"dcsim engine, same loop: {engine:,.0f} events/s ({engine / ceiling:.2f} x SimPy: the engine's own "
        f"overhead; the scenarios below add their models' work per event)"
    )
    print(header)
    for path in paths:
        walls, memory = [], 0.0
        for _ in range(max(1, args.repeats)):
            gc.collect()
            reset_peak_rss()
            result = run(load_scenario(path, args.overrides))
            walls.append(result.wall_s)
            memory = max(memory, peak_rss_mib())
            if len(walls) < args.repeats:
                del result
        wall_s = statistics.median(walls)
        rate = result.events / wall_s if wall_s > 0 else float("nan")
        targets, met = verdict(path.stem, wall_s, rate / ceiling, memory, bool(args.overrides))
        key = next(
            (k for k in ("time_s", "ttft_s", "iteration_s", "trainer_samples_per_s") if k in result.metrics), None
        )
        metric = f"{key}={result.metrics[key]:.4g}" if key else ""
        if len(walls) > 1:
            metric += f"; median of {len(walls)} runs: {', '.join(f'{w:.2f}' for w in walls)} s"
        print(
            f"{path.stem:36s} {wall_s:8.2f} {result.events:10d} {rate:11,.0f} {rate / ceiling:8.2f} "
            f"{memory:8.0f}  {targets:32s} {met:12s} {metric}",
            flush=True,
        )
        del result


if __name__ == "__main__":
    main()
