"""The validation harness (validation/, `dcsim validate`): records, calibration, prediction, report.

Without torch: records round-trip and fail with one-line errors; calibration recovers the parameters
of a device and a link from primitives the model itself generated; collectives predicted through the
simulator equal their closed forms; `--compare` on the stored full-mode records of the development
machine prints the contract JSON. With torch (skipped cleanly without it): the quick harness measures
this CPU and its errors stay inside measured bounds; ring attention across 2 processes equals the
single-process attention. CUDA cases skip without a GPU.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hardware_models.gpu import DeviceSpec, Efficiency
from sim.errors import ScenarioError
from validation import report
from validation.calibrate import calibrate, fit_device, fit_gather, fit_link, link_time_s, primitive_time_s
from validation.predict import Case, Predictor
from validation.records import Record, load_record_sets, load_records, save_records

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "validation" / "records"
NOMINAL = {
    "kind": "cpu",
    "cores": 1,
    "memory": 16e9,
    "memory_bandwidth": 40e9,
    "peak": {"fp32": 160e9, "bf16": 2.6e12},
    "fit_peak": ["bf16"],
    "source": "test nominal",
}
TRUE = {
    "gemm": 0.9,
    "gemm_half_dim": 12.0,
    "attention": 0.55,
    "attention_half_seq": 300.0,
    "memory": 0.45,
    "launch_overhead": 6e-6,
    "peak_bf16": 1.3e12,
}


def _rec(name, workload, params, seconds, family="primitive", **kw) -> Record:
    return Record(name=name, family=family, workload=workload, params=params, device="test-cpu", median_s=seconds, **kw)


def synthetic_primitives(values: dict = TRUE) -> list[Record]:
    """Primitive records whose times are the device model's own, for known parameter values."""
    from validation.calibrate import build_device

    spec = build_device("truth", NOMINAL, values)
    recs = []
    for dtype in ("fp32", "bf16"):
        for m, n, k in [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (16, 1024, 1024), (2048, 512, 1408)]:
            p = {"m": m, "n": n, "k": k, "dtype": dtype}
            recs.append(_rec(f"gemm/{dtype}/{m}x{n}x{k}", "gemm", p, primitive_time_s(spec, "gemm", p)))
    for seq in (128, 512, 2048, 4096):
        p = {"seq": seq, "heads": 8, "head_dim": 64, "dtype": "fp32", "causal": True}
        recs.append(_rec(f"sdpa/{seq}", "sdpa", p, primitive_time_s(spec, "sdpa", p)))
    for mib in (32, 256):
        p = {"bytes": mib * 2**20}
        recs.append(_rec(f"copy/{mib}", "copy", p, primitive_time_s(spec, "copy", p)))
    return recs


def link_primitives(latency_s=50e-6, bytes_per_s=1.5e9) -> list[Record]:
    return [
        _rec(f"{op}/{s}", op, {"bytes": s, "ranks": 2}, link_time_s(op, s, latency_s, bytes_per_s), processes=2)
        for op in ("send_recv", "all_reduce", "all_to_all")
        for s in (4096, 2**20, 2**24)
    ]


# ---- records ------------------------------------------------------------------------------------


def test_records_round_trip_json_and_yaml(tmp_path):
    recs = synthetic_primitives()[:3]
    for suffix in (".json", ".yaml"):
        path = save_records(recs, tmp_path / f"r{suffix}", meta={"nominal": {"test-cpu": NOMINAL}})
        loaded, meta = load_record_sets(path)
        assert loaded == recs
        assert meta["nominal"]["test-cpu"]["peak"]["fp32"] == 160e9


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r.pop("median_s"), "records.0.median_s: required key is missing"),
        (lambda r: r.update(median_s=-1.0), "records.0.median_s: -1.0: Input should be greater than 0"),
        (lambda r: r.update(colour="red"), "records.0.colour: unknown key"),
        (lambda r: r.update(family="guess"), "records.0.family: 'guess'"),
        (lambda r: r.update(workload="fft"), "records.0.workload: 'fft'"),
    ],
)
def test_bad_record_files_give_one_line_errors(tmp_path, mutate, expected):
    raw = synthetic_primitives()[0].model_dump(mode="json")
    mutate(raw)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"records": [raw]}))
    with pytest.raises(ScenarioError) as err:
        load_records(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)) and expected in text


