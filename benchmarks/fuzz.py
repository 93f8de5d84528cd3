"""Fuzzing dcsim's input entry points with hypothesis-generated inputs.

    python benchmarks/fuzz.py [--n 200] [--entries scenario,yaml,set,cli,records,graph,sweep] [--seed 0]

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
- `sweep`: a sweep directory whose point records were corrupted, resumed with `run_sweep`.

Prints per entry point the inputs tried and how they ended (ok, error = one-line ScenarioError,
timeout, crash), then each distinct crash with its input. Exit code 1 if anything crashed.
"""
from __future__ import annotations

import argparse
import copy
import json
import signal
import sys
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.errors import ScenarioError  # noqa: E402
from sim.estimate import Limits  # noqa: E402

FUZZ_LIMITS = Limits(memory_bytes=3 * 2**30, events=3e5, simulated_flows=3e5)
LIGHT = ["allreduce-2x8-h100", "alltoall-fattree-oversub", "sweep-collectives-base", "ingest-dlrm-on-trainer",
         "emb-dlrm-1x8-a100-scm", "ingest-video-curation", "cp-405b-decode-128k", "faults-ckpt-interval-sweep"]
SPECIAL = ["", "0", "-1", "1e400", "nan", "inf", "-inf", "1 GiB", "-3 GiB", "0 B", "400 Gbit/s", "2 us", "5 ms",
           "1 parsec", "1e30 TFLOP/s", "GiB", "1 GiB/s/s", "700 W", "54 day", "auto", "all", "ring", "tree",
           "direct", "hierarchical", "flow", "analytical", "h100-sxm", "nvlink4", "cx7-400g-rdma", "hdd", "ddr5-host",
           "x.yaml", "../../nope.yaml", "/dev/zero.yaml", "0-3", "3-1", "0-", "!!python/object:os.system",
           "collective", "cp_inference", "embedding_training", "ingestion", "training_campaign", "graph",
           "fat-tree", "clos3", "torus", "young-daly", "pass-kv", "recshard", "manual", "fp8", "int4"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**66, 2**66), st.integers(-3, 64),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(SPECIAL))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(SPECIAL) | st.text(max_size=6), inner, max_size=3), max_leaves=6)


class RunTimeout(BaseException):
    """Raised by the alarm: a run that outlives its budget (BaseException: no `except Exception` eats it)."""


def _alarm(_signum, _frame):
    raise RunTimeout()


@dataclass
class Outcome:
    kind: str                     # ok | error | timeout | crash
    detail: str = ""


def classify(fn: Callable, *args, timeout_s: float = 0.0) -> Outcome:
    """Run fn(*args): ok, a one-line ScenarioError, a timeout, or a crash (anything else)."""
    if timeout_s:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        fn(*args)
    except RunTimeout:
        return Outcome("timeout")
    except ScenarioError as err:
        text = str(err)
        return Outcome("error", text) if "\n" not in text and text else Outcome("crash", f"bad message: {text!r}")
    except Exception as exc:  # noqa: BLE001 - that is what we are looking for
        frames = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames)
                      if str(ROOT) in f.filename and "fuzz.py" not in f.filename), "?")
        return Outcome("crash", f"{type(exc).__name__} at {where}: {str(exc)[:200]}")
    finally:
        if timeout_s:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return Outcome("ok")


# ---------------------------------------------------------------------------------------------
# inputs

def shipped(names: list[str] | None = None) -> dict[str, dict]:
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    return {p.stem: yaml.safe_load(p.read_text()) for p in paths if names is None or p.stem in names}


def _slots(node: Any, out: list) -> list:
    """(container, key) of every value inside `node` (dict keys and list indices)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        out.append((node, key))
        _slots(value, out)
    return out


@st.composite
def mutated(draw, base: dict, max_edits: int = 4) -> dict:
    """`base` with 1..max_edits random edits (see module docstring)."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_edits))):
        slots = _slots(data, [(None, None)])
        container, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["set", "set", "delete", "add", "wrap", "empty"]))
        if container is None or op == "add":
            target = data if container is None or not isinstance(container.get(key) if isinstance(container, dict)
                                                                  else None, dict) else container[key]
            target[draw(st.sampled_from(SPECIAL[:20]) | st.text(min_size=1, max_size=8))] = draw(VALUES)
        elif op == "delete":
            del container[key]
        elif op == "wrap":
            container[key] = [container[key]] if draw(st.booleans()) else {"x": container[key]}
        elif op == "empty":
            container[key] = [] if isinstance(container[key], list) else {}
        else:
            container[key] = draw(VALUES)
    return data


@st.composite
def scenario_inputs(draw, bases: dict[str, dict]):
    name = draw(st.sampled_from(sorted(bases)))
    return name, draw(mutated(bases[name]))


