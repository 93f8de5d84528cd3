"""Kind-specific plots, from a run's metrics and spans (and, for scaling curves, from several runs).

- cp_inference: `cp_breakdown` - where the first prefill's (and decode step's) time goes on GPU 0
  (dense, attention, merge, exposed ring, All2All, TP all-reduce) and the ring steps' attention vs
  send times; `cp_scaling` - TTFT against hosts for pass-KV and pass-Q with ideal (linear) scaling,
  from `sim.studies.cp_scaling.cp_scaling_runs`.
- embedding_training: `embedding_load` - per-GPU load of the plan: simulated embedding kernel time
  per iteration (forward and backward) beside the planner's estimate and the HBM / slow-tier bytes
  each GPU holds, with the load imbalance.
- ingestion: `ingestion_buffers` - trainer buffer fill and stall fraction over time, and the
  preprocessing workers running (autoscaling).
- validation (predicted vs measured with the error band) is validation/report.py's `scatter_plot`.

`workload_plots(result)` lists the ones `dcsim run --out` writes for a run.
"""
from __future__ import annotations

import re

import matplotlib
import matplotlib.pyplot as plt  # backend: chosen in sim.report.plots
import numpy as np
import pandas as pd

from sim.report.plots import finish, time_scale

_GPU = re.compile(r"^h(\d+)/g(\d+)$")


