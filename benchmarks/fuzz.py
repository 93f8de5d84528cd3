"""Fuzzing dcsim's input entry points with hypothesis-generated inputs.

    python benchmarks/fuzz.py [--n 200] [--entries scenario,yaml,set,cli,records,graph,trace,sweep] [--seed 0]
                              [--log inputs.txt] [--memory-limit-gib 6]

Users feed dcsim hand-written YAML, `--set` flags, records and topology files from other machines.
Every such input must end in a result or in the one-line `ScenarioError` the CLI prints with exit
code 2 - never in another exception. Entry points (each runs the whole path a user would):

- `scenario`: shipped scenarios mutated (keys deleted, values replaced by odd ones - wrong types,
  negative, huge, NaN, bad units, other kinds' names - unknown keys added, lists emptied), written as
  YAML, loaded with `load_scenario` and, when light enough, run (under tight cost limits and a
  wall-clock timeout: `timeout` is counted apart, it is not a crash);
- `yaml`: shipped scenario texts with random character edits, and random YAML documents built from
  the scenario schema's key names;
- `set`: `--set` overrides (`parse_override` / `apply_override`) on shipped scenarios, then loading;
- `cli`: flag texts through `parse_override`, `--grid` axes (`parse_axes`, `expand`) and
  `--trace-window` (`parse_window`);
- `records`: measured-record files (mutated shipped records as JSON or YAML) through `load_records`
  and, for a few, the whole `dcsim validate --compare` pipeline (calibrate, predict, report);
- `graph`: `topology: {kind: graph}` edge-list and GraphML files, loaded and run;
- `trace`: page-access trace CSVs of `kind: tiered_memory` (sim/memory/access.py), loaded and run;
- `sweep`: a sweep directory whose point records were corrupted, resumed with `run_sweep`.

Prints per entry point the inputs tried and how they ended (ok, error = one-line ScenarioError,
timeout, crash), then each distinct crash with its input. Exit code 1 if anything crashed. The
process caps its own address space (`--memory-limit-gib`), so an input the cost estimate should
have refused ends in MemoryError - a crash - instead of waking the OOM killer; `--log` writes each
input before it runs. The generators are in benchmarks/fuzz_inputs.py; tests/end_to_end/test_fuzz.py runs a
few dozen inputs per entry point and the regression tests of every crash found.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fuzz_inputs import (  # noqa: E402
    graph_files,
    override_texts,
    record_files,
    scenario_inputs,
    schema_keys,
    shipped,
    sweep_texts,
    trace_files,
    yaml_texts,
)
from sim.errors import ScenarioError  # noqa: E402
from sim.scenario.estimate import Limits  # noqa: E402

FUZZ_LIMITS = Limits(memory_bytes=3 * 2**30, events=3e5, simulated_flows=3e5)
LIGHT = [
    "allreduce-2x8-h100",
    "alltoall-fattree-oversub",
    "sweep-collectives-base",
    "ingest-dlrm-on-trainer",
    "emb-dlrm-1x8-a100-scm",
    "ingest-video-curation",
    "cp-405b-decode-128k",
    "faults-ckpt-interval-sweep",
]


class RunTimeout(BaseException):
    """Raised by the alarm: a run that outlives its budget (BaseException: no `except Exception` eats it)."""


def _alarm(_signum, _frame):
    raise RunTimeout()


@dataclass
class Outcome:
    kind: str  # ok | error | timeout | crash
    detail: str = ""


def classify(fn: Callable, *args, timeout_s: float = 0.0) -> Outcome:
    """Run fn(*args): ok, a one-line ScenarioError, a timeout, or a crash (anything else)."""
    if timeout_s:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s, 1.0)  # repeats: an alarm raised inside a gc callback is lost
    try:
        fn(*args)
    except RunTimeout:
        return Outcome("timeout")
    except ScenarioError as err:
        text = str(err)
        return Outcome("error", text) if "\n" not in text and text else Outcome("crash", f"bad message: {text!r}")
    except Exception as exc:  # noqa: BLE001 - that is what we are looking for
        frames = traceback.extract_tb(exc.__traceback__)
        where = next(
            (
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(frames)
                if str(ROOT) in f.filename and "fuzz.py" not in f.filename
            ),
            "?",
        )
        return Outcome("crash", f"{type(exc).__name__} at {where}: {str(exc)[:200]}")
    finally:
        if timeout_s:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return Outcome("ok")


# ---------------------------------------------------------------------------------------------
# entry points: each takes one generated input and runs the whole user path


def _run(scenario) -> None:
    from sim.runner import run

    run(scenario, limits=FUZZ_LIMITS).summary()


def scenario_entry(inp, run_timeout_s: float = 20.0) -> Outcome:
    from sim.scenario.model import load_scenario

    name, data = inp
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        holder = {}
        first = classify(lambda: holder.setdefault("s", load_scenario(path)))
        if first.kind != "ok" or run_timeout_s <= 0:
            return first
        return classify(_run, holder["s"], timeout_s=run_timeout_s)


def yaml_entry(text: str) -> Outcome:
    from sim.scenario.model import load_scenario

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_text(text)
        return classify(load_scenario, path)


def set_entry(inp) -> Outcome:
    from sim.scenario.model import load_scenario

    name, texts = inp
    return classify(load_scenario, ROOT / "scenarios" / f"{name}.yaml", texts)


def cli_entry(text: str) -> Outcome:
    from sim.report.trace import parse_window
    from sim.scenario.model import apply_override, parse_override
    from sim.studies.sweep import expand, parse_axes

    outcomes = [
        classify(fn)
        for fn in (
            lambda: apply_override({"a": {"b": [1, 2]}}, *parse_override(text)),
            lambda: expand(parse_axes([text], "--grid")),
            lambda: parse_window(text),
        )
    ]
    crashed = [o for o in outcomes if o.kind == "crash"]
    return (
        crashed[0] if crashed else next((o for o in outcomes if o.kind == "ok"), outcomes[0])
    )  # ok: one parser took it


def records_entry(inp, compare: bool = False) -> Outcome:
    from validation.records import load_records

    suffix, text = inp
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"records{suffix}"
        path.write_text(text)
        first = classify(load_records, path)
        if first.kind != "ok" or not compare:
            return first
        from validation.harness import validate

        return classify(
            lambda: validate(compare=path, out_dir=Path(tmp) / "out", log=lambda *_args, **_kwargs: None),
            timeout_s=60.0,
        )


def graph_entry(inp, run_timeout_s: float = 20.0) -> Outcome:
    from sim.scenario.model import scenario_from_dict

    suffix, text, hw = inp
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fabric{suffix}"
        path.write_text(text)
        topology = {"kind": "graph", "file": str(path), **({"hosts": hw["hosts"]} if "hosts" in hw else {})}
        data = {
            "name": "graph-fuzz",
            "hardware": {"nodes": hw["nodes"], "gpus_per_node": hw["gpus_per_node"], "topology": topology},
            "workload": {"kind": "collective", "op": "all_reduce", "bytes": "1 MiB"},
        }
        return classify(lambda: _run(scenario_from_dict(data)), timeout_s=run_timeout_s)


def trace_entry(inp, run_timeout_s: float = 20.0) -> Outcome:
    """A tiered_memory scenario replaying a page-access trace CSV (sim/memory/access.py), loaded and run."""
    from sim.scenario.model import scenario_from_dict

    text, overrides = inp
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.csv"
        path.write_text(text)
        wl = {
            "kind": "tiered_memory",
            "policy": "tpp",
            "fast_tier": "ddr5-host",
            "slow_tier": "cxl-expander",
            "ratio": "1:4",
            "page_bytes": "4 KiB",
            "access": {"trace": str(path), "access_bytes": 64},
        }
        wl.update({k: v for k, v in overrides.items() if v is not None})
        data = {
            "name": "trace-fuzz",
            "hardware": {
                "gpus_per_node": 1,
                "nodes": 1,
                "memory_tiers": [
                    {"base": "ddr5-host", "name": "ddr5-host"},
                    {"base": "cxl-expander", "name": "cxl-expander"},
                ],
            },
            "workload": wl,
        }
        return classify(lambda: _run(scenario_from_dict(data)), timeout_s=run_timeout_s)


def sweep_entry(text: str) -> Outcome:
    from sim.studies.sweep import plan_sweep, run_sweep

    base = ROOT / "scenarios" / "sweep-collectives-base.yaml"
    grid = {"workload.bytes": ["1 MiB"]}
    with tempfile.TemporaryDirectory() as tmp:
        task = plan_sweep(base, grid)[0]
        points = Path(tmp) / "points"
        points.mkdir()
        (points / f"{task.point}.json").write_text(text)
        return classify(lambda: run_sweep(base, grid=grid, out_dir=tmp, workers=1, progress=False))


@dataclass
class Entry:
    name: str
    strategy: Any
    fn: Callable[[Any], Outcome]
    counts: Counter = field(default_factory=Counter)
    crashes: dict = field(default_factory=dict)  # detail -> first input


def entries(
    run_timeout_s: float = 20.0,
    compare_every: int = 10,
    bases: list[str] | None = None,
    runnable: list[str] | None = None,
) -> dict[str, Entry]:
    """The entry points; `bases`: shipped scenarios to mutate (default all), `runnable`: those whose
    mutants are also run (default LIGHT)."""
    runnable = runnable or LIGHT
    light = shipped([b for b in runnable if bases is None or b in bases])
    bases = shipped(bases)
    seen = Counter()

    def records(inp):
        seen["records"] += 1
        return records_entry(inp, compare=seen["records"] % compare_every == 0)

    return {
        e.name: e
        for e in [
            Entry(
                "scenario",
                scenario_inputs(bases),
                lambda inp: scenario_entry(inp, run_timeout_s if inp[0] in runnable else 0.0),
            ),
            Entry("yaml", yaml_texts(bases, schema_keys()), yaml_entry),
            Entry(
                "set",
                st.tuples(st.sampled_from(sorted(light)), st.lists(override_texts(light), min_size=1, max_size=3)),
                set_entry,
            ),
            Entry("cli", override_texts(light) | st.text(max_size=20), cli_entry),
            Entry("records", record_files(), records),
            Entry("graph", graph_files(), lambda inp: graph_entry(inp, run_timeout_s)),
            Entry("trace", trace_files(), lambda inp: trace_entry(inp, run_timeout_s)),
            Entry("sweep", sweep_texts(), sweep_entry),
        ]
    }


def _flat(node, prefix="") -> dict:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else None
    if items is None:
        return {prefix: node}
    out = {}
    for k, v in items:
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out or {prefix: node}


def describe(inp) -> str:
    """A mutated shipped scenario as its base name and the changed key paths; anything else: repr."""
    if isinstance(inp, tuple) and len(inp) == 2 and isinstance(inp[1], dict) and isinstance(inp[0], str):
        path = ROOT / "scenarios" / f"{inp[0]}.yaml"
        if path.is_file():
            base, new = _flat(yaml.safe_load(path.read_text())), _flat(inp[1])
            diff = {
                k: new.get(k, "<deleted>")
                for k in sorted(set(base) | set(new))
                if base.get(k, "<absent>") != new.get(k, "<deleted>")
            }
            return f"{inp[0]} with {diff!r}"
    return repr(inp)


def fuzz(entry: Entry, n: int, seed: int = 0, log=None) -> Entry:
    @hypothesis_seed(seed)
    @settings(
        max_examples=n, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )
    @given(entry.strategy)
    def one(inp):
        if log is not None:  # the input before it runs: a hard kill (OOM) still leaves it
            log.write(f"{entry.name}\t{inp!r}\n")
            log.flush()
        start = time.perf_counter()
        outcome = entry.fn(inp)
        if log is not None:
            log.write(f"  -> {outcome.kind} in {time.perf_counter() - start:.1f} s\n")
        entry.counts[outcome.kind] += 1
        if outcome.kind == "crash":
            entry.crashes.setdefault(outcome.detail, describe(inp)[:1500])

    one()
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200, help="inputs per entry point")
    p.add_argument("--entries", default="scenario,yaml,set,cli,records,graph,trace,sweep")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-timeout", type=float, default=20.0, help="wall seconds per simulated run")
    p.add_argument("--log", help="append every input to this file before running it")
    p.add_argument(
        "--memory-limit-gib",
        type=float,
        default=6.0,
        help="address-space cap of this process: an input that explodes raises MemoryError (a crash: "
        "the cost estimate let it through) instead of waking the OOM killer",
    )
    args = p.parse_args(argv)
    import resource

    cap = int(args.memory_limit_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    log = open(args.log, "a") if args.log else None
    table = entries(args.run_timeout)
    crashed = 0
    print(f"{'entry':10s} {'inputs':>7s} {'ok':>6s} {'error':>6s} {'timeout':>8s} {'crash':>6s}")
    for name in args.entries.split(","):
        e = fuzz(table[name], args.n, args.seed, log)
        c = e.counts
        print(
            f"{name:10s} {sum(c.values()):7d} {c['ok']:6d} {c['error']:6d} {c['timeout']:8d} {c['crash']:6d}",
            flush=True,
        )
        crashed += len(e.crashes)
        for detail, inp in e.crashes.items():
            print(f"  CRASH {detail}\n    input: {inp}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