def schema_keys() -> list[str]:
    from sim.scenario import Scenario
    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            keys.update(k for k in node.get("properties", {}))
            keys.update(str(v) for v in node.get("enum", []) if isinstance(v, str))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(Scenario.model_json_schema())
    return sorted(keys)


@st.composite
def yaml_texts(draw, bases: dict[str, dict], keys: list[str]) -> str:
    """A shipped scenario's YAML with character edits, or a random document from schema keys."""
    if draw(st.booleans()):
        text = yaml.safe_dump(bases[draw(st.sampled_from(sorted(bases)))], sort_keys=False)
        for _ in range(draw(st.integers(1, 5))):
            i = draw(st.integers(0, len(text)))
            j = min(len(text), i + draw(st.integers(0, 8)))
            text = text[:i] + draw(st.text(alphabet="{}[]:,-#&*!|>'\"%@`\t\n ab01.", max_size=6)) + text[j:]
        return text
    doc = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(keys), inner, max_size=4), max_leaves=12)
    data = {"name": "fuzz", "hardware": draw(doc), "workload": draw(st.dictionaries(st.sampled_from(keys), doc,
                                                                                    max_size=4))}
    if draw(st.booleans()):
        data["workload"]["kind"] = draw(st.sampled_from(SPECIAL[-14:-9]))
    return yaml.safe_dump(data)


def override_texts(bases: dict[str, dict]):
    paths = sorted({".".join(str(p) for p in path) for b in bases.values() for path in _key_paths(b)})
    structured = st.builds(lambda k, v: f"{k}={v}", st.sampled_from(paths) | st.text(max_size=10),
                           st.sampled_from(SPECIAL) | st.text(max_size=10)
                           | VALUES.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip()))
    return structured | st.text(max_size=30)


def _key_paths(node, prefix=()):
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _key_paths(value, (*prefix, key))


@st.composite
def record_files(draw) -> tuple[str, str]:
    """(suffix, text): a few shipped records (+ meta) mutated, as JSON or YAML."""
    full = json.loads((ROOT / "validation/records/intel-xeon-processor-1t-full.json").read_text())
    picks = draw(st.lists(st.integers(0, len(full["records"]) - 1), min_size=1, max_size=6, unique=True))
    data = draw(mutated({"meta": full["meta"], "records": [full["records"][i] for i in picks]}, max_edits=3))
    suffix = draw(st.sampled_from([".json", ".yaml"]))
    text = json.dumps(data) if suffix == ".json" else yaml.safe_dump(data)
    return suffix, text


TOKENS = ["s0", "s1", "s2", "h0", "h1", "h2", "h3", "#", "100 Gbit/s", "1e9", "-5", "0", "nan", "fast", "1 us",
          "2 ms", "-1 us", "400 Gbit/s", "x"]


@st.composite
def graph_files(draw) -> tuple[str, str, dict]:
    """(suffix, text, hardware overrides) of a topology graph file: edge list or GraphML."""
    nodes, gpn = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    hw = {"nodes": nodes, "gpus_per_node": gpn}
    if draw(st.booleans()):
        hw["hosts"] = draw(st.lists(st.sampled_from(TOKENS[:7]), max_size=5))
    if draw(st.booleans()):
        import networkx as nx
        g = nx.Graph()
        for u, v, bw in draw(st.lists(st.tuples(st.sampled_from(TOKENS[:7]), st.sampled_from(TOKENS[:7]),
                                                st.sampled_from(TOKENS[8:])), max_size=8)):
            g.add_edge(u, v, bandwidth=bw)
        text = "\n".join(nx.generate_graphml(g))
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(alphabet="<>/\"= abc", max_size=4)) + text[i + draw(st.integers(0, 5)):]
        return ".graphml", text, hw
    lines = draw(st.lists(st.lists(st.sampled_from(TOKENS), max_size=5).map(" ".join), min_size=1, max_size=10))
    return ".txt", "\n".join(lines), hw


# ---------------------------------------------------------------------------------------------
# entry points: each takes one generated input and runs the whole user path

def _run(scenario) -> None:
    from sim.runner import run
    run(scenario, limits=FUZZ_LIMITS).summary()


def scenario_entry(inp, run_timeout_s: float = 20.0) -> Outcome:
    from sim.scenario import load_scenario
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
    from sim.scenario import load_scenario
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_text(text)
        return classify(load_scenario, path)


def set_entry(inp) -> Outcome:
    from sim.scenario import load_scenario
    name, texts = inp
    return classify(load_scenario, ROOT / "scenarios" / f"{name}.yaml", texts)


