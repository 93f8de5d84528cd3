"""Instruction counts of a scenario run, to compare two versions of the code where wall times cannot.

    python benchmarks/instructions.py SCENARIO [--set KEY=VALUE ...] [--base REV] [--cache]

On the VMs dcsim is developed on, the wall time of one run moves by 10-15% from one minute to the
next (other tenants, memory bandwidth), so a change worth 2% is invisible in benchmarks/run.py's
medians. Instructions executed are not: this runs the scenario in-process (`run(load_scenario(...))`,
as benchmarks/run.py times it) under valgrind's callgrind, which counts every instruction the
interpreter, numpy and the compiled kernels execute (`Ir`), however busy the machine. With `--base
REV` the same run is counted for the committed revision REV too (checked out in a temporary git
worktree) and the difference printed.

A count repeats to ~1 part in 10^6 because everything that would vary is fixed: string hashing
(PYTHONHASHSEED=0), the numerical libraries' threads (one each: idle pool threads spin, and their
instructions count), bytecode (every module compiled first: where PYTHONDONTWRITEBYTECODE is set,
imports would otherwise compile sources, ~0.6 G instructions) and numba's kernels (one native run
of each version first compiles and caches them). The same code counted from the working tree and
from a worktree differs by ~0.01% (its paths): smaller differences mean nothing. Both counts include
the interpreter's start-up and dcsim's imports (~2.5 G instructions), which cancel in the difference.

What the count measures is work, not time: a change that saves memory traffic rather than
instructions (the flow network's compiled refill gathers and sums arrays of ~16K entries) shows
less in `Ir` than in seconds. `--cache` adds callgrind's cache simulation (first-level and
last-level misses) and its usual cycle estimate, Ir + 10 x first-level misses + 100 x last-level
misses (instruction fetches, data reads and writes), a rough but load-independent proxy for those.

Cost: callgrind runs a scenario 60-400x slower than natively (a small scenario, mostly start-up:
~1 min a count on a 2-core VM whose engine probe reads 0.26x; the 128-GPU embedding iteration: over
25 min), more with `--cache`. Needs valgrind (not a Python package: the system's; e.g. `apt-get
install valgrind`). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# the counted program: one in-process run of the scenario, as benchmarks/run.py times it
_RUN = """import sys
import sim
from sim import load_scenario, run
assert sim.__file__.startswith(sys.argv[-1]), (sim.__file__, sys.argv[-1])  # the code counted
result = run(load_scenario(sys.argv[1], sys.argv[2:-1]))
print("events", result.events)
"""

# one thread for the numerical libraries: idle pool threads spin, and callgrind counts their instructions
_ONE_THREAD = {
    name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}

# callgrind's event names: instructions; first-level and last-level misses of instruction fetches,
# data reads and data writes (with --cache-sim=yes)
FIRST_LEVEL, LAST_LEVEL = ("I1mr", "D1mr", "D1mw"), ("ILmr", "DLmr", "DLmw")


def totals(callgrind_out: str) -> dict[str, int]:
    """The event totals of a callgrind output file's text: its `events:` line names them, its
    `totals:` (or `summary:`) line counts them, in the same order."""
    names: list[str] = []
    counts: list[int] = []
    for line in callgrind_out.splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith(("totals:", "summary:")) and not counts:
            counts = [int(x) for x in line.split()[1:]]
    if not names or len(names) != len(counts):
        raise ValueError("not a callgrind output: no events and totals lines that match")
    return dict(zip(names, counts))


def estimated_cycles(counts: dict[str, int]) -> int | None:
    """Callgrind's usual cycle estimate: Ir + 10 x first-level misses + 100 x last-level misses
    (None without the cache simulation's counts)."""
    if not all(name in counts for name in FIRST_LEVEL + LAST_LEVEL):
        return None
    return (
        counts["Ir"] + 10 * sum(counts[name] for name in FIRST_LEVEL) + 100 * sum(counts[name] for name in LAST_LEVEL)
    )


def count(code_root: Path, scenario: str, overrides: list[str], cache: bool) -> dict[str, int]:
    """The event totals of one run of `scenario` with the code under `code_root`, after a native
    run that compiles and caches numba's kernels there."""
    # run from there (`-c` puts the cwd first); string hashing fixed: dicts and sets cost the same each run
    env = {**os.environ, "PYTHONPATH": str(code_root), "PYTHONHASHSEED": "0", **_ONE_THREAD}
    argv = [sys.executable, "-c", _RUN, scenario, *overrides, str(code_root)]
    # bytecode for every module (where PYTHONDONTWRITEBYTECODE is set, imports would otherwise compile
    # the sources each time: ~0.6 G instructions that a checkout with .pyc files does not spend)
    compile_all = [sys.executable, "-m", "compileall", "-q", "sim", "hardware_models"]
    subprocess.run(compile_all, cwd=code_root, check=True, capture_output=True)
    subprocess.run(argv, cwd=code_root, env=env, check=True, capture_output=True)  # warm: kernels cached
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        tool = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        if cache:
            tool.append("--cache-sim=yes")
        subprocess.run([*tool, *argv], cwd=code_root, env=env, check=True, capture_output=True)
        return totals(out.read_text())


def git_commit(revision: str) -> str:
    """The commit `revision` names now (its full hash)."""
    out = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"--base {revision}: not a commit of this repository")
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="a scenario file (e.g. benchmarks/scenarios/embedding-128gpu.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--base", help="a git revision to count too (checked out in a temporary worktree)")
    parser.add_argument("--cache", action="store_true", help="simulate the caches too (~2x slower)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (the system's package, e.g. apt-get install valgrind)")
    scenario = str(Path(args.scenario).resolve())
    # the base as a commit now: a name like HEAD~1 would mean another commit by the time (minutes
    # later) it is checked out, were one committed meanwhile
    base = git_commit(args.base) if args.base else None
    rows = [("working tree", count(ROOT, scenario, args.overrides, args.cache))]
    if base:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "base"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), base], cwd=ROOT, check=True)
            try:
                rows.insert(0, (f"base {args.base} ({base[:10]})", count(tree, scenario, args.overrides, args.cache)))
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
    for label, counts in rows:
        cycles = estimated_cycles(counts)
        extra = f", estimated cycles {cycles:,}" if cycles is not None else ""
        print(f"{label}: {counts['Ir']:,} instructions{extra}")
    if len(rows) == 2:
        (_, before), (_, after) = rows
        for name, value in (("instructions", lambda c: c["Ir"]), ("estimated cycles", estimated_cycles)):
            old, new = value(before), value(after)
            if old and new is not None:
                print(f"{name}: {new - old:+,} ({(new - old) / old:+.2%}) against the base")


if __name__ == "__main__":
    main()
