"""`kind: cp_inference` as a `Workload` (sim/workloads/base.py): context-parallel LLM inference with
ring attention; its plot is the prefill breakdown (sim/workloads/cp_inference/plots.py)."""

from __future__ import annotations

from sim.workloads.base import Workload
from sim.workloads.cp_inference.sizing import cp_inference_estimate
from sim.workloads.cp_inference.workload import Config, simulate

METRICS = {
    "ttft_s": "time to first token of the first request (prefill, queueing included), s",
    "ttft_s_per_request": "time to first token of every request, list of s",
    "ttft_p50_s": "median time to first token over requests, s",
    "ttft_p99_s": "99th percentile of time to first token over requests, s",
    "decode_s_per_token": "mean decode step time over all decode steps (null without decode), s",
    "ttit_p50_s": "median time between decode tokens, s",
    "ttit_p99_s": "99th percentile of the time between decode tokens, s",
    "ring_algorithm": "ring of the first request's prefill (pass-kv, pass-q; none when cp = 1), name",
    "ring_algorithm_per_request": "ring of every request's prefill, list of names",
    "ring_choice": "the pass-KV / pass-Q heuristic's inputs for the first request, dict",
    "ring_choice_per_request": "the heuristic's inputs for every request's prefill (null when cp = 1), list",
    "achieved_tflop_per_s_per_gpu": "model FLOPs of the first prefill per second per GPU, TFLOP/s",
    "mfu": "achieved FLOP/s over the GPU's dense peak of `dtype`, fraction",
    "prefill_flop": "model FLOPs of the first prefill (dense GEMMs and causal attention), FLOP",
    "prefill_breakdown_s": "first prefill on GPU 0: dense, attention, merge, ring_exposed, all2all, tp_allreduce, total; s",
    "decode_breakdown_s": "the same for the first decode step, s",
    "prefill_comm_latency_s": "NCCL per-operation latency in the first prefill on GPU 0 (ring sends, all2all, "
    "TP all-reduce, total; part of the breakdown's communication, not extra), s",
    "decode_comm_latency_s": "the same for the first decode step, s",
    "prefill_breakdown_s_per_request": "every request's prefill breakdown with its latency, KV bytes read at peak "
    "HBM bandwidth (kv_read_hbm_s), kernel launches (count) with their overhead (s) and the steady ring step's "
    "attention kernel (attention_kernel: time, compute_s, kv_read_s, combine_s, bound, blocks, splits, row_fill, "
    "sm_fill, bandwidth_fill), list",
    "decode_costs": "the first decode step's kv_read_hbm_s, kernel launches, launch overhead and attention_kernel",
    "ring_steps": "per ring step of the first layer: attention_s, send_s, exposed_s; list",
    "memory_per_gpu_bytes": "weights, KV cache, activations and ring buffers per GPU, bytes",
    "queue_s_per_request": "time each request waited before its prefill, list of s",
    "prefill_s_per_request": "prefill time of each request, list of s",
    "requests": "requests served, count",
    "tokens": "prompt and decode tokens of all requests, count",
    "tp": "tensor-parallel degree, GPUs",
    "cp": "context-parallel degree, ranks",
    "model": "the model's name",
    "simulated_ranks": "fidelity: all CP ranks or one representative, name",
}


class CpInferenceWorkload(Workload):
    kind = "cp_inference"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return cp_inference_estimate(config, hardware, network_model)

    def plots(self, result):
        m, name = result.metrics, result.scenario.name
        if not m.get("prefill_breakdown_s"):
            return []
        from sim.workloads.cp_inference.plots import cp_breakdown  # matplotlib: only when drawing

        return [("cp_breakdown", lambda **kw: cp_breakdown(m, **{"title": f"{name}: prefill breakdown", **kw}))]


WORKLOAD = CpInferenceWorkload()
