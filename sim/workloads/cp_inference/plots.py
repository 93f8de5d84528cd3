"""The plots of `kind: cp_inference` runs.

- `cp_breakdown`: where the first prefill's (and decode step's) time goes on GPU 0 (dense,
  attention, merge, exposed ring, All2All, TP all-reduce) and the ring steps' attention vs send
  times (from a run's metrics; `dcsim run --out` writes it as cp_breakdown.png);
- `cp_scaling`: TTFT against hosts for pass-KV and pass-Q with ideal (linear) scaling, from the
  table of `sim.studies.cp_scaling.cp_scaling_runs`.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sim.engine.plotting import finish, time_scale


def cp_breakdown(metrics: dict, title: str = "Context-parallel prefill breakdown", path=None):
    """Stacked bars of the prefill (and decode step) time on GPU 0, and per ring step the attention
    time beside the ring send time (a send longer than the attention is exposed)."""
    phases = [
        (name, metrics.get(key))
        for name, key in (("prefill", "prefill_breakdown_s"), ("decode step", "decode_breakdown_s"))
    ]
    phases = [(n, b) for n, b in phases if b]
    steps = pd.DataFrame(metrics.get("ring_steps") or [])
    fig, axes = plt.subplots(1 + (not steps.empty), 1, figsize=(10, 3.2 + 2.6 * (not steps.empty)), squeeze=False)
    ax = axes[0][0]
    parts = ["dense", "attention", "merge", "ring_exposed", "all2all", "tp_allreduce"]
    colors = dict(zip(parts, ["tab:blue", "tab:purple", "tab:pink", "tab:red", "tab:orange", "tab:green"]))
    for i, (_name, bd) in enumerate(phases):
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
    ax.set_title(
        f"{title}: ring {metrics.get('ring_algorithm', '?')}, TP{metrics.get('tp', '?')} x CP{metrics.get('cp', '?')}",
        fontsize=10,
        pad=24,
    )
    if not steps.empty:
        ax2 = axes[1][0]
        scale, unit = time_scale(
            float(max(steps["attention_s"].max(), steps.get("send_s", steps["attention_s"]).max()))
        )
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
