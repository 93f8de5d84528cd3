"""`dcsim validate --measured` and `kind: trace_replay` on real traces recorded here by torch.profiler
(validation/measured/record_torch.py: a small MLP's training steps on one CPU thread; the same with 2
processes joined by gloo), on nccl-tests output (a labelled format sample, tests/validation/data/)
and on CSV tables.

- the trace's GEMMs become cases priced by the device model with their recorded shapes, its
  ProfilerSteps cases predicted by trace_replay, and every other operation is listed as unmatched;
- a measured CPU step replayed on this CPU's profile - calibrated here, as `dcsim validate` does,
  from GEMM and copy primitives measured in the test (the calibration set; the trace's step is the
  prediction) - reproduces its measured step time within 15 % (a timing figure: run with -m slow).
  A GEMM probe (a shape neither the trace nor the primitives hold) timed beside the trace says
  whether other load slowed this core between calibration and trace; then the test is skipped,
  saying so;
- the 2-rank gloo trace replays its all-reduces through the network (2 per step and rank, one per
  parameter tensor) and the collectives are cases with network predictions;
- nccl-tests: every table row is a case of the named collective on the ranks the header lists;
- CSV: collectives with a size, `gemm MxNxK` and scenario metrics are predicted; the rest is unmatched.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import pytest

from hardware_models import catalog
from sim.cli import main as cli_main
from sim.runner import run
from sim.scenario.model import scenario_from_dict

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "validation" / "profiles" / "intel-xeon-processor-1t.yaml"
LINK = ROOT / "validation" / "profiles" / "intel-xeon-processor-1t-link.yaml"
NCCL_SAMPLE = ROOT / "tests" / "validation" / "data" / "nccl-tests-all_reduce_perf.format-sample.txt"
PROBE = (320, 320, 320)  # no GEMM of the MLP has this shape
BUSY_SPEED = 0.8  # the probe at less than 80 % of the profile's speed: other load shares this core


def dcsim(*argv) -> int:
    with pytest.raises(SystemExit) as done:
        cli_main(list(argv))
    return done.value.code


def measured_json(capsys, path, *extra, out=None) -> dict:
    out = out or Path(tempfile.mkdtemp(prefix="measured-"))  # never the working directory
    assert dcsim("validate", "--measured", str(path), "--json", "--out", str(out), *extra) == 0
    return json.loads(capsys.readouterr().out)


def cpu_hardware(devices: int = 1, profile: Path = PROFILE) -> dict:
    return {
        "gpu": str(profile),
        "host_cpu": str(profile),
        "nic": str(LINK),
        "gpus_per_node": 1,
        "nodes": devices,
        "topology": {"kind": "single-switch", "switch_latency": 0},
    }


def replay(trace, devices: int = 1, profile: Path = PROFILE, **workload):
    data = {"kind": "trace_replay", "trace": trace, **workload}
    hardware = cpu_hardware(devices, profile)
    return run(scenario_from_dict({"name": "replay", "hardware": hardware, "workload": data}), limits=None)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[list[tuple[Path, float]], Path]:
    """Five traces of the MLP's steps, each with the probe's time beside it (before and after), and
    this CPU's device profile calibrated from the quick GEMM and copy primitives measured before and
    after the traces and pooled (as `dcsim validate` does): calibration sees the machine the traces saw."""
    from validation import primitives
    from validation.calibrate import calibrate, nominal_cpu
    from validation.measured.record_torch import probe_gemm_s, profile_mlp
    from validation.timing import Context

    ctx = Context.create("cpu", threads=1, quick=True)

    def measure_primitives() -> list:
        return primitives.measure_gemm(ctx) + primitives.measure_copy(ctx)

    measure_primitives()
    traces = []
    for i in range(5):
        before = probe_gemm_s(*PROBE)
        path = profile_mlp(tmp_path_factory.mktemp("mlp") / f"mlp{i}.json", steps=6)
        traces.append((path, (before * probe_gemm_s(*PROBE)) ** 0.5))
    records = measure_primitives()  # each record holds both passes' samples
    cal = calibrate(records, nominal_cpu(1), "this-cpu-1t", tmp_path_factory.mktemp("profile"))
    assert cal.device_path is not None
    return traces, Path(cal.device_path)


@pytest.fixture(scope="module")
def mlp(recorded) -> list[tuple[Path, float]]:
    return recorded[0]


@pytest.fixture(scope="module")
def this_cpu(recorded) -> Path:
    return recorded[1]


@pytest.fixture(scope="module")
def gloo(tmp_path_factory):
    from validation.measured.record_torch import profile_gloo

    out = tmp_path_factory.mktemp("gloo")
    profile_gloo(out)
    return out


def test_trace_ops_become_cases_and_the_rest_is_listed_unmatched(mlp, capsys, tmp_path):
    data = measured_json(capsys, mlp[0][0], out=tmp_path)
    cats = {c["category"] for c in data["cases"]}
    assert {"gemm", "elementwise", "step"} <= cats <= {"gemm", "elementwise", "step"}
    gemms = [c for c in data["cases"] if c["category"] == "gemm"]
    assert all(c["predicted_s"] > 0 and c["method"] == "device model" for c in gemms)
    # 256-512-512-256: forward addmm of each layer, backward mm for weights (3) and inputs (2)
    assert {c["name"].split()[0] for c in gemms} == {"aten::addmm", "aten::mm"}
    assert sum(c["count"] for c in gemms) == 6 * (3 + 5)
    steps = [c for c in data["cases"] if c["category"] == "step"]
    assert [c["name"] for c in steps] == [f"ProfilerStep#{i}" for i in range(1, 7)]
    assert all(c["predicted_s"] > 0 for c in steps)
    unmatched = {u["name"] for u in data["unmatched"]}
    assert {"aten::t", "aten::as_strided"} <= unmatched and not unmatched & {"aten::mm", "aten::addmm"}
    assert set(data["by_category"]) == {"step", "gemm", "elementwise"}
    assert (tmp_path / "scatter.png").stat().st_size > 0 and (tmp_path / "measured.json").is_file()


# A timing figure, checked only with -m slow (as the quick harness's targets are, test_validation.py): on
# a 2-core VM whose speed drifted 2x within minutes, one of three fresh-clone runs gave a median error of
# -17.9 % with the probe at 90 % of the profile's speed (above the skip guard), so in the default run it
# can fail on the machine's drift, not the model's.
@pytest.mark.slow
def test_a_replayed_cpu_trace_reproduces_its_measured_step_within_15_percent(mlp, this_cpu):
    spec = catalog.device(str(this_cpu))
    speed = statistics.median(spec.gemm_time_s(*PROBE, "fp32") / probe for _, probe in mlp)
    errors = [
        replay(str(path), profile=this_cpu, retime={"gemm": "model", "elementwise": "measured"}).metrics["replay_error"]
        for path, _ in mlp
    ]
    error = statistics.median(errors)
    print(f"replay errors {[f'{100 * e:+.1f}%' for e in errors]}, probe at {100 * speed:.0f}% of the profile's speed")
    if speed < BUSY_SPEED:
        pytest.skip(
            f"this core runs the probe GEMM at {100 * speed:.0f}% of the calibrated profile's speed (other load): "
            f"replay error {100 * error:+.1f}% is not the model's"
        )
    assert abs(error) <= 0.15


def test_the_shipped_example_trace_replays_within_its_own_steps():
    """The shipped scenario replays the shipped trace: as many steps as it recorded, GEMMs priced."""
    m = run(scenario_from_dict_file(ROOT / "scenarios" / "trace-replay-cpu-mlp.yaml"), limits=None).metrics
    assert len(m["step_s"]) == len(m["measured_step_s"]) == 3
    assert m["unpriced_ops"] == 0 and m["time_by_category_s"]["gemm"] > 0
    kept = ("other", "gap", "elementwise")  # kept as measured: replayed exactly
    assert all(m["time_by_category_s"][c] == pytest.approx(m["measured_time_by_category_s"][c]) for c in kept)


def scenario_from_dict_file(path: Path):
    from sim.scenario.model import load_scenario

    return load_scenario(str(path))


def test_a_two_rank_gloo_trace_replays_its_collectives_through_the_network(gloo, capsys):
    files = sorted(str(p) for p in gloo.glob("rank*.json"))
    result = replay(files, devices=2)
    m = result.metrics
    # 128-256-128 MLP: 4 parameter tensors, each all-reduced once per step on each rank, 2 steps
    assert m["ranks"] == 2 and m["collectives"] == 2 * 4 * 2
    assert len(m["step_s"]) == 2 and all(s > 0 for s in m["step_s"])
    spans = result.spans
    on_ranks = spans[(spans["category"] == "comm") & spans["track"].str.startswith("cpu:")]
    assert len(on_ranks) == m["collectives"]  # one per collective on its rank's gloo worker thread
    params_bytes = 4 * (128 * 256 + 256 + 256 * 128 + 128)
    # a 2-rank ring all-reduce sends half of each buffer each way twice: the parameters' bytes per rank and step
    assert result.links["bytes"].sum() > 0
    sent = result.cluster.network.bytes_delivered
    assert sent == pytest.approx(2 * 2 * params_bytes, rel=1e-9)
    data = measured_json(capsys, gloo)
    colls = [c for c in data["cases"] if c["category"] == "collective"]
    assert {c["name"] for c in colls} == {f"gloo:all_reduce {4 * n} B" for n in (128 * 256, 256, 128)}
    assert all(c["predicted_s"] > 0 and "2 ranks" in c["method"] for c in colls)


def test_nccl_tests_rows_are_cases_of_the_named_collective(capsys):
    data = measured_json(capsys, NCCL_SAMPLE, "--scenario", str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml"))
    rows = [line for line in NCCL_SAMPLE.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert len(data["cases"]) == len(rows) == 9
    assert all(c["name"].startswith("all_reduce ") and "16 ranks" in c["method"] for c in data["cases"])
    assert data["cases"][-1]["measured_s"] == pytest.approx(1697.72e-6)
    assert data["notes"][0].startswith("collective: all_reduce (all_reduce_perf named in the text); ranks: 16")
    sizes = [float(c["name"].split()[1]) for c in data["cases"]]
    predicted = [c["predicted_s"] for c in data["cases"]]
    assert predicted == sorted(predicted) and sizes == sorted(sizes)  # more bytes never take less time


def test_csv_rows_map_to_collectives_gemms_and_scenario_metrics(capsys, tmp_path):
    table = tmp_path / "mine.csv"
    table.write_text(
        "name, size, seconds\n"
        "nccl:all_reduce, 1 MiB, 0.0001\n"
        "gemm 4096x4096x4096 bf16, , 250 us\n"
        "time_s, , 0.05\n"
        "mystery_kernel, , 0.1\n"
    )
    data = measured_json(capsys, table, "--scenario", str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml"))
    cases = {c["name"]: c for c in data["cases"]}
    assert cases["nccl:all_reduce"]["category"] == "collective" and "16 ranks" in cases["nccl:all_reduce"]["method"]
    h100 = catalog.device("h100-sxm")
    gemm = h100.gemm_time_s(4096, 4096, 4096, "bf16") - h100.launch_overhead
    assert cases["gemm 4096x4096x4096 bf16"]["predicted_s"] == pytest.approx(gemm)
    assert cases["gemm 4096x4096x4096 bf16"]["measured_s"] == pytest.approx(250e-6)
    assert cases["time_s"]["category"] == "metric" and cases["time_s"]["predicted_s"] > 0
    assert [u["name"] for u in data["unmatched"]] == ["mystery_kernel"]


def test_an_unknown_format_is_a_one_line_error(capsys, tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("hello\n")
    assert dcsim("validate", "--measured", str(odd), "--json", "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--measured" in err[0] and "unknown format" in err[0]
