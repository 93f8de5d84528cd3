"""The metrics of a `kind: serving` run (names and units in kind.py's METRICS).

Per request: TTFT = first token - arrival (queueing included); TPOT = (finish - first token) /
(output tokens - 1), for requests with at least 2 output tokens; inter-token latencies (TTIT) are
the gaps between a request's successive tokens (every gap of every request); end-to-end = finish -
arrival. A request is *good* when it finished and meets every SLO the scenario gives; goodput is
good requests per second of the run (first arrival at 0 to the last finish). Throughput counts
output tokens (and prompt tokens, in `total_tokens_per_s`) over the same span.

Over time: every replica samples (time, KV blocks used, queue length, running requests) after each
iteration; `timeline` averages them (KV utilisation: blocks used / capacity over all replicas;
queue and running: summed over replicas, the last sample of each replica in each bin carried
forward) into `timeline_bins` equal bins, and counts preemptions per bin.
"""

from __future__ import annotations

import numpy as np

from sim.workloads.cp_inference.ring_attention import percentile


def _pcts(values, prefix: str) -> dict:
    return {f"{prefix}_p{q}_s": percentile(values, q) for q in (50, 90, 99)}


def _request_rows(reqs):
    done = [r for r in reqs if r.finish_s is not None]
    ttft = [r.first_token_s - r.arrival_s for r in done]
    tpot = [(r.finish_s - r.first_token_s) / (r.generated - 1) for r in done if r.generated > 1]
    e2e = [r.finish_s - r.arrival_s for r in done]
    return done, ttft, tpot, e2e


def _good(req, slo) -> bool:
    if req.finish_s is None:
        return False
    if slo.ttft_s is not None and req.first_token_s - req.arrival_s > slo.ttft_s:
        return False
    if (
        slo.tpot_s is not None
        and req.generated > 1
        and (req.finish_s - req.first_token_s) / (req.generated - 1) > slo.tpot_s
    ):
        return False
    return not (slo.e2e_s is not None and req.finish_s - req.arrival_s > slo.e2e_s)


def timeline(run, end_s: float, bins: int) -> dict:
    edges = np.linspace(0.0, end_s, bins + 1)
    capacity = sum(r.scheduler.blocks.capacity for r in run.replicas)
    used = np.zeros(bins)
    queue = np.zeros(bins)
    running = np.zeros(bins)
    preemptions = np.zeros(bins, dtype=np.int64)
    for rep in run.replicas:
        t = np.frombuffer(rep.samples["t"], dtype=float)
        if len(t) == 0:
            continue
        # the replica's state at the end of each bin: its last sample at or before the bin's end
        idx = np.searchsorted(t, edges[1:], side="right") - 1
        ok = idx >= 0
        for name, acc in (("kv_used", used), ("queue", queue), ("running", running)):
            values = np.frombuffer(rep.samples[name], dtype=float)
            acc[ok] += values[idx[ok]]
        if len(rep.preempt_times):
            counts, _ = np.histogram(np.frombuffer(rep.preempt_times, dtype=float), bins=edges)
            preemptions += counts
    return {
        "t_s": [float(x) for x in edges[1:]],
        "kv_utilisation": [float(x) for x in used / capacity] if capacity else [0.0] * bins,
        "queue_length": [float(x) for x in queue],
        "running": [float(x) for x in running],
        "preemptions": [int(x) for x in preemptions],
    }


def _replica_row(run, rep, end_s: float, slo) -> dict:
    mine = [r for r in run.requests if r.replica == rep.index or r.prefill_replica == rep.index]
    done, ttft, tpot, e2e = _request_rows([r for r in mine if r.replica == rep.index or rep.pool.role == "prefill"])
    kv = np.frombuffer(rep.samples["kv_used"], dtype=float)
    t = np.frombuffer(rep.samples["t"], dtype=float)
    cap = rep.scheduler.blocks.capacity
    # time-weighted KV utilisation: each sample holds until the next iteration ends
    weights = np.diff(np.concatenate([[0.0], t])) if len(t) else np.zeros(0)
    return {
        "replica": rep.index,
        "pool": rep.pool.name,
        "role": rep.pool.role,
        "gpus": len(rep.devices),
        "requests": len(mine),
        "iterations": rep.iterations,
        "busy_fraction": rep.busy_s / end_s if end_s > 0 else 0.0,
        "mean_batch_tokens": rep.batch_tokens / rep.iterations if rep.iterations else 0.0,
        "kv_blocks_capacity": cap,
        "kv_utilisation_mean": float((kv * weights).sum() / (t[-1] * cap)) if len(t) and cap and t[-1] > 0 else 0.0,
        "kv_utilisation_peak": float(kv.max() / cap) if len(kv) and cap else 0.0,
        "kv_blocks_peak": int(kv.max()) if len(kv) else 0,
        "preemptions": rep.scheduler.preemptions,
        "queue_length_peak": int(max(rep.samples["queue"], default=0)),
        "ttft_p50_s": percentile(ttft, 50),
        "ttft_p99_s": percentile(ttft, 99),
        "tpot_p50_s": percentile(tpot, 50),
        "e2e_p50_s": percentile(e2e, 50),
        "good_requests": sum(_good(r, slo) for r in done),
    }