def test_records_folder_rejects_duplicate_names(tmp_path):
    recs = synthetic_primitives()[:2]
    save_records(recs, tmp_path / "a.json")
    save_records(recs[:1], tmp_path / "b.yaml")
    with pytest.raises(ScenarioError, match="record name appears in two files"):
        load_records(tmp_path)


def test_published_figures_load_as_calibration_records():
    published = load_records(STORED / "published.yaml")
    assert {r.params["prompt_tokens"] for r in published} == {8192, 32768, 131072}
    assert all(r.family == "published" and r.used_for_calibration for r in published)


# ---- calibration --------------------------------------------------------------------------------


def test_device_fit_recovers_the_parameters_that_generated_the_primitives():
    fit = fit_device(synthetic_primitives(), NOMINAL, "fitted")
    eff = fit.spec.efficiency
    assert fit.rms_log_error < 1e-4
    for key in ("gemm", "attention", "memory"):
        assert getattr(eff, key) == pytest.approx(TRUE[key], rel=1e-3)
    assert eff.gemm_half_dim == pytest.approx(TRUE["gemm_half_dim"], rel=1e-2)
    assert eff.attention_half_seq == pytest.approx(TRUE["attention_half_seq"], rel=1e-2)
    assert fit.spec.launch_overhead == pytest.approx(TRUE["launch_overhead"], rel=1e-2)
    assert fit.spec.peak.bf16 == pytest.approx(TRUE["peak_bf16"], rel=1e-3)
    assert fit.spec.peak.fp32 == NOMINAL["peak"]["fp32"]  # nominal peaks stay nominal


def test_device_fit_ignores_compositions_and_held_out_primitives():
    base = synthetic_primitives()
    noise = [
        _rec("transformer_prefill/x", "transformer_prefill", {}, 99.0, family="composition"),
        _rec("embedding_bag/x", "embedding_bag", {}, 99.0),
    ]
    assert fit_device(base + noise, NOMINAL, "a").spec == fit_device(base, NOMINAL, "a").spec


def test_row_gathers_move_at_the_gather_efficiency_and_default_to_streaming():
    spec = DeviceSpec(
        name="d",
        memory=1e9,
        memory_bandwidth=100e9,
        peak={"fp32": 1e12},
        launch_overhead=1e-6,
        efficiency=Efficiency(memory=0.8),
    )
    assert spec.memory_time_s(0, gather_bytes=8e9) == spec.memory_time_s(8e9)  # unset: as streaming
    slow = spec.model_copy(update={"efficiency": Efficiency(memory=0.8, gather=0.2)})
    assert slow.memory_time_s(4e9, gather_bytes=8e9) == pytest.approx(4e9 / 80e9 + 8e9 / 20e9 + 1e-6)


def test_gather_fit_recovers_the_efficiency_that_generated_the_embedding_bag_records():
    fit = fit_device(synthetic_primitives(), NOMINAL, "fitted")
    truth = fit.spec.model_copy(update={"efficiency": fit.spec.efficiency.model_copy(update={"gather": 0.17})})
    recs = []
    for rows, pooling in [(10**5, 8), (10**6, 32), (4 * 10**6, 16)]:
        p = {"rows": rows, "dim": 64, "pooling": pooling, "batch": 512, "zipf_alpha": 0.0, "dtype": "fp32"}
        recs.append(
            _rec(f"embedding_bag/{rows}/{pooling}", "embedding_bag", p, primitive_time_s(truth, "embedding_bag", p))
        )
    spec, used = fit_gather(fit.spec, synthetic_primitives() + recs)
    assert spec.efficiency.gather == pytest.approx(0.17, rel=1e-9)
    assert len(used) == 3 and spec.efficiency.memory == fit.spec.efficiency.memory