# ---- cp_inference ------------------------------------------------------------------------------
def cp_breakdown(metrics: dict, title: str = "Context-parallel prefill breakdown", path=None):
    """Stacked bars of the prefill (and decode step) time on GPU 0, and per ring step the attention
    time beside the ring send time (a send longer than the attention is exposed)."""
    phases = [(name, metrics.get(key)) for name, key in (("prefill", "prefill_breakdown_s"),
                                                         ("decode step", "decode_breakdown_s"))]
    phases = [(n, b) for n, b in phases if b]
    steps = pd.DataFrame(metrics.get("ring_steps") or [])
    fig, axes = plt.subplots(1 + (not steps.empty), 1, figsize=(10, 3.2 + 2.6 * (not steps.empty)), squeeze=False)
    ax = axes[0][0]
    parts = ["dense", "attention", "merge", "ring_exposed", "all2all", "tp_allreduce"]
    colors = dict(zip(parts, ["tab:blue", "tab:purple", "tab:pink", "tab:red", "tab:orange", "tab:green"]))
    for i, (name, bd) in enumerate(phases):
        total = bd.get("total") or sum(bd.get(p, 0.0) for p in parts)
        left = 0.0
        for p in parts:
            share = bd.get(p, 0.0) / total * 100 if total else 0.0
            ax.barh(i, share, left=left, color=colors[p], label=p.replace("_", " ") if i == 0 else None)
            if share > 6:
                ax.text(left + share / 2, i, f"{share:.0f}%", ha="center", va="center", fontsize=8, color="white")
            left += share
        scale, unit = time_scale(total)
        ax.text(101, i, f"{total * scale:.3g} {unit}", va="center", fontsize=8)
    ax.set_yticks(range(len(phases)))
    ax.set_yticklabels([n for n, _ in phases])
    ax.set_xlim(0, 115)
    ax.set_xlabel("share of the phase time on GPU 0 (%)")
    ax.invert_yaxis()
    ax.legend(ncol=6, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_title(f"{title}: ring {metrics.get('ring_algorithm', '?')}, TP{metrics.get('tp', '?')} x "
                 f"CP{metrics.get('cp', '?')}", fontsize=10, pad=24)
    if not steps.empty:
        ax2 = axes[1][0]
        scale, unit = time_scale(float(max(steps["attention_s"].max(), steps.get("send_s", steps["attention_s"]).max())))
        x = steps["step"].to_numpy()
        ax2.bar(x - 0.2, steps["attention_s"] * scale, width=0.4, label="attention", color="tab:purple")
        if "send_s" in steps:
            ax2.bar(x + 0.2, steps["send_s"] * scale, width=0.4, label="ring send", color="tab:orange")
        if "exposed_s" in steps and steps["exposed_s"].sum() > 0:
            ax2.plot(x, steps["exposed_s"] * scale, "k_", markersize=18, label="exposed wait")
        ax2.set_xticks(x)
        ax2.set_xlabel("ring step (first layer of the first prefill)")
        ax2.set_ylabel(f"time ({unit})")
        ax2.legend(fontsize=8)
    return finish(fig, path)


def cp_scaling(table: pd.DataFrame, title: str = "TTFT vs hosts", path=None):
    """TTFT against hosts per ring algorithm (log-log) with ideal scaling from the smallest host
    count. `table`: columns hosts, ring, ttft_s (sim.studies.cp_scaling.cp_scaling_runs)."""
    fig, ax = plt.subplots(figsize=(7.5, 5))
    base_hosts = int(table["hosts"].min())
    base = float(table.loc[table["hosts"] == base_hosts, "ttft_s"].min())
    hosts = np.array(sorted(table["hosts"].unique()), dtype=float)
    scale, unit = time_scale(float(table["ttft_s"].max()))
    ax.plot(hosts, base * base_hosts / hosts * scale, "--", color="0.5", label=f"ideal (TTFT x {base_hosts}/hosts)")
    styles = {"pass-kv": ("tab:blue", "o"), "pass-q": ("tab:red", "s")}
    for ring, df in table.groupby("ring", sort=True):
        color, marker = styles.get(ring, ("tab:gray", "^"))
        df = df.sort_values("hosts")
        ax.plot(df["hosts"], df["ttft_s"] * scale, marker=marker, color=color, label=ring)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(hosts)
    ax.set_xticklabels([str(int(h)) for h in hosts])
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel("hosts (CP ranks x TP GPUs per host)")
    ax.set_ylabel(f"time to first token ({unit})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=10)
    return finish(fig, path)


# ---- embedding_training ------------------------------------------------------------------------
def _ranks(text, num_gpus: int) -> list[int]:
    text = str(text)
    if text == "all":
        return list(range(num_gpus))
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def plan_load(plan: dict, num_gpus: int) -> pd.DataFrame:
    """Per GPU: the planner's estimated embedding time and the HBM / slow-tier bytes of its shards
    (each table's totals split evenly over the ranks holding it)."""
    load = pd.DataFrame(0.0, index=pd.RangeIndex(num_gpus, name="rank"),
                        columns=["estimated_s", "hbm_bytes", "slow_bytes"])
    for row in plan.values():
        ranks = [r for r in _ranks(row["ranks"], num_gpus) if r < num_gpus]
        for col in load.columns:
            load.loc[ranks, col] += float(row.get(col, 0.0)) / len(ranks)
    return load


def embedding_kernel_time(spans: pd.DataFrame, num_gpus: int, iterations: int = 1) -> pd.DataFrame:
    """Simulated embedding kernel time per GPU and iteration, forward and backward (spans of
    category `embedding` on the GPUs' compute streams)."""
    emb = spans[(spans["category"] == "embedding") & spans["component"].str.match(r"^h\d+/g\d+$")]
    out = pd.DataFrame(0.0, index=pd.RangeIndex(num_gpus, name="rank"), columns=["forward_s", "backward_s"])
    if emb.empty:
        return out
    gpus_per_host = 1 + max(int(_GPU.match(c).group(2)) for c in emb["component"].unique())
    rank = emb["component"].map(lambda c: int(_GPU.match(c).group(1)) * gpus_per_host + int(_GPU.match(c).group(2)))
    backward = emb["name"].str.contains("bwd")
    for col, mask in (("forward_s", ~backward), ("backward_s", backward)):
        out[col] = emb[mask].groupby(rank[mask])["duration_s"].sum().reindex(out.index, fill_value=0.0) / iterations
    return out


def embedding_load(metrics: dict, spans: pd.DataFrame, num_gpus: int, iterations: int = 1,
                   title: str = "Embedding load per GPU", path=None):
    """Per GPU: simulated embedding kernel time (forward + backward) and the planner's estimate;
    below, the HBM and slow-tier bytes of the GPU's shards."""
    sim_t = embedding_kernel_time(spans, num_gpus, iterations)
    plan = plan_load(metrics.get("plan") or {}, num_gpus)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.35 * num_gpus + 3), 7.5), sharex=True)
    x = np.arange(num_gpus)
    total = sim_t.sum(axis=1)
    scale, unit = time_scale(float(max(total.max(), plan["estimated_s"].max(), 1e-12)))
    ax.bar(x, sim_t["forward_s"] * scale, color="tab:blue", label="embedding forward (simulated)")
    ax.bar(x, sim_t["backward_s"] * scale, bottom=sim_t["forward_s"] * scale, color="tab:cyan",
           label="embedding backward + optimizer (simulated)")
    if total.mean() > 0:
        ax.axhline(total.mean() * scale, color="0.4", ls="--", lw=1, label="mean (simulated)")
    handles = []
    if plan["estimated_s"].sum() > 0:             # additive proxy (uncontended accesses + all-to-all)
        twin = ax.twinx()
        pscale, punit = time_scale(float(plan["estimated_s"].max()))
        handles = twin.plot(x, plan["estimated_s"] * pscale, "k_", markersize=14, mew=2,
                            label="planner's additive cost of the GPU's shards (right axis)")
        twin.set_ylim(0, float(plan["estimated_s"].max()) * pscale * 1.15)
        twin.set_ylabel(f"planner cost ({punit})")
    ax.set_ylim(0, float(total.max()) * scale * 1.15 if total.max() > 0 else 1)
    imbalance = metrics.get("load_imbalance")
    ax.set_ylabel(f"embedding kernel time per iteration ({unit})", fontsize=9)
    lines = ax.get_legend_handles_labels()[0] + handles
    ax.legend(lines, [h.get_label() for h in lines], fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=2, frameon=False)
    ax.set_title(f"{title}" + (f"  (load imbalance max/mean = {imbalance:.2f})" if imbalance else ""), fontsize=10,
                 pad=40)
    gib = 2.0 ** 30
    ax2.bar(x - 0.2, plan["hbm_bytes"] / gib, width=0.4, color="tab:green", label="HBM")
    ax2.bar(x + 0.2, plan["slow_bytes"] / gib, width=0.4, color="tab:pink", label="slow tiers (UVM/CXL/SCM/SSD)")
    ax2.set_ylabel("embedding bytes held (GiB)")
    ax2.set_xlabel("GPU rank")
    ax2.set_xticks(x)
    ax2.tick_params(axis="x", labelsize=7)
    ax2.legend(fontsize=8)
    return finish(fig, path)


