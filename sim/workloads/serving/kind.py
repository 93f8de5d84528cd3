"""`kind: serving` as a `Workload` (sim/workloads/base.py): metrics with units, the resource estimate
(one event per replica iteration, iterations bounded from the requests' tokens and the token budget;
flows per iteration where a replica's traffic leaves its hosts) and plots of KV-cache use,
preemptions and queue length over time (sim/workloads/serving/plots.py)."""

from __future__ import annotations

from sim.engine.cost import EVENTS_PER_FLOW, Estimate
from sim.workloads.base import Workload
from sim.workloads.serving.config import Config
from sim.workloads.serving.workload import simulate

_P = "over finished requests, s"
METRICS = {
    "requests": "requests offered, count",
    "requests_finished": "requests that finished, count",
    "requests_rejected": "requests whose KV cache could never fit their replica, count",
    "prompt_tokens": "new prompt tokens of finished requests (prefix-cache hits excluded), count",
    "output_tokens": "output tokens of finished requests, count",
    "tokens": "prompt and output tokens of finished requests, count",
    "ttft_s": "time to first token of the first request (queueing included), s",
    "ttft_mean_s": f"mean time to first token {_P}",
    "ttft_p50_s": f"median time to first token {_P}",
    "ttft_p90_s": f"90th percentile of time to first token {_P}",
    "ttft_p99_s": f"99th percentile of time to first token {_P}",
    "tpot_mean_s": "mean time per output token after the first (requests with >= 2 output tokens), s",
    "tpot_p50_s": "median time per output token after the first, s",
    "tpot_p90_s": "90th percentile of time per output token after the first, s",
    "tpot_p99_s": "99th percentile of time per output token after the first, s",
    "ttit_p50_s": "median time between successive tokens of a request (every gap), s",
    "ttit_p90_s": "90th percentile of the time between successive tokens, s",
    "ttit_p99_s": "99th percentile of the time between successive tokens, s",
    "e2e_mean_s": f"mean end-to-end latency (arrival to last token) {_P}",
    "e2e_p50_s": f"median end-to-end latency {_P}",
    "e2e_p90_s": f"90th percentile of end-to-end latency {_P}",
    "e2e_p99_s": f"99th percentile of end-to-end latency {_P}",
    "makespan_s": "time from 0 to the last finish, s",
    "throughput_tokens_per_s": "output tokens per second of the makespan, tokens/s",
    "total_tokens_per_s": "prompt and output tokens per second of the makespan, tokens/s",
    "requests_per_s": "finished requests per second of the makespan, requests/s",
    "goodput_requests_per_s": "requests meeting every SLO per second of the makespan, requests/s",
    "slo_attainment": "requests meeting every SLO over requests offered, fraction",
    "slo": "the SLO targets (ttft_s, tpot_s, e2e_s; null: none), s",
    "kv_blocks_capacity": "KV-cache blocks of all replicas, blocks",
    "kv_utilisation_mean": "time-weighted KV blocks used over capacity, mean over replicas, fraction",
    "kv_utilisation_peak": "largest KV blocks used over capacity of any replica, fraction",
    "preemptions": "requests preempted for KV blocks (recompute or swap), count",
    "swap_bytes": "KV bytes moved between GPUs and host memory by swap preemption, bytes",
    "kv_transfer_bytes": "KV bytes moved from prefill to decode replicas (disaggregated), bytes",
    "kv_transfer_p50_s": "median KV transfer time prefill -> decode (null without), s",
    "kv_transfer_p99_s": "99th percentile KV transfer time (null without), s",
    "iterations": "continuous-batching iterations of all replicas, count",
    "mean_batch_tokens": "tokens per iteration (prefill chunk and decode tokens), mean, tokens",
    "replicas": "replicas, count",
    "gpus": "GPUs the replicas use, count",
    "model": "the model's name",
    "memory_per_gpu_bytes": "per pool: weights, activations, kv_cache (room left) and capacity per GPU, bytes",
    "per_pool": "per pool: replicas, gpus, requests, preemptions (counts), busy_fraction_mean (fraction)",
    "per_replica": "per replica: requests, iterations (counts), busy_fraction, KV utilisation (fractions), "
    "kv_blocks_peak/capacity (blocks), preemptions, queue_length_peak (counts), TTFT/TPOT/e2e (s), good_requests",
    "timeline": "over time in timeline_bins bins: t_s (bin end, s), kv_utilisation (fraction), queue_length, "
    "running (requests), preemptions (count per bin)",
}


class ServingWorkload(Workload):
    kind = "serving"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str) -> Estimate:
        n = config.arrivals.count if config.arrivals is not None else _trace_rows(config.trace)
        mean_out = config.arrivals.decode_tokens.mean if config.arrivals is not None else 256.0
        mean_prompt = config.arrivals.prompt_tokens.mean if config.arrivals is not None else 1024.0
        sched = config.scheduler
        replicas = sum(p.replicas for p in config.pools)
        # decode iterations: at least output tokens / (replicas x max_seqs); at most all of them alone
        per_batch = max(1.0, min(sched.max_seqs, n / replicas))
        iterations = n * mean_out / per_batch + n * mean_prompt / sched.max_batch_tokens + n
        cross = max((p.cp for p in config.pools), default=1) > 1
        flows_per_iteration = hardware.gpus_per_node * max(p.cp for p in config.pools) if cross else 0
        flows = iterations * flows_per_iteration + (n * hardware.gpus_per_node if config.disaggregated else 0)
        return Estimate(
            events=4.0 * iterations + 2.0 * n + EVENTS_PER_FLOW * flows,
            flows=flows,
            simulated_flows=flows,
            peak_flows=replicas * (flows_per_iteration or 1),
            spans=iterations,
            extra_bytes=n * 400.0 + iterations * 64.0,
            path="workload.arrivals.count" if config.arrivals is not None else "workload.trace",
            hint="fewer requests or output tokens, or fewer replicas",
        )

    def plots(self, result):
        m, name = result.metrics, result.scenario.name
        if not m.get("timeline"):
            return []
        from sim.workloads.serving.plots import serving_timeline  # matplotlib: only when drawing

        return [("serving_timeline", lambda **kw: serving_timeline(m, **{"title": f"{name}: serving over time", **kw}))]


def _trace_rows(path) -> int:
    try:
        with open(path) as f:
            return max(1, sum(1 for _ in f) - 1)
    except OSError:
        return 1


WORKLOAD = ServingWorkload()
