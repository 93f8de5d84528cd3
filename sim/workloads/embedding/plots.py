"""The plots of `kind: embedding_training` runs.

`embedding_load`: per-GPU load of the plan - simulated embedding kernel time per iteration (forward
and backward) beside the planner's estimate, and the HBM / slow-tier bytes each GPU holds, with the
load imbalance (`dcsim run --out` writes it as embedding_load.png). `plan_load` and
`embedding_kernel_time` are its tables.
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sim.engine.plotting import finish, time_scale

_GPU = re.compile(r"^h(\d+)/g(\d+)$")


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
    load = pd.DataFrame(
        0.0, index=pd.RangeIndex(num_gpus, name="rank"), columns=["estimated_s", "hbm_bytes", "slow_bytes"]
    )
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


def embedding_load(
    metrics: dict,
    spans: pd.DataFrame,
    num_gpus: int,
    iterations: int = 1,
    title: str = "Embedding load per GPU",
    path=None,
):
    """Per GPU: simulated embedding kernel time (forward + backward) and the planner's estimate;
    below, the HBM and slow-tier bytes of the GPU's shards."""
    sim_t = embedding_kernel_time(spans, num_gpus, iterations)
    plan = plan_load(metrics.get("plan") or {}, num_gpus)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.35 * num_gpus + 3), 7.5), sharex=True)
    x = np.arange(num_gpus)
    total = sim_t.sum(axis=1)
    scale, unit = time_scale(float(max(total.max(), plan["estimated_s"].max(), 1e-12)))
    ax.bar(x, sim_t["forward_s"] * scale, color="tab:blue", label="embedding forward (simulated)")
    ax.bar(
        x,
        sim_t["backward_s"] * scale,
        bottom=sim_t["forward_s"] * scale,
        color="tab:cyan",
        label="embedding backward + optimizer (simulated)",
    )
    if total.mean() > 0:
        ax.axhline(total.mean() * scale, color="0.4", ls="--", lw=1, label="mean (simulated)")
    handles = []
    if plan["estimated_s"].sum() > 0:  # additive proxy (uncontended accesses + all-to-all)
        twin = ax.twinx()
        pscale, punit = time_scale(float(plan["estimated_s"].max()))
        handles = twin.plot(
            x,
            plan["estimated_s"] * pscale,
            "k_",
            markersize=14,
            mew=2,
            label="planner's additive cost of the GPU's shards (right axis)",
        )
        twin.set_ylim(0, float(plan["estimated_s"].max()) * pscale * 1.15)
        twin.set_ylabel(f"planner cost ({punit})")
    ax.set_ylim(0, float(total.max()) * scale * 1.15 if total.max() > 0 else 1)
    imbalance = metrics.get("load_imbalance")
    ax.set_ylabel(f"embedding kernel time per iteration ({unit})", fontsize=9)
    lines = ax.get_legend_handles_labels()[0] + handles
    ax.legend(
        lines,
        [h.get_label() for h in lines],
        fontsize=8,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=2,
        frameon=False,
    )
    ax.set_title(
        f"{title}" + (f"  (load imbalance max/mean = {imbalance:.2f})" if imbalance else ""), fontsize=10, pad=40
    )
    gib = 2.0**30
    ax2.bar(x - 0.2, plan["hbm_bytes"] / gib, width=0.4, color="tab:green", label="HBM")
    ax2.bar(x + 0.2, plan["slow_bytes"] / gib, width=0.4, color="tab:pink", label="slow tiers (UVM/CXL/SCM/SSD)")
    ax2.set_ylabel("embedding bytes held (GiB)")
    ax2.set_xlabel("GPU rank")
    ax2.set_xticks(x)
    ax2.tick_params(axis="x", labelsize=7)
    ax2.legend(fontsize=8)
    return finish(fig, path)