# ---- ingestion ---------------------------------------------------------------------------------
def ingestion_buffers(metrics: dict, title: str = "Trainer buffers and stalls", path=None):
    """Mean trainer buffer fill and the fraction of trainer time stalled per control interval, and
    the preprocessing workers running, over simulated time."""
    trace = pd.DataFrame(metrics.get("buffer_trace") or [], columns=metrics.get("buffer_trace_columns"))
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, height_ratios=[2, 1])
    if trace.empty:
        ax.text(0.5, 0.5, "no buffer trace in the metrics", ha="center", va="center", transform=ax.transAxes)
        return finish(fig, path)
    scale, unit = time_scale(float(trace["t_s"].max()))
    end = trace["t_s"].to_numpy() * scale
    dt = np.diff(end, prepend=0.0)                       # each row covers (end - dt, end]
    t = np.r_[end - dt, end[-1]]                         # interval starts, then the last end

    def hold(col, factor=1.0):                           # values per interval, repeated for the last edge
        v = trace[col].to_numpy() * factor
        return np.r_[v, v[-1]]
    ax.step(t, hold("buffer_fill", 100), where="post", color="tab:blue", lw=2,
            label="buffer fill (mean over trainers)")
    ax.fill_between(t, 0, hold("stall_fraction", 100), step="post", color="tab:red", alpha=0.35,
                    label="trainer time stalled in the interval")
    ax.set_ylim(0, 105)
    ax.set_ylabel("% of buffer slots / of time")
    stall = metrics.get("data_stall_fraction")
    got, want = metrics.get("trainer_samples_per_s"), metrics.get("trainer_demand_samples_per_s")
    detail = f"data stall {stall:.1%}" if stall is not None else ""
    if got and want:
        detail += f", {got:,.0f} of {want:,.0f} samples/s demanded"
    ax.set_title(f"{title}  ({detail})", fontsize=10, pad=22)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    ax.set_xlim(0, float(t.max()))
    ax.grid(alpha=0.3)
    ax2.step(t, hold("workers"), where="post", color="tab:green", label="preprocessing workers")
    ax2.set_ylabel("workers")
    ax2.set_ylim(0, max(float(trace["workers"].max()), 1) * 1.25)
    ax2.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax3 = ax2.twinx()
    ax3.step(t, hold("core_utilisation", 100), where="post", color="tab:brown", alpha=0.8,
             label="worker core utilisation")
    ax3.set_ylabel("core utilisation (%)")
    ax3.set_ylim(0, 105)
    ax2.set_xlabel(f"simulated time ({unit}; one value per control interval)")
    lines = ax2.get_legend_handles_labels()[0] + ax3.get_legend_handles_labels()[0]
    ax2.legend(lines, [h.get_label() for h in lines], fontsize=8, loc="lower left")
    return finish(fig, path)


def workload_plots(result) -> list:
    """(file stem, draw function taking `path=`) of the kind-specific plots of one run."""
    kind, m, name = result.scenario.kind, result.metrics, result.scenario.name     # "multi": several jobs
    if kind == "cp_inference" and m.get("prefill_breakdown_s"):
        return [("cp_breakdown", lambda **kw: cp_breakdown(m, **{"title": f"{name}: prefill breakdown", **kw}))]
    if kind == "embedding_training" and m.get("plan"):
        iters = getattr(result.scenario.workload, "iterations", 1)
        return [("embedding_load", lambda **kw: embedding_load(m, result.spans, result.cluster.num_gpus, iters,
                                                               **{"title": f"{name}: embedding load per GPU", **kw}))]
    if kind == "ingestion" and m.get("buffer_trace"):
        return [("ingestion_buffers", lambda **kw: ingestion_buffers(m, **{"title": f"{name}: buffers", **kw}))]
    return []
