"""Calibration: fit the hardware model to measured primitives (and only to primitives).

Device model (hardware_models/gpu.py): a roofline with shape-dependent efficiencies. From the
`gemm`, `sdpa` and `copy` records we fit, by least squares on log time (scipy.optimize.least_squares,
robust soft-L1 loss so one disturbed measurement does not drag the fit):

- `efficiency.gemm`, `efficiency.gemm_half_dim` (GEMM fraction of peak and its shape fall-off),
- `efficiency.attention`, `efficiency.attention_half_seq` (fused attention),
- `efficiency.memory` (streaming fraction of the nominal memory bandwidth),
- `launch_overhead` (per-op dispatch),
- and `peak.<dtype>` for the dtypes the nominal figures mark `fit_peak` (on a CPU: bf16, whose
  AMX/AVX512-BF16 throughput through oneDNN is far from the nominal instruction peak).

Then, with the device fixed, `efficiency.gather` (random row gathers) from the `embedding_bag`
records: the geometric median of the fraction of memory bandwidth each record's rows reached
(`embedding_bag_bytes` says which bytes are rows and which stream). Caches are not modelled: hot
rows of a skewed (Zipf) or small table are served from cache, so those records scatter around it.

The fit starts from *nominal* figures of the device (`nominal_cpu()` from /proc/cpuinfo, or the
catalog entry of a GPU), stored in the records' meta so a record set can be recalibrated elsewhere.

Two ranks at once: the 2-process session times the compute primitives on both ranks in lock-step;
fitted the same way they give a second profile, `<device>-x2`, for compositions whose ranks compute
at once (context parallelism): on a CPU the cores share caches and memory bandwidth.

Link model (hardware_models/nic.py): latency `a` and bandwidth `B` from the 2-process `send_recv`
(a + S/B: both ranks send S at once over a full-duplex link) and `all_reduce` records (2-rank ring:
2 steps of S/2, so 2a + S/B - the schedule sim/network/collectives.py runs). `all_to_all` is held out.

`write_profile` stores the fitted device and link as catalog-format YAML files that a scenario names
by path (`hardware: {gpu: validation/profiles/<device>.yaml, nic: .../<device>-link.yaml}`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

from hardware_models import catalog
from hardware_models.gpu import DeviceSpec, Efficiency
from hardware_models.nic import LinkSpec
from sim.errors import ScenarioError

DEVICE_FIT_WORKLOADS = ("gemm", "sdpa", "copy")
GATHER_FIT_WORKLOADS = ("embedding_bag",)
LINK_FIT_WORKLOADS = ("send_recv", "all_reduce")
ASSUMED_CPU_MEMORY_BANDWIDTH = 38.4e9  # assumption: one DDR5-4800 channel (8 B x 4.8 GT/s) per core's share


def nominal_cpu(threads: int) -> dict:
    """Nominal figures of this CPU from /proc/cpuinfo (clock x FLOP/cycle of its vector units)."""
    mhz, flags = 2000.0, set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                mhz = float(line.split(":")[1])
            elif line.startswith("flags"):
                flags = set(line.split(":")[1].split())
    except OSError:
        pass
    fp32_per_cycle = 64 if "avx512f" in flags else (32 if "fma" in flags else 8)  # 2 FMA ports x lanes x 2
    bf16_per_cycle = 1024 if "amx_bf16" in flags else (2 * fp32_per_cycle if "avx512_bf16" in flags else fp32_per_cycle)
    hz = mhz * 1e6 * threads
    mem_total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 8 << 30
    return {
        "kind": "cpu",
        "cores": threads,
        "memory": float(mem_total),
        "memory_bandwidth": ASSUMED_CPU_MEMORY_BANDWIDTH * threads,
        "peak": {"fp32": hz * fp32_per_cycle, "bf16": hz * bf16_per_cycle},
        "fit_peak": ["bf16"],
        "source": (
            f"nominal: {mhz:.0f} MHz x {threads} core(s) x {fp32_per_cycle} fp32 FLOP/cycle "
            f"({'AVX-512' if fp32_per_cycle == 64 else 'AVX2'} FMA) and {bf16_per_cycle} bf16 FLOP/cycle"
            f"{' (AMX)' if bf16_per_cycle == 1024 else ''} from /proc/cpuinfo; memory bandwidth "
            f"assumption {ASSUMED_CPU_MEMORY_BANDWIDTH / 1e9:.1f} GB/s per core (one DDR5-4800 channel)"
        ),
    }


GPU_CATALOG_MATCH = {"h100": "h100-sxm", "h200": "h200-sxm", "a100": "a100-sxm-80gb", "b200": "b200"}


def nominal_gpu(device_name: str) -> dict:
    key = next((v for k, v in GPU_CATALOG_MATCH.items() if k in device_name.lower()), None)
    if key is None:
        raise ScenarioError(
            f"no catalog GPU matches; known: {', '.join(GPU_CATALOG_MATCH)}", path="device", value=device_name
        )
    spec = catalog.device(key)
    return {
        "kind": "gpu",
        "cores": 1,
        "memory": spec.memory,
        "memory_bandwidth": spec.memory_bandwidth,
        "peak": {k: v for k, v in spec.peak.model_dump().items() if v},
        "fit_peak": [],
        "source": f"nominal: catalog {key} ({spec.source})",
    }


# ---- primitive cost functions (the model being fitted) ---------------------------------------


def primitive_time_s(spec: DeviceSpec, workload: str, p: dict) -> float:
    """The device model's time for one compute primitive record's parameters."""
    if workload == "gemm":
        return spec.gemm_time_s(p["m"], p["n"], p["k"], p["dtype"])
    if workload == "sdpa":
        return spec.attention_time_s(
            p["seq"], p["seq"], p["heads"], p["head_dim"], dtype=p["dtype"], causal=p.get("causal", True)
        )
    if workload == "copy":
        return spec.memory_time_s(2.0 * p["bytes"])  # read + write
    if workload == "embedding_bag":
        rows, streamed = embedding_bag_bytes(p)
        return spec.memory_time_s(streamed, gather_bytes=rows)
    raise ValueError(f"{workload} is not a device primitive")


def embedding_bag_bytes(p: dict) -> tuple[float, float]:
    """(bytes of the rows gathered, bytes streamed: int64 indices read + pooled outputs written),
    as embedding_training counts them on the device."""
    e = 4 if p.get("dtype", "fp32") == "fp32" else 2
    lookups = p["batch"] * p["pooling"]
    return lookups * p["dim"] * e, lookups * 8 + p["batch"] * p["dim"] * e


def fit_gather(spec: DeviceSpec, records: list) -> tuple[DeviceSpec, list[str]]:
    """`efficiency.gather`: geometric median over the embedding_bag records of the fraction of
    memory bandwidth their rows reached (time left after the streamed bytes and the launch; records
    where that is less than half the time are launch-bound and skipped)."""
    recs = [r for r in records if r.family == "primitive" and r.workload in GATHER_FIT_WORKLOADS and r.processes == 1]
    fractions = []
    for r in recs:
        rows, streamed = embedding_bag_bytes(r.params)
        left = r.median_s - spec.memory_time_s(streamed)  # streamed bytes + the launch
        if left > 0.5 * r.median_s:  # else launch-bound: says little about the rows
            fractions.append(rows / (spec.memory_bandwidth * left))
    if not fractions:
        return spec, []
    gather = float(np.clip(np.exp(np.median(np.log(fractions))), 1e-3, 1.0))
    eff = spec.efficiency.model_copy(update={"gather": gather})
    note = f"; gather fitted from {len(fractions)} embedding_bag records"
    return spec.model_copy(update={"efficiency": eff, "source": spec.source + note}), [r.name for r in recs]


PARAMS = ("gemm", "gemm_half_dim", "attention", "attention_half_seq", "memory", "launch_overhead")
LOWER = (1e-3, 1e-2, 1e-3, 1e-2, 1e-3, 1e-8)
UPPER = (1.0, 8192.0, 1.0, 65536.0, 1.0, 1e-3)
START = (0.5, 32.0, 0.3, 256.0, 0.5, 5e-6)


@dataclass
class DeviceFit:
    spec: DeviceSpec
    rms_log_error: float
    used: list[str] = field(default_factory=list)


def build_device(name: str, nominal: dict, values: dict, source: str = "") -> DeviceSpec:
    peak = dict(nominal["peak"])
    peak.update({d: values[f"peak_{d}"] for d in nominal.get("fit_peak", []) if f"peak_{d}" in values})
    eff = Efficiency(**{k: values[k] for k in PARAMS if k != "launch_overhead"}, source=source or "calibrated")
    return DeviceSpec(
        name=name,
        kind=nominal["kind"],
        cores=nominal.get("cores", 1),
        memory=nominal["memory"],
        memory_bandwidth=nominal["memory_bandwidth"],
        peak=peak,
        launch_overhead=values["launch_overhead"],
        efficiency=eff,
        source=source,
    )


def fit_device(records: list, nominal: dict, name: str) -> DeviceFit:
    """Least-squares fit of the efficiencies (and fit_peak dtypes) to gemm/sdpa/copy records."""
    recs = [r for r in records if r.family == "primitive" and r.workload in DEVICE_FIT_WORKLOADS and r.processes == 1]
    if len(recs) < 4:
        raise ScenarioError("calibration needs at least 4 gemm/sdpa/copy primitive records", value=len(recs))
    dtypes = sorted({r.params["dtype"] for r in recs if r.workload == "gemm"} & set(nominal.get("fit_peak", [])))
    names = list(PARAMS) + [f"peak_{d}" for d in dtypes]
    lower = np.log(list(LOWER) + [nominal["peak"][d] / 100 for d in dtypes])
    upper = np.log(list(UPPER) + [nominal["peak"][d] * 100 for d in dtypes])
    start = np.log(list(START) + [nominal["peak"][d] / 2 for d in dtypes])
    measured = np.log([r.median_s for r in recs])

    def values(x) -> dict:
        return dict(zip(names, np.exp(x)))

    def residuals(x):
        spec = build_device(name, nominal, values(x))
        return np.log([primitive_time_s(spec, r.workload, r.params) for r in recs]) - measured

    sol = least_squares(
        residuals, np.clip(start, lower + 1e-9, upper - 1e-9), bounds=(lower, upper), loss="soft_l1", f_scale=0.1
    )
    fitted = values(sol.x)
    rms = float(np.sqrt(np.mean(residuals(sol.x) ** 2)))
    source = (
        f"calibrated by `dcsim validate` on {date.today().isoformat()} from {len(recs)} primitives "
        f"({', '.join(sorted({r.workload for r in recs}))}) on '{recs[0].device}' with torch "
        f"{recs[0].torch_version}, {recs[0].threads} thread(s); rms log error {rms:.3f}; "
        f"fitted: {', '.join(names)}; {nominal.get('source', '')}"
    )
    return DeviceFit(build_device(name, nominal, fitted, source), rms, [r.name for r in recs])


# ---- link -----------------------------------------------------------------------------------


def link_time_s(workload: str, nbytes: float, latency_s: float, bytes_per_s: float) -> float:
    """2-rank schedules of sim/network/collectives.py on one full-duplex link (uncontended)."""
    steps = {"send_recv": 1, "all_reduce": 2, "all_to_all": 1}[workload]
    per_step_bytes = {"send_recv": nbytes, "all_reduce": nbytes / 2, "all_to_all": nbytes / 2}[workload]
    return steps * (latency_s + per_step_bytes / bytes_per_s)


def fit_link(records: list, name: str, transport: str = "tcp") -> LinkSpec | None:
    recs = [r for r in records if r.family == "primitive" and r.workload in LINK_FIT_WORKLOADS]
    if len(recs) < 2:
        return None
    measured = np.log([r.median_s for r in recs])

    def residuals(x):
        a, b = np.exp(x)
        return np.log([link_time_s(r.workload, r.params["bytes"], a, b) for r in recs]) - measured

    sol = least_squares(
        residuals, np.log([20e-6, 1e9]), bounds=(np.log([1e-8, 1e6]), np.log([1e-1, 1e13])), loss="soft_l1", f_scale=0.1
    )
    a, b = np.exp(sol.x)
    rms = float(np.sqrt(np.mean(residuals(sol.x) ** 2)))
    source = (
        f"calibrated by `dcsim validate` on {date.today().isoformat()} from {len(recs)} 2-process "
        f"{'/'.join(LINK_FIT_WORKLOADS)} records ({recs[0].device}, torch {recs[0].torch_version}); "
        f"rms log error {rms:.3f}; efficiency 1 by construction (bandwidth is the achieved rate)"
    )
    return LinkSpec(
        name=name, kind="nic", bandwidth=float(b), latency=float(a), efficiency=1.0, transport=transport, source=source
    )


# ---- profiles --------------------------------------------------------------------------------


def _clean(d):
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in d.items() if v is not None}
    return d


def write_spec(spec, path: str | Path, header: str) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(_clean(spec.model_dump(mode="json")), sort_keys=False, width=120)
    from sim.report.output import write_text  # atomic: temp file + rename

    write_text(p, "".join(f"# {line}\n" for line in header.splitlines()) + body)
    return p


@dataclass
class Calibration:
    device: DeviceSpec
    link: LinkSpec | None
    device_rms_log_error: float
    device_path: Path | None = None
    link_path: Path | None = None
    lockstep: DeviceSpec | None = None  # the device while every rank computes at once (`-x2`)
    lockstep_path: Path | None = None


def lockstep_records(records: list) -> list:
    """The compute primitives timed on 2 ranks in lock-step, as 1-process records for fit_device."""
    return [
        r.model_copy(update={"processes": 1})
        for r in records
        if r.family == "primitive" and r.workload in DEVICE_FIT_WORKLOADS and r.processes == 2
    ]


def calibrate(records: list, nominal: dict, name: str, profile_dir: str | Path | None = None) -> Calibration:
    """Fit device (and link, if 2-process primitives exist); write profiles when `profile_dir` is set."""
    fit = fit_device(records, nominal, name)
    fit.spec, gather_used = fit_gather(fit.spec, records)
    fit.used += gather_used
    transport = "tcp" if nominal["kind"] == "cpu" else "nvlink"
    link = fit_link(records, f"{name}-link", transport)
    cal = Calibration(fit.spec, link, fit.rms_log_error)
    together = lockstep_records(records)
    if len(together) >= 4:
        cal.lockstep = fit_device(together, nominal, f"{name}-x2").spec
    if profile_dir is not None:
        if cal.lockstep is not None:
            cal.lockstep_path = write_spec(
                cal.lockstep,
                Path(profile_dir) / f"{name}-x2.yaml",
                f"Calibrated device profile '{name}-x2': the device while 2 ranks compute in "
                "lock-step (shared memory system); used for CP predictions.",
            )
        cal.device_path = write_spec(
            fit.spec,
            Path(profile_dir) / f"{name}.yaml",
            f"Calibrated device profile '{name}' (catalog format; a scenario names it by path).\n"
            "Written by `dcsim validate`; see validation/calibrate.py.",
        )
        if link is not None:
            cal.link_path = write_spec(
                link,
                Path(profile_dir) / f"{name}-link.yaml",
                f"Calibrated link between 2 processes on '{name}' (gloo/NCCL), catalog format.",
            )
    return cal


def profile_name(device_name: str, threads: int, kind: str) -> str:
    from validation.timing import slug

    return f"{slug(device_name)}-{threads}t" if kind == "cpu" else slug(device_name)
