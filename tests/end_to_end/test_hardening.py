"""Hardening: determinism and isolation, provenance, output safety and resource limits.

- Determinism: tests/end_to_end/test_scenarios.py runs every shipped scenario twice (same seed -> identical
  metrics); here: every workload kind has a shipped scenario (so that check covers all kinds), runs
  of different kinds in one process do not influence each other, a fresh process with another hash
  seed gives the same metrics, and the source holds no module-level mutable state, no global RNG and
  no cached mutable data that a caller could change.
- Provenance: summary.json names the dcsim version, the hash of the resolved scenario and the
  calibration profile (entry or file, calibrated or not).
- Output safety: results, sweep tables and validation outputs are written atomically and only
  inside the directory named; YAML is read with the safe loader only; no eval/exec/pickle of input.
- Resource limits (sim/scenario/estimate.py): every shipped and benchmark scenario passes; an exploding one
  (10^9 flows, 8 GiB+) is refused up front by `run` and `dcsim check` with the estimate and a hint.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sim.errors import ScenarioError
from sim.runner import run, scenario_sha256
from sim.scenario.estimate import DEFAULT_LIMITS, Limits, enforce, estimate
from sim.scenario.model import load_scenario, scenario_from_dict
from sim.workloads import kinds
from tests.end_to_end.test_cli import cli

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
BENCHMARKS = sorted((ROOT / "benchmarks" / "scenarios").glob("*.yaml"))
SOURCE_DIRS = ("sim", "hardware_models", "validation")

# one quick scenario per kind (overrides keep each run well under a second)
QUICK = {
    "collective": ("allreduce-2x8-h100", []),
    "cp_inference": ("cp-405b-decode-128k", []),
    "ingestion": ("ingest-dlrm-on-trainer", ["workload.duration_s=15"]),
    "embedding_training": ("emb-dlrm-1x8-a100-scm", ["workload.iterations=1", "workload.tables.count=8"]),
    "training_campaign": (
        "faults-ckpt-interval-sweep",
        [
            "hardware.nodes=16",
            "workload.training=null",
            "workload.iteration_s=6",
            "workload.replicas=2",
            "workload.horizon=2 day",
        ],
    ),
    "tiered_memory": ("tiered-dram-cxl-1to4-phases", ["workload.duration_s=0.5 s"]),
    "training": ("train-moviegen-30b-video-dit-1024-gpus", ["workload.iterations=1"]),
}


def quick(kind: str, extra: list[str] = ()):
    name, overrides = QUICK[kind]
    return load_scenario(ROOT / "scenarios" / f"{name}.yaml", [*overrides, *extra])


# ---------------------------------------------------------------------------------------------
# determinism and isolation


def shipped_kinds() -> set[str]:
    out = set()
    for path in SCENARIOS:
        data = yaml.safe_load(path.read_text())
        jobs = data.get("workloads") or [data.get("workload") or {}]
        out.update(job.get("kind") for job in jobs)
    return out


def test_every_kind_has_a_shipped_scenario_so_determinism_covers_it():
    """tests/end_to_end/test_scenarios.py runs each shipped scenario twice and compares metrics: that covers a
    kind only if some shipped scenario (or a job of a multi-job one) uses it."""
    assert set(kinds()) <= shipped_kinds()


def test_runs_in_one_process_do_not_influence_each_other():
    """Every kind, run alone, then again after all the others (and after another seed): identical."""
    first = {k: run(quick(k)).metrics for k in QUICK}
    run(quick("collective", ["seed=7", "workload.bytes=1GiB"]))
    for kind in reversed(list(QUICK)):
        assert run(quick(kind)).metrics == first[kind], kind


def test_a_fresh_process_with_another_hash_seed_gives_the_same_metrics(tmp_path):
    """Set iteration order and string hashes change with PYTHONHASHSEED; results must not."""
    kinds_ = ["collective", "cp_inference", "ingestion", "tiered_memory"]
    script = (
        f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); "
        "from tests.end_to_end.test_hardening import quick, run; "
        f"print(json.dumps({{k: run(quick(k)).metrics for k in {kinds_!r}}}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    other = json.loads(out.stdout.strip().splitlines()[-1])
    here = json.loads(json.dumps({k: run(quick(k)).metrics for k in kinds_}))
    assert other == here


def _python_files():
    for d in SOURCE_DIRS:
        yield from sorted((ROOT / d).rglob("*.py"))


MUTATORS = {
    "append",
    "extend",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "insert",
    "remove",
    "discard",
    "sort",
}


def mutable_state_problems(source: str, where: str) -> list[str]:
    """`global` statements, and module-level lists/dicts/sets that a function mutates."""
    tree, problems, mutable = ast.parse(source), [], set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or (
            isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("dict", "list", "set", "defaultdict")
        ):
            mutable.update(t.id for t in targets if isinstance(t, ast.Name))
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                problems.append(f"{where}:{node.lineno}: global {node.names}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in mutable
                and node.func.attr in MUTATORS
            ):
                problems.append(f"{where}:{node.lineno}: {node.func.value.id}.{node.func.attr}()")
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                for t in node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in mutable:
                        problems.append(f"{where}:{node.lineno}: {t.value.id}[...] =")
    return problems


def test_no_module_level_mutable_state():
    """No `global`, and no module-level list/dict/set that a function mutates (constants are fine)."""
    bad = "CACHE = {}\nCOUNT = 0\ndef f(k):\n    global COUNT\n    CACHE[k] = 1\n    CACHE.setdefault(k, 2)\n"
    assert len(mutable_state_problems(bad, "bad.py")) == 3  # the detector sees all three
    problems = [
        p for path in _python_files() for p in mutable_state_problems(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not problems, problems


def test_no_global_random_number_generator():
    """All randomness comes from Simulation.rng(name) (or generators seeded from it): no np.random.*
    module functions, no `random` module, no unseeded default_rng()."""
    pattern = re.compile(
        r"\bnp\.random\.(?!default_rng\(\S|Generator\b)\w+|^\s*(import random|from random )|"
        r"\brandom\.(random|randint|choice|shuffle|seed|uniform)\(|default_rng\(\)"
    )
    assert all(
        pattern.search(x)
        for x in (
            "np.random.rand(3)",
            "import random",
            "x = random.choice(a)",
            "np.random.default_rng()",
            "np.random.seed(0)",
        )
    )
    assert not pattern.search("rng = np.random.default_rng([seed, p])")
    bad = []
    for d in ("sim", "hardware_models"):
        for path in sorted((ROOT / d).rglob("*.py")):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line.split("#")[0]):
                    bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, bad


def test_cached_catalog_data_cannot_be_changed_by_a_caller():
    """catalog and power defaults are lru-cached: what a caller gets must not alias the cache."""
    from hardware_models import catalog

    entry = catalog.raw_entry("device", "h100-sxm")
    entry["peak"]["bf16"] = 1.0
    entry["source"] = "changed"
    merged = catalog.raw_spec("device", {"base": "h100-sxm", "memory": "1 GiB"})
    merged["peak"]["fp8"] = 2.0
    fresh = catalog.raw_entry("device", "h100-sxm")
    assert fresh["peak"]["bf16"] != 1.0 and fresh["peak"].get("fp8") != 2.0 and fresh["source"] != "changed"
    assert catalog.device("h100-sxm").peak.bf16 > 1e14


# ---------------------------------------------------------------------------------------------
# provenance


def test_summary_carries_version_scenario_hash_and_profile(tmp_path):
    code, _, err = cli("run", str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml"), "--out", str(tmp_path), "--quiet")
    assert code == 0, err
    summary = json.loads((tmp_path / "summary.json").read_text())
    from importlib.metadata import version

    assert summary["dcsim_version"] == version("dcsim")
    resolved = load_scenario(tmp_path / "scenario.resolved.yaml")  # the hash is of what ran
    assert summary["scenario_sha256"] == scenario_sha256(resolved) and re.fullmatch(
        r"[0-9a-f]{64}", summary["scenario_sha256"]
    )
    assert summary["profile"] == {
        "name": "h100-sxm",
        "origin": "catalog",
        "file": None,
        "calibrated": False,
        "calibration": None,
        "nic": {"name": "cx7-400g-rdma", "origin": "catalog", "file": None, "calibrated": False, "calibration": None},
    }
    other = json.loads(
        cli("run", str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml"), "--json", "--set", "workload.bytes=1GiB")[1]
    )
    assert other["scenario_sha256"] != summary["scenario_sha256"]


def test_profile_names_a_calibrated_profile_file_and_inline_overrides():
    profile = ROOT / "validation" / "profiles" / "intel-xeon-processor-1t.yaml"
    link = ROOT / "validation" / "profiles" / "intel-xeon-processor-1t-link.yaml"
    base = {
        "name": "p",
        "hardware": {"gpus_per_node": 1, "nodes": 2, "gpu": str(profile), "nic": str(link)},
        "workload": {"kind": "collective", "bytes": "1 MiB"},
    }
    p = run(scenario_from_dict(base)).summary()["profile"]
    assert (p["name"], p["origin"], p["file"], p["calibrated"]) == (
        "intel-xeon-processor-1t",
        "file",
        str(profile),
        True,
    )
    assert p["calibration"].startswith("calibrated by `dcsim validate`") and p["nic"]["calibrated"] is True
    inline = {
        **base,
        "hardware": {
            "gpus_per_node": 1,
            "nodes": 2,
            "gpu": {"base": "h100-96gb-500w-cp-calibrated", "memory": "80 GB"},
        },
    }
    p = run(scenario_from_dict(inline)).summary()["profile"]
    assert (p["origin"], p["calibrated"], p["nic"]["origin"]) == ("catalog+inline", True, "catalog")


# ---------------------------------------------------------------------------------------------
# output safety


def test_results_stay_inside_out_dir_and_leave_no_temporary_files(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "../../escape/..",
                "hardware": {"gpus_per_node": 2, "nodes": 2},
                "workload": {"kind": "collective", "bytes": "1 MiB"},
            }
        )
    )
    out = tmp_path / "a" / "out"
    code, _, err = cli("run", str(scenario), "--out", str(out), "--quiet")
    assert code == 0, err
    everything = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    assert everything - {Path("s.yaml"), Path("a")} == {p.relative_to(tmp_path) for p in out.rglob("*")} | {
        Path("a/out")
    }
    assert {"summary.json", "scenario.resolved.yaml", "events.parquet", "links.csv", "trace.json"} <= {
        p.name for p in out.iterdir()
    }
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "temporary files left behind"


def test_a_failing_write_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    from sim.report import output

    target = tmp_path / "summary.json"
    output.write_json(target, {"v": 1})

    def broken(obj, *a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(output.json, "dumps", broken)
    with pytest.raises(RuntimeError):
        output.write_json(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1} and [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    with pytest.raises(RuntimeError):
        with output.atomic_path(target) as tmp:
            tmp.write_text('{"v": ')  # half written, then the process fails
            raise RuntimeError("killed")
    assert json.loads(target.read_text()) == {"v": 1} and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_sweep_tables_are_written_atomically(tmp_path, monkeypatch):
    import pandas as pd

    from sim.studies.sweep import run_sweep

    base = ROOT / "scenarios" / "sweep-collectives-base.yaml"
    run_sweep(base, grid={"workload.bytes": ["1 MiB"]}, out_dir=tmp_path, workers=1, progress=False)
    before = (tmp_path / "results.csv").read_text()

    def broken(self, path, *a, **k):
        Path(path).write_text("point,half")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError):
        run_sweep(base, grid={"workload.bytes": ["1 MiB", "2 MiB"]}, out_dir=tmp_path, workers=1, progress=False)
    assert (tmp_path / "results.csv").read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_validation_writers_are_atomic(tmp_path, monkeypatch):
    from sim.report import output
    from validation.records import load_records, save_records

    records = load_records(ROOT / "validation" / "records" / "intel-xeon-processor-1t-full.json")[:3]
    path = save_records(records, tmp_path / "records.json")
    monkeypatch.setattr(output.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("killed before rename")))
    with pytest.raises(OSError):
        save_records(records[:1], path)
    assert len(load_records(path)) == 3 and [p.name for p in tmp_path.iterdir()] == ["records.json"]


def test_sweep_plot_file_names_stay_in_the_sweep_directory(tmp_path):
    import pandas as pd

    from sim.studies.sweep_plots import plot_sweep_metrics

    table = pd.DataFrame({"point": ["a", "b"], "status": ["ok", "ok"], "x/../../y": [1, 2], "time_s": [1.0, 2.0]})
    [path] = plot_sweep_metrics(table, ["time_s"], keys=["x/../../y"], out_dir=tmp_path)
    assert path.parent == tmp_path and path.is_file()


def test_yaml_is_never_loaded_unsafely_and_nothing_is_evaluated():
    pattern = re.compile(
        r"yaml\.(load|unsafe_load|full_load|load_all)\(|yaml\.(Full|Unsafe)?Loader\b|"
        r"\beval\(|\bexec\(|pickle\.loads?\(|marshal\.loads?\("
    )
    assert all(pattern.search(x) for x in ("yaml.load(f)", "yaml.Loader", "eval(text)", "pickle.load(f)"))
    assert not pattern.search("yaml.safe_load(f)")
    bad = []
    for path in _python_files():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line.split("#")[0]):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, bad


def test_a_python_tag_in_a_scenario_is_an_error_not_code(tmp_path):
    flag = tmp_path / "pwned"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"name: !!python/object/apply:os.system ['touch {flag}']\nworkload: {{kind: collective, bytes: 1}}\n"
    )
    code, out, err = cli("check", str(scenario))
    assert code == 2 and "invalid YAML" in err and len(err.strip().splitlines()) == 1
    assert not flag.exists()


# ---------------------------------------------------------------------------------------------
# resource limits


@pytest.mark.parametrize("path", SCENARIOS + BENCHMARKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_and_benchmark_scenarios_are_within_the_limits(path):
    est = enforce(load_scenario(path))
    assert est.memory_bytes < DEFAULT_LIMITS.memory_bytes and est.events < DEFAULT_LIMITS.events


@pytest.mark.parametrize("kind", sorted(QUICK))
def test_estimates_are_within_an_order_of_magnitude(kind):
    scenario = quick(kind)
    est, result = estimate(scenario), run(scenario)
    net = result.cluster.network
    assert result.events / 10 <= est.events <= 10 * result.events
    if net.flows_started:
        assert net.flows_started / 10 <= est.flows <= 10 * net.flows_started


def test_a_billion_flow_all_to_all_is_refused_with_the_estimate_and_a_hint(tmp_path):
    base = ROOT / "benchmarks" / "scenarios" / "alltoall-1024gpu.yaml"
    scenario = load_scenario(base, ["hardware.nodes=4096"])  # 32K GPUs: 1.07e9 flows in one step
    assert estimate(scenario).simulated_flows > 1e9
    with pytest.raises(ScenarioError) as info:
        run(scenario)
    text = str(info.value)
    assert "refused before running" in text and "simulated flows" in text and "analytical" in text
    code, out, err = cli("check", str(base), "--set", "hardware.nodes=4096")
    assert code == 2 and "refused before running" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("run", str(base), "--set", "hardware.nodes=4096", "--json")
    assert code == 2 and err.startswith(f"dcsim: error: {base}: ")


def test_a_huge_cluster_is_refused_for_its_topology_alone():
    scenario = load_scenario(
        ROOT / "scenarios" / "allreduce-2x8-h100.yaml",
        ["hardware.nodes=1000000", "workload.group=2", "workload.algorithm=ring"],
    )
    with pytest.raises(
        ScenarioError, match=r"hardware.nodes: refused before running: estimated ~\d+(\.\d+)? GiB of memory"
    ):
        run(scenario)


def test_estimating_an_exploding_scenario_is_itself_cheap():
    """The estimate is closed-form: nothing per flow is built, at most a few bytes per GPU (a 10^12-flow
    all-to-all of 10^6 GPUs; its time is measured by benchmarks/cheap_checks.py)."""
    import tracemalloc

    scenario = load_scenario(ROOT / "benchmarks" / "scenarios" / "alltoall-1024gpu.yaml", ["hardware.nodes=125000"])
    estimate(scenario)  # lazy imports done before measuring
    tracemalloc.start()
    try:
        est = estimate(scenario)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.flows > 0.9e12 and peak_bytes < 100 * scenario.hardware.num_gpus


def test_limits_can_be_tightened_or_lifted():
    scenario = quick("collective")
    with pytest.raises(ScenarioError, match="events"):
        run(scenario, limits=Limits(events=10))
    assert run(scenario, limits=None).metrics["time_s"] > 0


def test_check_prints_the_estimate():
    code, out, _ = cli("check", str(ROOT / "benchmarks" / "scenarios" / "allreduce-16k-clos3.yaml"))
    assert code == 0 and re.search(r"estimate: .* events, .* flows \(.* simulated, .* at once\).* memory ~", out)