def cli_entry(text: str) -> Outcome:
    from sim.scenario import apply_override, parse_override
    from sim.sweep import expand, parse_axes
    from sim.trace import parse_window

    def all_parsers():
        for fn in (lambda: apply_override({"a": {"b": [1, 2]}}, *parse_override(text)),
                   lambda: expand(parse_axes([text], "--grid")), lambda: parse_window(text)):
            outcome = classify(fn)
            if outcome.kind == "crash":
                raise RuntimeError(outcome.detail)
    return classify(all_parsers)


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
        return classify(lambda: validate(compare=path, out_dir=Path(tmp) / "out", log=lambda *a, **k: None),
                        timeout_s=60.0)


def graph_entry(inp, run_timeout_s: float = 20.0) -> Outcome:
    from sim.scenario import scenario_from_dict
    suffix, text, hw = inp
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fabric{suffix}"
        path.write_text(text)
        topology = {"kind": "graph", "file": str(path), **({"hosts": hw["hosts"]} if "hosts" in hw else {})}
        data = {"name": "graph-fuzz", "hardware": {"nodes": hw["nodes"], "gpus_per_node": hw["gpus_per_node"],
                                                   "topology": topology},
                "workload": {"kind": "collective", "op": "all_reduce", "bytes": "1 MiB"}}
        if hw["nodes"] * hw["gpus_per_node"] < 2:
            data["workload"] = {"kind": "collective", "op": "all_reduce", "bytes": "1 MiB", "group": 1}
        return classify(lambda: _run(scenario_from_dict(data)), timeout_s=run_timeout_s)


def sweep_entry(text: str) -> Outcome:
    from sim.sweep import plan_sweep, run_sweep
    base = ROOT / "scenarios" / "sweep-collectives-base.yaml"
    grid = {"workload.bytes": ["1 MiB"]}
    with tempfile.TemporaryDirectory() as tmp:
        task = plan_sweep(base, grid)[0]
        points = Path(tmp) / "points"
        points.mkdir()
        (points / f"{task.point}.json").write_text(text)
        return classify(lambda: run_sweep(base, grid=grid, out_dir=tmp, workers=1, progress=False))


def sweep_texts():
    record = {"point": "x", "overrides": {}, "status": "ok", "error": "", "wall_s": 0.1, "summary": None}
    return (VALUES.map(json.dumps) | mutated(record).map(json.dumps) | st.text(max_size=40))


@dataclass
class Entry:
    name: str
    strategy: Any
    fn: Callable[[Any], Outcome]
    counts: Counter = field(default_factory=Counter)
    crashes: dict = field(default_factory=dict)       # detail -> first input


def entries(run_timeout_s: float = 20.0, compare_every: int = 10, light_only: bool = False) -> dict[str, Entry]:
    bases = shipped(LIGHT if light_only else None)
    light = shipped(LIGHT)
    seen = Counter()

    def records(inp):
        seen["records"] += 1
        return records_entry(inp, compare=seen["records"] % compare_every == 0)

    return {e.name: e for e in [
        Entry("scenario", scenario_inputs(bases),
              lambda inp: scenario_entry(inp, run_timeout_s if inp[0] in LIGHT else 0.0)),
        Entry("yaml", yaml_texts(bases, schema_keys()), yaml_entry),
        Entry("set", st.tuples(st.sampled_from(sorted(light)), st.lists(override_texts(light), min_size=1,
                                                                        max_size=3)), set_entry),
        Entry("cli", override_texts(light) | st.text(max_size=20), cli_entry),
        Entry("records", record_files(), records),
        Entry("graph", graph_files(), lambda inp: graph_entry(inp, run_timeout_s)),
        Entry("sweep", sweep_texts(), sweep_entry),
    ]}


def fuzz(entry: Entry, n: int, seed: int = 0) -> Entry:
    @hypothesis_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(entry.strategy)
    def one(inp):
        outcome = entry.fn(inp)
        entry.counts[outcome.kind] += 1
        if outcome.kind == "crash":
            entry.crashes.setdefault(outcome.detail, repr(inp)[:600])
    one()
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200, help="inputs per entry point")
    p.add_argument("--entries", default="scenario,yaml,set,cli,records,graph,sweep")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-timeout", type=float, default=20.0, help="wall seconds per simulated run")
    args = p.parse_args(argv)
    table = entries(args.run_timeout)
    crashed = 0
    print(f"{'entry':10s} {'inputs':>7s} {'ok':>6s} {'error':>6s} {'timeout':>8s} {'crash':>6s}")
    for name in args.entries.split(","):
        e = fuzz(table[name], args.n, args.seed)
        c = e.counts
        print(f"{name:10s} {sum(c.values()):7d} {c['ok']:6d} {c['error']:6d} {c['timeout']:8d} {c['crash']:6d}",
              flush=True)
        crashed += len(e.crashes)
        for detail, inp in e.crashes.items():
            print(f"  CRASH {detail}\n    input: {inp}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
