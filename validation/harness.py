"""`dcsim validate`: measure, calibrate on primitives, predict compositions, compare.

    dcsim validate [--device cpu|cuda] [--quick] [--json] [--out DIR] [--compare RECORDS]
    dcsim validate --measured FILE [--scenario S.yaml] [--json] [--out DIR]   (validation/measured/)

1. Measure (skipped with --compare): single-process primitives (primitives.py), the 2-process session
   (distributed.py: send/recv, all-reduce, all-to-all, ring attention pass-KV/pass-Q), the
   single-process compositions (compositions.py), then the primitives again, pooled with the first
   pass (calibration and compositions see the same machine). 1 torch thread per process, at most 2
   processes, so the 2 cores of a CI machine each run one. Every statistic is robust to other load
   (validation/timing.py: preempted samples set aside, repeats widened, said in the log). Records go
   to OUT/records.json with the device's nominal figures in meta.
2. Calibrate on the primitives only (calibrate.py); profiles go to OUT/profiles/.
3. Predict every record through the simulator (predict.py); scenarios go to OUT/scenarios/.
4. Report: a table and per-family error figures (stderr with --json), OUT/report.json (contract
   object + per family), OUT/cases.csv, OUT/scatter.png. With --json, stdout holds exactly the
   contract object.

Published figures (validation/records/published.yaml) are always loaded as records; those marked
used_for_calibration are shown but not counted.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sim.errors import ScenarioError
from validation import report
from validation.calibrate import Calibration, calibrate, nominal_cpu, nominal_gpu, profile_name
from validation.predict import Case, Predictor
from validation.records import Record, load_record_sets, load_records, machine_meta, save_records

PUBLISHED = Path(__file__).parent / "records" / "published.yaml"
COMM_SIZES = {True: [4096, 2**20, 2**24], False: [4096, 65536, 2**20, 2**22, 2**24, 2**26]}


@dataclass
class Validation:
    records: list[Record]
    calibration: Calibration
    cases: list[Case]
    out_dir: Path
    meta: dict

    def __post_init__(self) -> None:
        self.meta = dict(self.meta)

    def summary(self) -> dict:
        return report.summary_json(self.cases)

    @property
    def contention(self) -> float:
        return contention(self.records)

    @property
    def busy(self) -> bool:
        """Other load slowed the measurements: the largest fp32 GEMM reached less than 75 % of the
        nominal fp32 peak (a quiet core of the development VM reaches ~96 %), or single-thread
        wall / CPU time is above 1.15. (On this VM a neighbour's load shows up in neither the load
        average nor the CPU time, but it does slow a compute-bound GEMM.)"""
        if self.records and self.records[0].device_kind == "cuda":
            return self.contention > 1.15  # a GPU's fp32 GEMM fraction says nothing about CPU load
        return self.gemm_peak_fraction < 0.75 or self.contention > 1.15

    @property
    def gemm_peak_fraction(self) -> float:
        gemms = [
            r for r in self.records if r.workload == "gemm" and r.params.get("dtype") == "fp32" and r.processes == 1
        ]
        nominal = (self.meta.get("nominal") or {}).get(gemms[0].device) if gemms else None
        if not gemms or not nominal:
            return 1.0
        big = max(gemms, key=lambda r: r.params["m"] * r.params["n"] * r.params["k"])
        p = big.params
        return 2.0 * p["m"] * p["n"] * p["k"] / big.median_s / nominal["peak"]["fp32"]

    @property
    def load_before(self) -> float:
        return float(self.meta.get("load_avg_1m", [0.0])[0])


def _log(msg: str) -> None:
    print(f"[validate] {msg}", file=sys.stderr, flush=True)


def measure(device: str = "cpu", quick: bool = False, log=_log) -> tuple[list[Record], dict]:
    """Run every measurement on this machine; returns (records, meta)."""
    try:
        import torch
    except ImportError:
        raise ScenarioError(
            "torch is not installed: pip install 'dcsim[validate]' (or compare stored records with --compare RECORDS)",
            path="--device",
            value=device,
        ) from None
    if device == "cuda" and not torch.cuda.is_available():
        raise ScenarioError("CUDA is not available on this machine; use --device cpu", path="--device", value=device)
    from validation import compositions, distributed, primitives
    from validation.compositions import transformer_configs
    from validation.timing import Context

    ctx = Context.create(device, threads=1, quick=quick)
    load_before = os.getloadavg()[0]
    if load_before > 1.0:
        log(f"warning: load average {load_before:.1f} before measuring: other processes share the cores")
    steps = [("primitives (gemm, sdpa, copy, embedding_bag)", lambda: primitives.measure_all(ctx))]
    if device == "cpu" or torch.cuda.device_count() >= 2:
        steps.append(
            (
                "2 processes (send/recv, all-reduce, all-to-all, ring attention)",
                lambda: distributed.run_two_process(
                    ctx, COMM_SIZES[quick], transformer_configs(quick, device == "cuda")
                ),
            )
        )
    else:
        log("fewer than 2 GPUs: skipping the NCCL primitives and ring attention")
    steps.append(("compositions (transformer, DataLoader, embedding step)", lambda: compositions.measure_all(ctx)))
    # the primitives again, pooled with the first pass: calibration sees the machine the
    # compositions saw, before and after them (a load that came or went shows in both)
    steps.append(("primitives again (pooled with the first pass)", lambda: primitives.measure_all(ctx)))
    by_name: dict[str, Record] = {}
    for what, fn in steps:
        start = time.perf_counter()
        for r in fn():
            by_name[r.name] = r  # a second pass's record holds both passes' samples
        log(f"measured {what} in {time.perf_counter() - start:.1f} s")
    records = list(by_name.values())
    preempted = [r for r in records if r.checks.get("widened")]
    if preempted:
        log(
            f"load: {len(preempted)} measurements lost their core to other processes and were re-measured "
            "(preempted samples set aside; see checks.preempted_samples in records.json)"
        )
    cont = contention(records)
    if cont > 1.15:
        log(
            f"warning: other processes took {100 * (1 - 1 / cont):.0f}% of the measured core time (wall/CPU "
            f"{cont:.2f}); measured times are inflated - rerun on a quiet machine"
        )
    name = ctx.device_name
    nominal = nominal_cpu(ctx.threads) if device == "cpu" else nominal_gpu(name)
    meta = {
        **machine_meta("quick" if quick else "full", ctx.torch_version),
        "nominal": {name: nominal},
        "load_avg_1m": [load_before, os.getloadavg()[0]],
        "contention": cont,
    }
    return records, meta


def contention(records: list[Record]) -> float:
    """Median wall / CPU time of the single-process, single-thread records (1.0 on a quiet machine)."""
    ratios = [
        r.median_s / r.checks["cpu_median_s"]
        for r in records
        if r.processes == 1 and r.threads == 1 and r.checks.get("cpu_median_s")
    ]
    return float(statistics.median(ratios)) if ratios else 1.0


def _nominal_for(records: list[Record], meta: dict) -> tuple[str, dict, int, str]:
    measured = [r for r in records if r.family != "published"]
    devices = sorted({r.device for r in measured})
    if len(devices) != 1:
        raise ScenarioError(
            "records must come from exactly one device (published figures aside)", path="records.device", value=devices
        )
    name = devices[0]
    kind, threads = measured[0].device_kind, measured[0].threads
    nominal = (meta.get("nominal") or {}).get(name)
    if nominal is None:
        nominal = nominal_gpu(name) if kind == "cuda" else None
    if nominal is None:
        raise ScenarioError(
            "no nominal figures for this CPU in the records' meta.nominal", path="meta.nominal", value=name
        )
    _check_nominal(name, nominal, measured)
    return name, nominal, threads, kind


def _check_nominal(name: str, nominal, measured: list[Record]) -> None:
    """The nominal figures calibration starts from (records' meta, from another machine) must make a
    device with a peak for every dtype the compute records ran."""
    from validation.calibrate import PARAMS, START, build_device

    try:
        build_device(name, nominal, dict(zip(PARAMS, START)))
        peaks = {d for d, v in nominal["peak"].items() if v is not None}
        fit = set(nominal.get("fit_peak") or [])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ScenarioError(
            f"nominal figures are incomplete or invalid ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
            path=f"meta.nominal.{name}",
        ) from None
    used = {r.params["dtype"] for r in measured if r.workload in ("gemm", "sdpa")}
    missing = sorted((used | fit) - peaks)
    if missing:
        raise ScenarioError(
            f"no nominal peak for {', '.join(missing)} (records ran these dtypes)",
            path=f"meta.nominal.{name}.peak",
            value=sorted(peaks),
        )


def validate(
    device: str = "cpu",
    quick: bool = False,
    out_dir: str | Path = "dcsim-validate",
    compare: str | Path | None = None,
    log=_log,
) -> Validation:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if compare is not None:
        records, meta = load_record_sets(compare)
        log(f"loaded {len(records)} records from {compare}")
    else:
        records, meta = measure(device, quick, log)
        save_records(records, out / "records.json", meta)
        log(f"records written to {out / 'records.json'}")
    names = {r.name for r in records}
    records = records + [r for r in load_records(PUBLISHED) if r.name not in names]
    try:
        name, nominal, threads, kind = _nominal_for(records, meta)
    except ScenarioError as err:
        raise err.with_file(str(compare)) if compare is not None else err from None
    start = time.perf_counter()
    cal = calibrate(records, nominal, profile_name(name, threads, kind), out / "profiles")
    log(
        f"calibrated {cal.device.name} (rms log error {cal.device_rms_log_error:.3f}) in "
        f"{time.perf_counter() - start:.1f} s -> {cal.device_path}"
    )
    start = time.perf_counter()
    cases = Predictor(cal, out / "scenarios").predict(records)
    log(f"predicted {len(cases)} cases in {time.perf_counter() - start:.1f} s")
    result = Validation(records, cal, cases, out, meta)
    summary = result.summary()
    from sim.report.output import atomic_path, write_json  # atomic: temp file + rename

    write_json(
        out / "report.json",
        {**summary, "by_family": report.by_family(cases), "methods": {c.name: c.method for c in cases}},
    )
    import pandas as pd

    with atomic_path(out / "cases.csv") as tmp:
        pd.DataFrame([{**c.__dict__, "rel_error": c.rel_error} for c in cases]).to_csv(tmp, index=False)
    report.scatter_plot(cases, out / "scatter.png", f"dcsim validate on {name} ({'quick' if quick else 'full'})")
    return result


def main(args) -> int:
    """Entry point of `dcsim validate` (sim/cli.py imports this lazily)."""
    if getattr(args, "measured", None):  # a run the user measured: validation/measured/
        from validation.measured.report import main as measured_main

        return measured_main(args)
    if getattr(args, "scenario", None):
        raise ScenarioError("--scenario goes with --measured FILE", path="--scenario", value=args.scenario)
    out = args.out or "dcsim-validate"
    result = validate(args.device, args.quick, out, args.compare)
    if args.json:
        print(json.dumps(result.summary()))
    else:
        from rich.console import Console

        console = Console()
        if not console.is_terminal:
            console = Console(width=170)
        report.print_report(result.cases, f"dcsim validate ({result.calibration.device.name})", console)
        if result.busy:
            print(
                f"warning: measured on a busy machine (largest fp32 GEMM at {100 * result.gemm_peak_fraction:.0f}% "
                f"of nominal peak, load average {result.load_before:.1f}); the errors include that"
            )
        print(f"report, records, profiles, scenarios and scatter.png in {out}/")
    return 0
