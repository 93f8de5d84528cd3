"""Wall time vs cluster size: ring all-reduce on the Llama 3 Clos (flow network) and one analytical
Llama 3 405B training iteration (TP8 x PP16 x DP, data parallelism grown) from 16 / 512 to 16K GPUs,
and all-to-all on a fat-tree vs number of concurrent flows. Writes benchmarks/growth.png.

    python benchmarks/growth.py [--max-gpus 16384]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim import load_scenario, run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-gpus", type=int, default=16384)
    args = ap.parse_args()
    ring, training, a2a = [], [], []
    for gpus in (16, 128, 512, 2048, 4096, 8192, 16384):
        if gpus > args.max_gpus:
            break
        r = run(load_scenario(HERE / "scenarios" / "allreduce-16k-clos3.yaml", [f"hardware.nodes={gpus // 8}"]))
        ring.append((gpus, r.wall_s))
        print(f"ring all-reduce {gpus:6d} GPUs: {r.wall_s:7.2f} s wall")
    for dp in (4, 8, 16, 32, 64, 128):  # 128 GPUs per replica (TP8 x PP16); FSDP needs dp >= 4
        gpus = 128 * dp
        if gpus > args.max_gpus:
            break
        r = run(
            load_scenario(
                HERE / "scenarios" / "training-16k-analytical.yaml",
                [
                    f"hardware.nodes={gpus // 8}",
                    f"workload.parallelism.dp={dp}",
                    f"workload.global_batch_tokens={dp * 16 * 8192}",
                ],
            )
        )
        training.append((gpus, r.wall_s))
        print(f"training iteration {gpus:6d} GPUs: {r.wall_s:7.2f} s wall")
    for gpus in (64, 128, 256, 512, 1024):
        if gpus > args.max_gpus:
            break
        r = run(load_scenario(HERE / "scenarios" / "alltoall-1024gpu.yaml", [f"hardware.nodes={gpus // 8}"]))
        a2a.append((gpus * (gpus - 1), r.wall_s))
        print(f"all-to-all {gpus:5d} GPUs ({gpus * (gpus - 1):8d} flows): {r.wall_s:7.2f} s wall")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    for ax, data, xlabel, title in (
        (axes[0], ring, "GPUs", "ring all-reduce, Llama 3 Clos, flows"),
        (axes[1], training, "GPUs", "405B training iteration, analytical"),
        (axes[2], a2a, "concurrent flows", "all-to-all, fat-tree"),
    ):
        xs, ys = zip(*data)
        ax.loglog(xs, ys, "o-", label="dcsim")
        ax.loglog(xs, [ys[0] * x / xs[0] for x in xs], "--", color="gray", label="linear from first point")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("wall time (s)")
        ax.set_title(title)
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(HERE / "growth.png", dpi=110)
    print(f"wrote {HERE / 'growth.png'}")


if __name__ == "__main__":
    main()
