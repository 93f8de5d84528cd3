"""Fit the compute efficiencies of the paper's H100 (96 GB, 500 W) to its single-host TP8 figures.

arXiv 2411.01783 reports, for Llama 3 405B on one host (TP8, FP8 row-wise FFN, BF16 attention,
batch 1): time to first token 1.740 s at 8K, 7.658 s at 32K, 42.010 s at 128K tokens, and decode
44.5 ms/token at 8K-32K context, 46.3 ms at 128K (docs/references.md#validation-references). These six points - and
nothing multi-host - are what this script fits, by running the cp_inference simulation itself
(cp = 1 on one host) inside scipy.optimize.least_squares on log(predicted / reported):

  gemm                 large-GEMM fraction of peak
  attention            long-query attention fraction of peak
  memory               fraction of HBM bandwidth reached by streaming kernels (sets decode)

Short-query attention (decode, partial prefill) follows from the device's attention kernel model
(hardware_models/attention.py: tiles, SMs, KV splits), so `attention_half_seq` stays 0 and is not
fitted.

`gemm_half_dim` and `launch_overhead` stay at the catalog's assumptions: the six points cannot
tell them apart from `gemm` and `memory`. The fitted entry is `h100-96gb-500w-cp-calibrated` in
hardware_models/catalog/devices.yaml; multi-host predictions made with it are predictions.

    python validation/fit_cp_single_host.py            # fit and print the catalog entry
    python validation/fit_cp_single_host.py --check    # compare the catalog entry with the points
"""

from __future__ import annotations

import argparse

import numpy as np
import yaml
from scipy.optimize import least_squares

from hardware_models import catalog
from sim.runner import run
from sim.scenario.model import scenario_from_dict

BASE = "h100-96gb-500w"
CALIBRATED = "h100-96gb-500w-cp-calibrated"
# (metric, context tokens, reported seconds) - arXiv 2411.01783, single host TP8, RDMA hosts
POINTS = [
    ("ttft", 8192, 1.740),
    ("ttft", 32768, 7.658),
    ("ttft", 131072, 42.010),
    ("decode", 8192, 0.0445),
    ("decode", 32768, 0.0445),
    ("decode", 131072, 0.0463),
]
PARAMS = ["gemm", "attention", "memory"]
LOWER = [0.2, 0.2, 0.4]
UPPER = [1.0, 1.0, 1.0]
START = [0.75, 0.6, 0.85]
FIXED = {"attention_half_seq": 0.0}  # the attention kernel model gives short-query efficiency


def scenario(gpu, metric: str, tokens: int):
    if metric == "ttft":
        request = {"prompt_tokens": tokens}
    else:  # one decode step at `tokens` context
        request = {"prompt_tokens": 1, "cached_tokens": tokens - 1, "decode_tokens": 1}
    return scenario_from_dict(
        {
            "name": f"fit-{metric}-{tokens}",
            "hardware": {
                "gpu": gpu,
                "gpus_per_node": 8,
                "nodes": 1,
                "scale_up": "nvlink4",
                "nic": "cx7-400g-rdma",
                "topology": {"kind": "single-switch"},
            },
            "workload": {
                "kind": "cp_inference",
                "model": "llama3-405b",
                "dtype": "bf16",
                "ffn_dtype": "fp8",
                "parallelism": {"tp": 8},
                "requests": [request],
                # identical layers: two simulated, the rest replayed (exact, tests/workloads/cp_inference/test_cp_inference.py)
                "simulate": {"layers": 2},
            },
        }
    )


def predict(gpu) -> np.ndarray:
    out = []
    for metric, tokens, _ in POINTS:
        m = run(scenario(gpu, metric, tokens)).metrics
        out.append(m["ttft_s"] if metric == "ttft" else m["decode_s_per_token"])
    return np.array(out)


def gpu_with(values) -> dict:
    return {"base": BASE, "efficiency": {**FIXED, **{k: float(v) for k, v in zip(PARAMS, values)}}}


def fit():
    reported = np.array([p[2] for p in POINTS])

    def residuals(x):
        return np.log(predict(gpu_with(x)) / reported)

    result = least_squares(residuals, START, bounds=(LOWER, UPPER), x_scale=[0.1, 0.1, 0.1], diff_step=1e-3)
    return result, reported


def report(pred: np.ndarray, reported: np.ndarray) -> None:
    for (metric, tokens, _), p, r in zip(POINTS, pred, reported):
        print(f"  {metric:6s} {tokens:>7d}: predicted {p:9.4f} s  reported {r:9.4f} s  ({p / r - 1:+.1%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the catalog entry with the points")
    args = ap.parse_args()
    reported = np.array([p[2] for p in POINTS])
    if args.check:
        report(predict(CALIBRATED), reported)
        return
    result, reported = fit()
    print(f"least_squares: {result.message} ({result.nfev} evaluations), cost {result.cost:.3g}")
    report(predict(gpu_with(result.x)), reported)
    entry = catalog.raw_entry("device", BASE)
    entry.pop("name")
    entry["efficiency"] = {**FIXED, **{k: round(float(v), 4) for k, v in zip(PARAMS, result.x)}}
    print(yaml.safe_dump({CALIBRATED: entry}, sort_keys=False, width=120))


if __name__ == "__main__":
    main()
