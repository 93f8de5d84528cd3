"""Fuzzing the input entry points: every input ends in a result or a one-line ScenarioError.

The generators and entry points live in benchmarks/fuzz.py (`python benchmarks/fuzz.py --n 500`
runs many more inputs and prints the counts). Here each entry point gets a few dozen inputs in the
default run (more with `-m slow`), and every crash the fuzzer found has a regression test below:
the fix is named in its docstring.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings

from benchmarks import fuzz
from sim.errors import ScenarioError
from sim.runner import run
from sim.scenario.model import load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
FAST_BASES = [
    "allreduce-2x8-h100",
    "alltoall-fattree-oversub",
    "sweep-collectives-base",
    "ingest-dlrm-on-trainer",
    "cp-405b-decode-128k",
]
ENTRIES = fuzz.entries(run_timeout_s=10.0, compare_every=12, bases=None, runnable=FAST_BASES)
DEFAULT_EXAMPLES = {
    "scenario": 25,
    "yaml": 40,
    "set": 30,
    "cli": 60,
    "records": 24,
    "graph": 20,
    "trace": 15,
    "sweep": 8,
}


def _settings(n: int):
    return settings(
        max_examples=n, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )


def _fuzz_test(name: str, n: int):
    entry = ENTRIES[name]

    @_settings(n)
    @given(entry.strategy)
    def check(inp):
        outcome = entry.fn(inp)
        assert outcome.kind in ("ok", "error", "timeout"), f"{name} crashed: {outcome.detail}\ninput: {inp!r}"[:2000]

    return check


@pytest.mark.parametrize("name", sorted(DEFAULT_EXAMPLES))
def test_entry_point_never_crashes(name):
    _fuzz_test(name, DEFAULT_EXAMPLES[name])()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DEFAULT_EXAMPLES))
def test_entry_point_never_crashes_long(name):
    _fuzz_test(name, 10 * DEFAULT_EXAMPLES[name])()


def test_outcomes_are_classified():
    assert fuzz.classify(lambda: None).kind == "ok"
    assert fuzz.classify(lambda: (_ for _ in ()).throw(ScenarioError("bad", path="a.b"))).kind == "error"
    assert fuzz.classify(lambda: {}["x"]).kind == "crash"
    assert fuzz.classify(lambda: (_ for _ in ()).throw(ScenarioError("two\nlines"))).detail == "two lines"


# ---- regressions: crashes the fuzzer found, each fixed where the input is read -------------------


def one_line_error(fn, *args, match: str = "") -> str:
    with pytest.raises(ScenarioError) as info:
        fn(*args)
    text = str(info.value)
    assert "\n" not in text and match in text, text
    return text


def tiny(tmp_path: Path, **hardware) -> dict:
    return {
        "name": "t",
        "hardware": {"gpus_per_node": 1, "nodes": 2, **hardware},
        "workload": {"kind": "collective", "op": "all_reduce", "bytes": "1 MiB"},
    }


def test_spec_file_with_invalid_yaml(tmp_path):
    """hardware_models/catalog.py `_load_file`: a YAMLError escaped pydantic (which converts only
    ValueErrors) as a traceback; now a one-line error with the file and line."""
    (tmp_path / "gpu.yaml").write_text("name: [unclosed\n")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny(tmp_path, gpu="gpu.yaml")))
    one_line_error(load_scenario, tmp_path / "s.yaml", match="gpu.yaml' is not valid YAML at line 2")


@pytest.mark.parametrize(
    "text, match",
    [
        ("<graphml><graph><edge source='a'", "not a readable GraphML file"),  # XML ParseError
        (
            "<?xml version='1.0'?><graphml xmlns='http://graphml.graphdrawing.org/xmlns'><graph edgedefault='undirected'>"
            "<node id='h0'/><node id='h1'/></graph></graphml>",
            "has no edges",
        ),
    ],
)
def test_graphml_files(tmp_path, text, match):
    """hardware_models/topology_builders.py `_graph_file`: XML parse errors and edge-less graphs crashed the
    build (ParseError; ZeroDivisionError placing pool hosts); now ValueErrors -> one-line errors."""
    (tmp_path / "g.graphml").write_text(text)
    sc = scenario_from_dict(tiny(tmp_path, topology={"kind": "graph", "file": str(tmp_path / "g.graphml")}))
    one_line_error(run, sc, match=match)


@pytest.mark.parametrize(
    "edges, match",
    [
        ("h0 s0 100Gbit/s\nh1 s1 100Gbit/s\n", "is not connected"),  # two islands: NetworkXNoPath at run time
        ("h0 s0 -5\nh1 s0 100Gbit/s\n", "bandwidth > 0"),
        ("h0 s0 fast\nh1 s0 1e9\n", "edge h0-s0: 'fast' is not a valid bytes per s"),
        ("h0 h0 1e9\nh1 s0 1e9\nh0 s0 1e9\n", "two distinct nodes"),
    ],
)
def test_edge_list_files(tmp_path, edges, match):
    """hardware_models/topology_builders.py `_graph_file`: disconnected fabrics crashed at the first route,
    negative bandwidths and self-loops were accepted; all are load-time one-line errors now."""
    (tmp_path / "g.txt").write_text(edges)
    sc = scenario_from_dict(tiny(tmp_path, topology={"kind": "graph", "file": str(tmp_path / "g.txt")}))
    one_line_error(run, sc, match=match)


def test_valid_edge_list_still_runs(tmp_path):
    (tmp_path / "g.txt").write_text("# two leaves, one spine\nh0 s0 100Gbit/s\nh1 s1 100Gbit/s\ns0 s1 200Gbit/s 1us\n")
    sc = scenario_from_dict(tiny(tmp_path, topology={"kind": "graph", "file": str(tmp_path / "g.txt")}))
    assert run(sc).metrics["time_s"] > 0


@pytest.mark.parametrize(
    "damaged",
    [
        '"1e400"',
        "[1, 2]",
        '{"point": "x"}',
        "{}",
        '{"status": "ok"}',
        None,  # the right point id, status ok, but no summary: what a half-written record would look like
    ],
)
def test_sweep_resumes_over_damaged_point_records(tmp_path, damaged):
    """sim/studies/sweep.py `SweepStore.load`: a point file that parsed as JSON but was not a record crashed
    the resume (KeyError/TypeError, or an unwritable parquet table); damaged records now count as
    unfinished and the point runs again."""
    from sim.studies.sweep import plan_sweep, run_sweep

    base, grid = ROOT / "scenarios" / "sweep-collectives-base.yaml", {"workload.bytes": ["1 MiB"]}
    task = plan_sweep(base, grid)[0]
    (tmp_path / "points").mkdir()
    text = damaged or json.dumps({"point": task.point, "overrides": {}, "status": "ok", "error": {}, "wall_s": 1})
    (tmp_path / "points" / f"{task.point}.json").write_text(text)
    result = run_sweep(base, grid=grid, out_dir=tmp_path, workers=1, progress=False)
    assert result.ran == 1 and result.failed == 0 and list(result.table["status"]) == ["ok"]
    assert json.loads((tmp_path / "points" / f"{task.point}.json").read_text())["status"] == "ok"


def test_trace_page_ids_beyond_int64(tmp_path):
    """sim/memory/access.py `_integers`: 99999999999999999999 wrapped to a negative int64 page id and
    crashed np.bincount at run time; ids must be integers below 2^53 (exact in a float)."""
    from sim.memory.access import load_trace

    (tmp_path / "t.csv").write_text("page,count\n1,2\n99999999999999999999\n")
    one_line_error(load_trace, tmp_path / "t.csv", match="line 3: page '99999999999999999999' is not an integer >= 0")


def test_a_huge_cluster_is_rejected_cheaply_at_load():
    """hardware_models/topology_builders.py `check_shape` built one range per leaf/ToR to check divisibility:
    nodes x 10^6 ran out of memory while loading (MemoryError); it is arithmetic now, and
    sim/scenario/model.py caps nodes (10^6) and gpus_per_node (4096) so load-time checks stay cheap:
    nothing per node is allocated (the time it takes is measured by benchmarks/cheap_checks.py)."""
    import tracemalloc

    base = ROOT / "scenarios" / "train-llama3-405b-16k-gpus-seq128k-cp16.yaml"
    load_scenario(base)  # catalog and caches loaded before measuring
    tracemalloc.start()
    try:
        one_line_error(load_scenario, base, ["hardware.nodes=999998"], match="must equal the cluster's")
        one_line_error(load_scenario, base, ["hardware.nodes=2048000000"], match="less than or equal to 1000000")
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_bytes < 20e6


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("dtype", "recshard", "records.0.params.dtype: 'recshard': Input should be 'fp32'"),
        ("m", -3, "records.0.params.m: -3: Input should be greater than 0"),
        ("m", None, "records.0.params.m: 'gemm/fp32/64x64x64': required key is missing"),
    ],
)
def test_record_params_are_validated_where_records_are_read(tmp_path, key, value, match):
    """validation/records.py `parse_records`: a record's params were free-form, so a bad dtype or a
    missing size crashed calibration or prediction (KeyError in gpu.py) inside `dcsim validate
    --compare`; params are now checked per workload (what calibration and predictors read)."""
    data = json.loads((ROOT / "validation/records/intel-xeon-processor-1t-full.json").read_text())
    params = data["records"][0]["params"]
    if value is None:
        del params[key]
    else:
        params[key] = value
    (tmp_path / "r.json").write_text(json.dumps(data))
    from validation.records import load_records

    one_line_error(load_records, tmp_path / "r.json", match=match)


def test_nominal_figures_from_another_machine_are_checked(tmp_path):
    """validation/harness.py `_nominal_for`: records' meta.nominal (from the machine that measured
    them) without a peak for a dtype the records ran crashed the fit (ValueError/KeyError)."""
    from validation.harness import validate

    data = json.loads((ROOT / "validation/records/intel-xeon-processor-1t-full.json").read_text())
    data["records"] = data["records"][:8]
    data["records"][1]["params"]["dtype"] = "fp8"
    (tmp_path / "r.json").write_text(json.dumps(data))
    text = one_line_error(validate, "cpu", False, tmp_path / "out", tmp_path / "r.json", lambda *a, **k: None)
    assert "meta.nominal.Intel(R) Xeon(R) Processor.peak" in text and "no nominal peak for fp8" in text
