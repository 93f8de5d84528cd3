"""Print the flow network's closed-form checks (issue 2/14) with their relative errors.

python benchmarks/closed_forms.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.network.collectives import collective  # noqa: E402
from tests.conftest import make_cluster  # noqa: E402


def timed(cluster, op, nbytes, algorithm, background=()):
    sim, net = cluster.sim, cluster.network
    for s, d, b in background:
        net.transfer(cluster.devices[s].node, cluster.devices[d].node, b)
    proc, _ = collective(net, op, cluster.nodes(range(cluster.num_gpus)), nbytes, algorithm)
    sim.env.run(until=proc)
    return sim.now


def step(c):
    t = c.topology
    return c.hardware.nic.achieved_bytes_per_s, t.path_latency_s(t.routes(c.devices[0].node, c.devices[1].node)[0])


def main():
    S, rows = 256 * 2**20, []
    for n in (4, 8):
        c = make_cluster(nodes=n)
        B, a = step(c)
        rows.append(
            (f"ring all-reduce n={n}", timed(c, "all_reduce", S, "ring"), 2 * (n - 1) / n * S / B + 2 * (n - 1) * a)
        )
        c = make_cluster(nodes=n)
        B, a = step(c)
        rows.append((f"all-gather n={n}", timed(c, "all_gather", S, "ring"), (n - 1) / n * S / B + (n - 1) * a))
        c = make_cluster(nodes=n)
        B, a = step(c)
        rows.append((f"all-to-all single switch n={n}", timed(c, "all_to_all", S, "direct"), (n - 1) / n * S / B + a))
    n = 4
    c = make_cluster(nodes=n)
    B, a = step(c)
    rows.append(
        (
            "ring all-reduce + competing flow",
            timed(c, "all_reduce", S, "ring", [(0, 1, 1e11)]),
            2 * (n - 1) * (S / n / (B / 2) + a),
        )
    )
    for over, factor in ((1, 0.875), (4, 2.0)):
        c = make_cluster(
            nodes=8, topology={"kind": "fat-tree", "hosts_per_leaf": 4, "spines": 2, "oversubscription": over}
        )
        B = c.hardware.nic.achieved_bytes_per_s
        rows.append(
            (
                f"cross-leaf all-to-all oversub {over}:1",
                timed(c, "all_to_all", 4 * 2**30, "direct"),
                factor * 4 * 2**30 / B,
            )
        )
    for model in ("flow", "analytical"):
        c = make_cluster(model, nodes=2, gpus_per_node=8)
        rows.append((f"hierarchical all-reduce 2x8 ({model})", timed(c, "all_reduce", 2**30, "hierarchical"), None))
    print(f"{'check':42s} {'simulated_s':>12s} {'closed_form_s':>14s} {'rel_error':>10s}")
    for name, sim_t, expected in rows:
        err = f"{(sim_t - expected) / expected:+.2e}" if expected else ""
        print(f"{name:42s} {sim_t:12.6f} {expected if expected else float('nan'):14.6f} {err:>10s}")


if __name__ == "__main__":
    main()
