"""The resource estimate of a `kind: cp_inference` run (sim/engine/cost.py): kernels and flows per
layer from the layer plan (sim/workloads/cp_inference/plan.py) x simulated layers x simulated CP
ranks x phases (one prefill + one per decode token per request). With `ring: auto` the costlier
ring (pass-Q, with its All2All) is counted.

Simulated layers follow sim/workloads/cp_inference/layers.py: where one rank group runs alone on
the network (a representative CP rank or cp = 1, no background flows, not a job sharing the cluster)
the first `simulate.layers` layers (default 1) run and the rest are replayed exactly at no event
cost; otherwise `simulate.layers` (default all) run. Replayed layers still record spans.
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
    asked = None if cfg.simulate.layers == "all" else cfg.simulate.layers
    job = "hosts" in type(cfg).model_fields  # a job of `workloads:` runs on a view of a shared network
    exact_replay = ranks == 1 and not cfg.background and not job  # layers.py: PhaseRun.exact_replay
    simulated = min(asked or (1 if exact_replay else layers), layers)
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
        layer_kernels = gpus * per_gpu
        ring_flows = gpus * (cp - 1) * (2 if plan.exchange_bytes else 1)
        ar_flows = 2 * ranks * ar_steps * tp if plan.allreduce_bytes > 0 else 0
        layer_flows = ring_flows + ar_flows
        kernels = simulated * layer_kernels + gpus * len(plan.final)
        flows = simulated * layer_flows
        replayed = layers - simulated
        one = Estimate(
            events=EVENTS_PER_KERNEL * kernels + EVENTS_PER_FLOW * flows,
            flows=flows + (replayed * layer_flows if exact_replay else 0),  # exact replay re-emits its flows
            simulated_flows=flows,
            peak_flows=ring_flows + tp * ranks + len(cfg.background),
            kernels=kernels,
            spans=kernels + flows + replayed * ((layer_kernels + layer_flows) if exact_replay else 3 * gpus),
        )
        est.add(one, times=phases)
    est.flows += len(cfg.background)
    return est
