"""Generate the study notebooks from the cell lists below (reviewable as plain Python).

    python notebooks/build.py            # rewrite notebooks/*.ipynb (outputs empty)

Every notebook starts from the project's scenarios, runs top to bottom in under a minute on a
2-core machine, and is executed by tests/end_to_end/test_notebooks.py so it cannot rot. Cells that draw end in
`;` so a figure shows once.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).parent

SETUP = """\
from pathlib import Path
import pandas as pd
from sim import load_scenario, run
from sim.report.bottleneck import summary_rows
# the repository root, whether the notebook runs from notebooks/ or from the root
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "scenarios").is_dir())
pd.set_option("display.precision", 4)"""


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str):
    return nbformat.v4.new_code_cell(text.strip())


CP_SCALING = [
    md("""
# Context-parallel inference: how TTFT scales with hosts

Llama 3 70B (BF16) prefills a 128K-token prompt with tensor parallelism (TP8) inside each H100 host
and context parallelism (CP) across hosts: ring attention passes either the KV blocks (pass-KV) or
the queries (pass-Q) around the CP ranks (arXiv 2411.01783). This notebook runs the shipped scenario
`scenarios/cp-70b-h100-2hosts-128k.yaml`, looks at where the time goes, then runs it on 1-8 hosts
with both ring algorithms. Two layers per phase are simulated and the rest replayed (exact here:
every layer is identical), which keeps each run under a second."""),
    code(SETUP),
    code("""
scenario = load_scenario(ROOT / "scenarios/cp-70b-h100-2hosts-128k.yaml",
                         ["workload.simulate.layers=2", "workload.requests.0.decode_tokens=1"])
result = run(scenario)
pd.Series({k: result.metrics[k] for k in ("ttft_s", "decode_s_per_token", "ring_algorithm", "mfu",
                                          "achieved_tflop_per_s_per_gpu")})"""),
    md("""
## Why this TTFT: the bottleneck report

The critical path is rebuilt from the trace (sim/report/bottleneck.py). Replayed layers are copies of the
simulated ones, so the bounding resource is decided on the simulated part."""),
    code("""
for name, value in summary_rows(result.bottleneck):
    print(f"{name:28s} {value}")"""),
    code("""
from sim.workloads.cp_inference.plots import cp_breakdown
cp_breakdown(result.metrics, title="70B, 128K prefill on 2 hosts");"""),
    md(
        "The first layer on the GPUs of host 0: attention steps on the compute stream, the ring send on "
        "the NIC hidden under step 0, then the TP all-reduce over NVLink."
    ),
    code("""result.plot.timeline(window_s=(0, 0.045), max_rows=12);"""),
    md("""
## TTFT against hosts, pass-KV vs pass-Q

`cp_scaling_runs` reruns the scenario with `hardware.nodes = h` and CP = h (TP stays 8), once per
ring algorithm; one host (CP = 1, no ring) is the baseline of ideal scaling."""),
    code("""
from sim.studies.cp_scaling import cp_scaling_runs
from sim.workloads.cp_inference.plots import cp_scaling
table = cp_scaling_runs(scenario, hosts=(1, 2, 4, 8))
table["parallel_efficiency"] = table["ttft_s"].iloc[0] / (table["hosts"] * table["ttft_s"])
table[["hosts", "ring", "cp", "ttft_s", "mfu", "parallel_efficiency"]]"""),
    code("""cp_scaling(table, title="Llama 3 70B, 128K-token prefill: TTFT vs hosts");"""),
    md("""
With a fresh 128K prompt pass-KV stays near ideal: each KV block is smaller than the queries and its
send hides under the step's attention. Pass-Q pays an All2All of partial outputs at the end of
every layer, which does not hide.

## When pass-Q wins: a short turn on a long persistent KV cache

In a multi-turn conversation most of the context is already cached (P tokens) and only a few new
tokens (T) arrive. Pass-KV then circulates the whole cache; pass-Q circulates only the new queries."""),
    code("""
