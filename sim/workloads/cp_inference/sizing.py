"""The resource estimate of a `kind: cp_inference` run (sim/engine/cost.py): kernels and flows per
layer from the layer plan (sim/workloads/cp_inference/plan.py) x simulated layers x simulated CP
ranks x phases (one prefill + one per decode token per request). With `ring: auto` the costlier
ring (pass-Q, with its All2All) is counted.
"""

from __future__ import annotations

from sim.engine.cost import EVENTS_PER_FLOW, EVENTS_PER_KERNEL, Estimate
from sim.workloads.cp_inference.plan import Phase, plan_layer
from sim.workloads.cp_inference.workload import Request


def cp_inference_estimate(cfg, hw, network_model: str) -> Estimate:
    tp, cp = cfg.degrees(hw)
    ranks = 1 if (cfg.representative(hw) and cp > 1) else cp
    if cfg.arrivals is not None:
        a = cfg.arrivals
        reqs = [Request(prompt_tokens=a.prompt_tokens, cached_tokens=a.cached_tokens, decode_tokens=a.decode_tokens)]
        count = a.count
    else:
        reqs, count = list(cfg.requests), 1
    first = reqs[0]
    ring = "pass-kv" if cfg.ring == "pass-kv" else "pass-q"  # auto: count the costlier (All2All too)
    prefill, decode = (
        plan_layer(cfg.model, hw.gpu, tp, cp, phase, ring, cfg.precision)
        for phase in (
            Phase("prefill", first.prompt_tokens, first.cached_tokens),
            Phase("decode", 1, first.prompt_tokens + first.cached_tokens),
        )
    )
    layers = prefill.layers
    simulated = layers if cfg.simulate.layers == "all" else min(cfg.simulate.layers, layers)
    est = Estimate(
        path="workload.requests" if cfg.arrivals is None else "workload.arrivals.count",
        hint="fewer requests or decode_tokens, simulate: {layers: 1} or {ranks: representative}, "
        "or network_model: analytical",
    )
    ar_steps = 2 * (tp - 1) if tp > 1 else 0
    for plan, phases in ((prefill, count * len(reqs)), (decode, count * sum(r.decode_tokens for r in reqs))):
        if not phases:
            continue
        per_gpu = (
            len(plan.pre_attention)
            + sum(len(s) for s in plan.ring_steps)
            + len(plan.post_exchange)
            + len(plan.out_proj)
            + len(plan.ffn)
        )
        gpus = ranks * tp
        kernels = gpus * (simulated * per_gpu + len(plan.final))
        ring_flows = gpus * (cp - 1) * (2 if plan.exchange_bytes else 1)
        ar_flows = 2 * ranks * ar_steps * tp if plan.allreduce_bytes > 0 else 0
        flows = simulated * (ring_flows + ar_flows)
        one = Estimate(
            events=EVENTS_PER_KERNEL * kernels + EVENTS_PER_FLOW * flows,
            flows=flows,
            simulated_flows=flows,
            peak_flows=ring_flows + tp * ranks + len(cfg.background),
            kernels=kernels,
            spans=kernels + flows + 3 * (layers - simulated) * gpus,
        )
        est.add(one, times=phases)
    est.flows += len(cfg.background)
    return est
