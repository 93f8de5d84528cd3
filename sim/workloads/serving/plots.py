"""Plots of a `kind: serving` run, drawn from its metrics: KV-cache utilisation, preemptions per bin
and queue length over time (the `timeline` metric), one panel each."""

from __future__ import annotations


def serving_timeline(metrics: dict, title: str = "serving over time", path=None, ax=None):
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = metrics["timeline"]
    t = tl["t_s"]
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    axes[0].plot(t, [100 * x for x in tl["kv_utilisation"]], color="tab:blue")
    axes[0].set_ylabel("KV cache used (%)")
    axes[0].set_ylim(0, 105)
    width = (t[1] - t[0]) if len(t) > 1 else (t[0] if t else 1.0)
    axes[1].bar(t, tl["preemptions"], width=-0.9 * width, align="edge", color="tab:red")
    axes[1].set_ylabel("preemptions per bin (count)")
    axes[2].plot(t, tl["queue_length"], color="tab:orange", label="queued")
    axes[2].plot(t, tl["running"], color="tab:green", label="running")
    axes[2].set_ylabel("requests (count)")
    axes[2].set_xlabel("time (s)")
    axes[2].legend(loc="upper left")
    axes[0].set_title(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