from sim.studies.cp_scaling import with_overrides
rows = []
for ring in ("pass-kv", "pass-q"):
    s = with_overrides(scenario, {"hardware.nodes": 4, "workload.parallelism.cp": 4, "workload.ring": ring,
                                  "workload.requests": [{"prompt_tokens": 1024, "cached_tokens": 126976}]})
    r = run(s)
    rows.append({"ring": ring, "ttft_s": r.metrics["ttft_s"],
                 "ring_exposed_s": r.metrics["prefill_breakdown_s"].get("ring_exposed", 0.0),
                 "all2all_s": r.metrics["prefill_breakdown_s"].get("all2all", 0.0),
                 "bottleneck": r.bottleneck["label"]})
pd.DataFrame(rows)"""),
]

EMBEDDING = [
    md("""
# Embedding placement: which plan keeps 16 GPUs busy?

A capacity-constrained DLRM (128 tables, 2.4 TiB with optimizer state, about 2.4x the GPUs' embedding
HBM) trains on 2 hosts of 8 A100; what does not fit lives in host DDR and is reached over PCIe as
UVM. Two planners shard the tables: RecShard (hot rows in HBM, GPUs balanced by a cost model) and a
size-greedy baseline. The scenarios are `scenarios/emb-dlrm-2x8-a100-recshard.yaml` and
`...-size-greedy.yaml` (identical but for the planner); 2 iterations each keep the notebook fast."""),
    code(SETUP),
    code("""
runs = {}
for planner in ("recshard", "size-greedy"):
    s = load_scenario(ROOT / f"scenarios/emb-dlrm-2x8-a100-{planner}.yaml", ["workload.iterations=2"])
    runs[planner] = run(s)
keys = ["iteration_s", "samples_per_s", "load_imbalance", "slow_tier_accesses_per_iteration",
        "hbm_bytes_per_gpu_max", "planner_estimate_s"]
table = pd.DataFrame({p: {k: r.metrics[k] for k in keys} for p, r in runs.items()}).T
table["bottleneck"] = [r.bottleneck["label"] for r in runs.values()]
table"""),
    md("""
## Per-GPU load of each plan

Top: simulated embedding kernel time per iteration on each GPU (forward, and backward with the
optimizer), with the planner's own additive cost per GPU on the right axis. Bottom: how many bytes
of embedding rows each GPU holds in HBM and in the slow tier."""),
    code("""
from sim.workloads.embedding.plots import embedding_load
for planner, r in runs.items():
    embedding_load(r.metrics, r.spans, r.cluster.num_gpus, iterations=2,
                   title=f"{planner}: embedding load per GPU");"""),
    md("## Where the bytes go and what bounds the iteration"),
    code("""
r = runs["recshard"]
for name, value in summary_rows(r.bottleneck):
    print(f"{name:28s} {value}")
r.plot.tier_bytes();"""),
    code("""pd.DataFrame({p: r.metrics["breakdown_s"] for p, r in runs.items()})"""),
    code("""r.plot.utilisation();"""),
]

INGESTION = [
    md("""
# Ingestion sizing: how many preprocessing workers keep the trainers fed?

Two H100 trainer hosts demand 200k samples/s each from a disaggregated preprocessing pool (DPP,
arXiv 2108.09373) reading a columnar dataset from 40 HDD storage nodes. A 32-core worker sustains
about 40k samples/s, so 10 workers match the mean demand; service-time variability decides how many
more are needed. Base scenario: `scenarios/ingest-dlrm-disaggregated.yaml`, shortened here to a
12 s window (3 s warm-up) per run."""),
    code(SETUP),
    code("""
base = load_scenario(ROOT / "scenarios/ingest-dlrm-disaggregated.yaml",
                     ["workload.duration_s=12", "workload.warmup_s=3"])
from sim.studies.cp_scaling import sweep_runs
sizing = sweep_runs(base, "workload.preprocessing.workers", [8, 9, 10, 11])
sizing[["workload.preprocessing.workers", "trainer_samples_per_s", "trainer_demand_samples_per_s",
        "data_stall_fraction", "storage_read_bytes_per_s", "bounding_stage"]]"""),
    code("""
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(7, 4))
x = sizing["workload.preprocessing.workers"]
ax.plot(x, sizing["trainer_samples_per_s"] / 1e3, "o-", label="delivered")
ax.axhline(sizing["trainer_demand_samples_per_s"].iloc[0] / 1e3, color="0.5", ls="--", label="demand")
ax.set_xlabel("preprocessing workers")
ax.set_ylabel("trainer samples/s (thousands)")
ax2 = ax.twinx()
ax2.bar(x, sizing["data_stall_fraction"] * 100, alpha=0.25, color="tab:red", label="data stall")
ax2.set_ylabel("trainer time stalled (%)")
ax.legend(loc="center right")
ax.set_title("Throughput and stalls against the worker pool size");"""),
    md("## Buffers of an under-provisioned pool (9 workers) and of a sized one (11)"),
    code("""
