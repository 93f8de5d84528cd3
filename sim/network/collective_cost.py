"""What one collective costs the simulator, in closed form (for `Estimate`s, sim/engine/cost.py).

`schedule_shape` gives the steps, flows per step and distinct steps of the schedule that
sim/network/collectives.py builds for an operation and algorithm; `collective_cost` turns one
collective into an Estimate: every candidate of `auto` is built (its distinct steps are listed, as
`choose` builds them all), the largest one is run, cut into slices (sim/network/nccl.py). With `replay` (a flow network with even ECMP and
nothing else on the links) only the distinct steps are simulated, the rest replayed
(sim/network/replay.py).
"""

from __future__ import annotations

import math

from sim.engine.cost import EVENTS_PER_STEP, Estimate
from sim.network.collectives import nccl_candidates
from sim.network.nccl import MAX_TRANSFERS, NCCL_STEPS, SLOT_BYTES


def schedule_shape(
    op: str, algorithm: str, n: int, hosts: int, per_host: int, nbytes: float
) -> tuple[float, float, float]:
    """(steps, flows per step, distinct steps) of sim.network.collectives' schedule of `op` on n ranks."""
    if n < 2:
        return 0.0, 0.0, 0.0
    if algorithm == "hierarchical" and hosts > 1 and per_host > 1:
        steps = {"all_reduce": 2 * (per_host - 1) + 2 * (hosts - 1)}.get(op, (per_host - 1) + (hosts - 1))
        return steps, n, steps  # per-step lists are built anew: no replay
    if algorithm == "tree":
        depth = int(math.floor(math.log2(n)))
        chunks = max(1, min(64, int(nbytes // (4 << 20))))
        steps = 2 * (depth + chunks - 1)
        return steps, n - 1, steps
    if algorithm == "direct" and op == "all_to_all":
        return 1, n * (n - 1), 1
    channels = per_host if algorithm == "ring" and hosts > 1 and per_host > 1 and op != "all_to_all" else 1
    steps = {
        "all_reduce": 2 * (n - 1),
        "all_gather": n - 1,
        "reduce_scatter": n - 1,
        "send_recv": 1,
        "all_to_all": n - 1,
    }[op]
    return steps, n * channels, (n - 1 if op == "all_to_all" else 1)


def slices_bound(steps: float, nbytes: float) -> int:
    """At most how many slices the NCCL model cuts a schedule of `steps` steps into
    (sim/network/nccl.py `slices_for`, with the largest slot)."""
    if steps < 2:
        return 1
    return max(1, min(NCCL_STEPS, int(nbytes // SLOT_BYTES["LL"]), MAX_TRANSFERS // int(steps)))


def collective_cost(
    op: str, algorithm: str, n: int, hosts: int, per_host: int, nbytes: float, replay: bool
) -> Estimate:
    """One collective: every candidate of `auto` is built (listed), the largest one is run."""
    algos = nccl_candidates(op) if algorithm == "auto" else (algorithm,)
    est = Estimate()
    for algo in algos:
        if algo == "hierarchical" and (n % max(per_host, 1) or hosts < 2):
            continue
        steps, per_step, distinct = schedule_shape(op, algo, n, hosts, per_host, nbytes)
        est.listed_flows += distinct * per_step
        k = slices_bound(steps, nbytes)  # each step runs as k slices (pipelining)
        steps, distinct = steps * k, distinct * k
        run = Estimate(
            events=EVENTS_PER_STEP * steps + 10,
            flows=steps * per_step,
            simulated_flows=(distinct if replay else steps) * per_step,
            peak_flows=per_step,
            spans=steps * min(per_step, n),
        )
        if run.flows >= est.flows:
            est.events, est.flows, est.simulated_flows = run.events, run.flows, run.simulated_flows
            est.peak_flows, est.spans = run.peak_flows, run.spans
    return est