def serving_metrics(run, hardware) -> dict:
    config, reqs = run.config, run.requests
    done, ttft, tpot, e2e = _request_rows(reqs)
    end_s = max((r.finish_s for r in done), default=run.sim.now) or run.sim.now
    itl = [x for r in done for x in r.itl]
    output = sum(r.generated for r in done)
    prompt = sum(r.prompt for r in done)
    good = sum(_good(r, config.slo) for r in reqs)
    per_replica = [_replica_row(run, rep, end_s, config.slo) for rep in run.replicas]
    pools = {}
    for row in per_replica:
        p = pools.setdefault(row["pool"], {"replicas": 0, "gpus": 0, "requests": 0, "preemptions": 0, "busy": []})
        p["replicas"] += 1
        p["gpus"] += row["gpus"]
        p["preemptions"] += row["preemptions"]
        p["busy"].append(row["busy_fraction"])
        if row["role"] != "decode":
            p["requests"] += row["requests"]
    for p in pools.values():
        p["busy_fraction_mean"] = float(np.mean(p.pop("busy")))
    cap = sum(r.scheduler.blocks.capacity for r in run.replicas)
    kv_peak = max((row["kv_utilisation_peak"] for row in per_replica), default=0.0)
    mem = {p.name: config.memory_per_gpu(p, hardware) for p in config.pools}
    return {
        "requests": len(reqs),
        "requests_finished": len(done),
        "requests_rejected": run.rejected,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "tokens": prompt + output,
        "ttft_s": ttft[0] if ttft else None,
        "ttft_mean_s": float(np.mean(ttft)) if ttft else None,
        **_pcts(ttft, "ttft"),
        "tpot_mean_s": float(np.mean(tpot)) if tpot else None,
        **_pcts(tpot, "tpot"),
        **_pcts(itl, "ttit"),
        "e2e_mean_s": float(np.mean(e2e)) if e2e else None,
        **_pcts(e2e, "e2e"),
        "makespan_s": end_s,
        "throughput_tokens_per_s": output / end_s if end_s > 0 else 0.0,
        "total_tokens_per_s": (prompt + output) / end_s if end_s > 0 else 0.0,
        "requests_per_s": len(done) / end_s if end_s > 0 else 0.0,
        "goodput_requests_per_s": good / end_s if end_s > 0 else 0.0,
        "slo_attainment": good / len(reqs) if reqs else 0.0,
        "slo": config.slo.model_dump(),
        "kv_blocks_capacity": cap,
        "kv_utilisation_mean": float(np.mean([row["kv_utilisation_mean"] for row in per_replica])),
        "kv_utilisation_peak": kv_peak,
        "preemptions": sum(rep.scheduler.preemptions for rep in run.replicas),
        "swap_bytes": sum(rep.swap_bytes for rep in run.replicas),
        "kv_transfer_bytes": run.kv_transfer_bytes,
        "kv_transfer_p50_s": percentile(run.kv_transfer_s, 50),
        "kv_transfer_p99_s": percentile(run.kv_transfer_s, 99),
        "iterations": sum(rep.iterations for rep in run.replicas),
        "mean_batch_tokens": (
            sum(rep.batch_tokens for rep in run.replicas) / max(1, sum(rep.iterations for rep in run.replicas))
        ),
        "replicas": len(run.replicas),
        "gpus": sum(len(rep.devices) for rep in run.replicas),
        "model": config.model.name,
        "memory_per_gpu_bytes": mem,
        "per_pool": pools,
        "per_replica": per_replica,
        "timeline": timeline(run, end_s, config.timeline_bins),
    }