from sim.studies.cp_scaling import with_overrides
for workers in (9, 11):
    r = run(with_overrides(base, {"workload.preprocessing.workers": workers}))
    r.plot.workload(title=f"{workers} workers");"""),
    md("""
## How sure are we? Several seeds

Storage and preprocessing service times are random (seeded substreams). `run_seeds` repeats a run
over seeds and gives the mean and a 95 % Student-t confidence interval of every metric."""),
    code("""
from sim.studies.seeds import run_seeds
per_seed, summary = run_seeds(with_overrides(base, {"workload.preprocessing.workers": 10}), seeds=range(3))
summary.loc[["trainer_samples_per_s", "data_stall_fraction"], ["n", "mean", "ci_low", "ci_high"]]"""),
]

VALIDATION = [
    md("""
# Validation report: predicted vs measured

`dcsim validate` measures primitives and compositions with torch, calibrates the hardware model on
the primitives only, predicts the compositions it did not fit, and compares (validation/). Measuring
takes minutes, so this notebook loads records already measured (`validation/records/`, the same
files `dcsim validate --compare` reads) and repeats the calibration, prediction and comparison.
Published figures used for calibration are shown but never counted."""),
    code(SETUP),
    code("""
import tempfile
from validation.harness import validate
from validation import report
records = ROOT / "validation" / "records"                  # one full-mode record set per device
out = Path(tempfile.mkdtemp(prefix="dcsim-validate-"))
runs = {f.stem: validate(compare=f, out_dir=out / f.stem, log=lambda msg: None) for f in sorted(records.glob("*.json"))}
pd.DataFrame({name: v.summary() for name, v in runs.items()}).T[["median_rel_error", "max_rel_error", "mape"]]"""),
    code("""pd.concat({name: pd.DataFrame(report.by_family(v.cases)).T for name, v in runs.items()})"""),
    code("""
cases = pd.DataFrame([{"device": name, "name": c.name, "family": c.family, "predicted_s": c.predicted_s,
                       "measured_s": c.measured_s, "rel_error": c.rel_error, "method": c.method}
                      for name, v in runs.items() for c in v.cases if c.family == "composition"])
cases"""),
    md("Predicted against measured on log axes, with the +-15 % and +-35 % bands (validation/report.py):"),
    code("""
from IPython.display import Image, display
for name, v in runs.items():
    report.scatter_plot(v.cases, out / f"{name}.png", f"predicted vs measured: {name}")
    display(Image(filename=str(out / f"{name}.png")))"""),
]

SERVING = [
    md("""
# Serving sizing: how many replicas for a target QPS and SLO, and when context parallelism pays

`kind: serving` runs continuous batching (chunked prefill under a token budget, a paged KV cache) on
replicas of TP x CP GPUs behind a router. This notebook starts from the shipped scenario
`scenarios/serve-70b-cp-long-prompts.yaml` (Llama 3 70B on H100 hosts, TTFT 2 s and TPOT 100 ms SLOs),
sizes a TP8 fleet for a target arrival rate, then compares a CP2 replica with two TP8 replicas on the
same 16 GPUs for long prompts. Requests are cut to a few hundred so every run takes seconds."""),
    code(SETUP),
    code("""
from sim.studies.cp_scaling import with_overrides
from sim.workloads.serving.plots import serving_timeline
base = load_scenario(ROOT / "scenarios/serve-70b-cp-long-prompts.yaml", ["workload.arrivals.count=150"])
result = run(base)
keys = ["ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s", "throughput_tokens_per_s",
        "goodput_requests_per_s", "slo_attainment", "kv_utilisation_peak", "preemptions"]