def test_gpu_samples_are_the_mean_of_back_to_back_calls():
    from validation.timing import measure

    calls = []
    t = measure(lambda: calls.append(1), repeats=4, warmup=1, inner=10)
    assert len(calls) == 1 + 4 * 10 and t.repeats == 4 and t.median_s < 1e-3


def test_link_fit_recovers_latency_and_bandwidth_from_send_recv_and_all_reduce():
    link = fit_link(link_primitives(50e-6, 1.5e9), "link")
    assert link.latency == pytest.approx(50e-6, rel=1e-3)
    assert link.bandwidth == pytest.approx(1.5e9, rel=1e-3)
    assert link.efficiency == 1.0


def test_profiles_are_catalog_yaml_a_scenario_names_by_path(tmp_path):
    from sim.runner import run
    from sim.scenario.model import load_scenario

    cal = calibrate(synthetic_primitives() + link_primitives(), NOMINAL, "test-cpu-1t", tmp_path / "profiles")
    assert DeviceSpec.model_validate(yaml.safe_load(cal.device_path.read_text())) == cal.device
    scenario = {
        "name": "gemm-on-profile",
        "hardware": {
            "gpu": "profiles/test-cpu-1t.yaml",
            "gpus_per_node": 1,
            "nodes": 2,
            "nic": "profiles/test-cpu-1t-link.yaml",
        },
        "workload": {
            "kind": "collective",
            "op": "send_recv",
            "bytes": 2**20,
            "algorithm": "direct",
            "protocol": "none",
        },
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    loaded = load_scenario(tmp_path / "s.yaml")
    assert loaded.hardware.gpu.efficiency == cal.device.efficiency
    # one full-duplex hop of the calibrated link plus the catalog switch hop
    expected = 50e-6 + 2**20 / 1.5e9 + loaded.hardware.topology.switch_latency
    assert run(loaded).metrics["time_s"] == pytest.approx(expected, rel=1e-6)


def test_lockstep_primitives_calibrate_the_profile_context_parallel_ranks_run_on(tmp_path):
    """Primitives timed on 2 ranks at once fit a second profile ('-x2'); CP predictions use it."""
    slower = {**TRUE, "attention": 0.4, "memory": 0.3}
    together = [r.model_copy(update={"name": "x2/" + r.name, "processes": 2}) for r in synthetic_primitives(slower)]
    cal = calibrate(synthetic_primitives() + together + link_primitives(), NOMINAL, "t-1t", tmp_path)
    assert cal.device.efficiency.attention == pytest.approx(TRUE["attention"], rel=1e-3)  # alone: unchanged
    assert cal.lockstep.efficiency.attention == pytest.approx(0.4, rel=1e-3)
    assert cal.lockstep.efficiency.memory == pytest.approx(0.3, rel=1e-3)
    assert cal.lockstep_path.name == "t-1t-x2.yaml"
    params = {"layers": 1, "hidden": 256, "ffn": 704, "heads": 4, "seq": 1024, "dtype": "fp32"}
    alone = _rec("transformer_prefill/x", "transformer_prefill", params, 1.0, family="composition")
    ring = _rec(
        "ring_attention/pass-kv/x",
        "ring_attention",
        {**params, "cp": 2, "ring": "pass-kv"},
        1.0,
        family="composition",
        processes=2,
    )
    cases = {c.name: c for c in Predictor(cal).predict([alone, ring])}
    assert "x2 profile" in cases[ring.name].method and "x2" not in cases[alone.name].method
    without = Predictor(calibrate(synthetic_primitives() + link_primitives(), NOMINAL, "t-1t"))
    assert cases[ring.name].predicted_s > without.predict([ring])[0].predicted_s  # slower device


# ---- prediction and report ----------------------------------------------------------------------


def test_collectives_predicted_by_the_simulator_equal_the_two_rank_closed_forms():
    recs = synthetic_primitives() + link_primitives(50e-6, 1.5e9)
    cases = Predictor(calibrate(recs, NOMINAL, "t")).predict(recs)
    by_name = {c.name: c for c in cases}
    for r in link_primitives():
        assert by_name[r.name].predicted_s == pytest.approx(r.median_s, rel=1e-6), r.name
        assert by_name[r.name].method.startswith("sim collective")


def test_report_figures_and_contract_json(tmp_path):
    cases = [
        Case("a", "primitive", "gemm", 1.0, 1.1, "m"),
        Case("b", "composition", "dataloader", 2.0, 1.0, "m"),
        Case("c", "composition", "embedding_step", 1.0, 1.2, "m"),
        Case("p", "published", "cp_ttft", 5.0, 50.0, "m", excluded=True),
        Case("n", "composition", "dataloader", 1.0, None, "none"),
    ]
    out = report.summary_json(cases)
    assert set(out) == {"cases", "median_rel_error", "max_rel_error", "mape"}
    assert [c["name"] for c in out["cases"]] == ["a", "b", "c"]  # calibration figure and n/a left out
    assert set(out["cases"][0]) == {"name", "family", "predicted_s", "measured_s", "rel_error"}
    assert out["median_rel_error"] == pytest.approx(0.2)
    assert out["max_rel_error"] == pytest.approx(0.5)
    assert out["mape"] == pytest.approx((0.1 + 0.5 + 0.2) / 3)
    assert report.by_family(cases)["composition"]["median_rel_error"] == pytest.approx(0.35)
    report.scatter_plot(cases, tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def _stored_full_records() -> Path:
    files = sorted(p for p in STORED.glob("*.json"))
    if not files:
        pytest.skip("no stored full-mode record set under validation/records/")
    return files[0]


def test_compare_stored_full_records_prints_the_contract_json(tmp_path):
    """`dcsim validate --compare` needs no torch: calibrate, predict and compare stored records."""
    path = _stored_full_records()
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", "validate", "--compare", str(path), "--json", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"cases", "median_rel_error", "max_rel_error", "mape"}
    families = {c["family"] for c in out["cases"]}
    assert families == {"primitive", "composition"}
    assert all(math.isfinite(c["predicted_s"]) and c["measured_s"] > 0 for c in out["cases"])
    assert (tmp_path / "scatter.png").is_file() and (tmp_path / "profiles").is_dir()


def test_stored_h100_records_compare_within_the_errors_measured_there(tmp_path):
    """The full harness ran on an H100 (validation/records/nvidia-h100-80gb-hbm3-full.json, torch
    2.11 + CUDA 13, 2026-11-27). Recalibrated here from its primitives, the simulator predicts the
    bf16 Llama-width transformer prefills within 9 % (-1, -9, -6 and, for the launch-bound 1024-wide
    one, +7.5 %), the DataLoader within 7 % and the embedding step at -30 / -31 %: the reference's
    unfused update (`embedding_backward: unfused`) and eager torch's memory-bound passes around the
    dense GEMMs (`DenseConfig.pointwise_passes`) are modelled; what is left is torch's per-op
    overhead beyond one kernel launch (autograd, the interaction's small ops). Bounds: those
    figures with a few points of margin."""
    from validation.harness import validate

    path = STORED / "nvidia-h100-80gb-hbm3-full.json"
    result = validate(compare=path, out_dir=tmp_path, log=lambda msg: None)
    cases = {c.name: c for c in result.cases if c.family == "composition"}
    prefill = [c for n, c in cases.items() if n.startswith("transformer_prefill")]
    assert len(prefill) == 4 and all(abs(c.rel_error) < 0.12 for c in prefill)
    assert all(abs(c.rel_error) < 0.10 for n, c in cases.items() if n.startswith("dataloader"))
    assert all(abs(c.rel_error) < 0.35 for n, c in cases.items() if n.startswith("embedding_step"))
    prim = report.by_family(result.cases)["primitive"]
    assert prim["median_rel_error"] < 0.07, prim


def test_stored_cpu_records_compare_within_the_errors_measured_there(tmp_path):
    """The full harness on an earlier development VM's CPU (1 thread per process, quiet: wall/CPU
    1.00; validation/records/intel-xeon-processor-1t-full.json). fp32 transformer prefill: -13 to
    -24 % (eager torch runs RMSNorm and SwiGLU as separate element-wise passes, about twice the
    traffic of the fused kernels dcsim charges; repeated runs of the same prefill vary by 7 %); ring
    attention on 2 processes, predicted on the lock-step ('-x2') profile: -20 to -36 % (gloo's
    transfers take the cores the ranks compute on); DataLoader -9 / -15 %; embedding step -28 / -36 %
    (the unfused update and the dense passes modelled; a 480 MB last-level cache that no gather
    efficiency represents, and torch's per-op overhead, are not)."""
    from validation.harness import validate

    result = validate(compare=STORED / "intel-xeon-processor-1t-full.json", out_dir=tmp_path, log=lambda msg: None)
    cases = [c for c in result.cases if c.family == "composition"]
    by_kind = {}
    for c in cases:
        by_kind.setdefault(c.workload, []).append(c.rel_error)
    assert len(cases) == 13
    assert all(abs(e) < 0.30 for e in by_kind["transformer_prefill"])
    assert all(abs(e) < 0.42 for e in by_kind["ring_attention"])
    assert all(abs(e) < 0.20 for e in by_kind["dataloader"])
    assert all(abs(e) < 0.40 for e in by_kind["embedding_step"])
    assert report.by_family(result.cases)["composition"]["median_rel_error"] < 0.25


def test_compare_with_a_broken_records_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"records": [{"name": "x"}]}')
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", "validate", "--compare", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "records.0.family: required key is missing" in proc.stderr


# ---- real measurements (torch) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_cpu(tmp_path_factory):
    pytest.importorskip("torch")
    from validation.harness import validate

    return validate("cpu", quick=True, out_dir=tmp_path_factory.mktemp("quick"), log=lambda msg: None)


def _family(result, family):
    return report.by_family(result.cases)[family]


def test_quick_harness_measures_every_workload_once(quick_cpu):
    workloads = {r.workload for r in quick_cpu.records}
    assert workloads >= {
        "gemm",
        "sdpa",
        "copy",
        "embedding_bag",
        "send_recv",
        "all_reduce",
        "all_to_all",
        "transformer_prefill",
        "ring_attention",
        "dataloader",
        "embedding_step",
    }
    measured = [r for r in quick_cpu.records if r.family != "published"]
    assert all(r.threads == 1 and r.processes <= 2 and r.torch_version for r in measured)
    assert all(c.predicted_s is not None for c in quick_cpu.cases if c.family != "published")


def test_ring_attention_across_two_processes_equals_single_process_attention(quick_cpu):
    rings = [r for r in quick_cpu.records if r.workload == "ring_attention"]
    assert {r.params["ring"] for r in rings} == {"pass-kv", "pass-q"}
    for r in rings:
        assert r.checks["exact"], r.checks
        assert r.checks["max_abs_error_vs_single_process"] < 1e-4


@pytest.mark.slow  # a timing figure: measured by benchmarks/validation_quick.py, checked here only with -m slow
def test_quick_harness_meets_issue_23_targets_on_this_cpu(quick_cpu):
    # Issue 23's targets for the quick harness on a 2-core machine, quiet or beside a CPU-bound
    # process (timings are on-core times, validation/timing.py): compositions median <= 15 % and
    # worst <= 35 %, primitives median <= 10 %. Medians over runs are quoted in the issue's note
    # (`python benchmarks/validation_quick.py [--background 1]`); one run here may miss by noise.
    comp, prim = _family(quick_cpu, "composition"), _family(quick_cpu, "primitive")
    assert comp["median_rel_error"] <= 0.15, comp
    assert comp["max_rel_error"] <= 0.35, comp
    assert prim["median_rel_error"] <= 0.10, prim


def test_cuda_quick_harness_when_a_gpu_exists(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from validation.harness import validate

    result = validate("cuda", quick=True, out_dir=tmp_path, log=lambda msg: None)
    assert _family(result, "primitive")["median_rel_error"] < 0.5


def test_cuda_request_without_a_gpu_is_a_one_line_error(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists")
    with pytest.raises(ScenarioError, match="CUDA is not available"):
        from validation.harness import validate

        validate("cuda", quick=True, out_dir=tmp_path, log=lambda msg: None)