pd.Series({k: result.metrics[k] for k in keys})"""),
    code("""serving_timeline(result.metrics, title="70B fleet, 4 req/s: KV cache, preemptions, queue");"""),
    md("""
## Sizing for a target rate

Target: 8 requests/s of the scenario's mix (lognormal prompts, mean 3K tokens; outputs mean 200) with at
least 99% of requests within both SLOs. Every request goes to a pool of TP8 replicas (no CP) here;
the smallest fleet that meets the target is the answer, the table shows why (queueing drives TTFT p99
up long before the GPUs saturate)."""),
    code("""
rows = []
for replicas in (1, 2, 3, 4):
    s = with_overrides(base, {
        "workload.pools": [{"name": "tp8", "replicas": replicas, "tp": 8}],
        "workload.router": "least-loaded",
        "workload.arrivals.rate_per_s": 8, "workload.arrivals.count": 200,
    })
    m = run(s).metrics
    rows.append({"replicas": replicas, "gpus": m["gpus"], "ttft_p99_s": m["ttft_p99_s"], "tpot_p99_s": m["tpot_p99_s"],
                 "slo_attainment": m["slo_attainment"], "goodput_requests_per_s": m["goodput_requests_per_s"],
                 "busy_fraction": m["per_pool"]["tp8"]["busy_fraction_mean"]})
sizing = pd.DataFrame(rows)
enough = sizing[sizing.slo_attainment >= 0.99]
print("smallest fleet meeting 99% SLO attainment:",
      f"{int(enough.replicas.min())} replicas" if len(enough) else "none of these")
sizing"""),
    code("""
ax = sizing.plot(x="gpus", y="slo_attainment", marker="o", legend=False, figsize=(5, 3))
ax.set_xlabel("GPUs (TP8 replicas)")
ax.set_ylabel("SLO attainment (fraction)")
ax.set_title("Llama 3 70B at 8 requests/s");"""),
    md("""
## Long prompts: one CP2 replica or two TP8 replicas on the same 16 GPUs?

Twenty 64K-token prompts arrive at 0.5/s. Two TP8 replicas serve two prompts at once; one TP8 x CP2
replica splits each prompt's prefill over two hosts with ring attention (pass-KV hides the KV sends under
the attention), so each prompt's TTFT roughly halves, at the cost of serving one prefill at a time."""),
    code("""
long = {"workload.arrivals": {"process": "poisson", "rate_per_s": 0.5, "count": 20,
                              "prompt_tokens": {"dist": "fixed", "mean": 65536},
                              "decode_tokens": {"dist": "fixed", "mean": 100}},
        "workload.router": "least-loaded", "workload.scheduler.max_batch_tokens": 65536}
layouts = {"2 x TP8 (no CP)": [{"name": "tp8", "replicas": 2, "tp": 8}],
           "1 x TP8 x CP2": [{"name": "cp2", "replicas": 1, "tp": 8, "cp": 2}]}
cmp = []
for label, pools in layouts.items():
    m = run(with_overrides(base, {**long, "workload.pools": pools})).metrics
    cmp.append({"layout": label, "gpus": m["gpus"], "ttft_p50_s": m["ttft_p50_s"], "ttft_p99_s": m["ttft_p99_s"],
                "tpot_p50_s": m["tpot_p50_s"], "slo_attainment": m["slo_attainment"]})
cmp = pd.DataFrame(cmp)
cmp"""),
    code("""
ax = cmp.plot.bar(x="layout", y=["ttft_p50_s", "ttft_p99_s"], figsize=(5, 3), rot=0)
ax.set_ylabel("TTFT (s)")
ax.set_title("64K-token prompts on 16 H100");"""),
]

NOTEBOOKS = {
    "cp_scaling.ipynb": CP_SCALING,
    "embedding_placement.ipynb": EMBEDDING,
    "ingestion_sizing.ipynb": INGESTION,
    "validation_report.ipynb": VALIDATION,
    "serving_sizing.ipynb": SERVING,
}


def build(out_dir: Path = HERE) -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.from_dict({**cell, "id": f"{Path(name).stem}-{i}"}) for i, cell in enumerate(cells)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        path = out_dir / name
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build():
        print(p)
