"""`kind: cp_inference` — context-parallel LLM inference with ring attention (arXiv 2411.01783).

The cluster serves batch-1 requests first come, first served: each request's prefill of
`prompt_tokens` new tokens on top of `cached_tokens` already in a persistent KV cache, then
`decode_tokens` decode steps, then the next request. TP inside a group of `tp` GPUs (multi-node TP
when tp > gpus_per_node), CP across the `cp` groups (tp x cp = the cluster's GPUs). Prefill uses
the load-balanced ring (`ring: pass-kv | pass-q | auto`, see ring_attention.py for the sharding
and Algorithm 1); decode uses a pass-Q ring per step over round-robin KV shards. Kernels, ring
sends, All2All and TP all-reduces run on device streams and network flows (cp_layers.py).

Fields: `model` (preset or inline TransformerSpec), `dtype`, `ffn_dtype` (e.g. fp8: the paper's FP8
row-wise FFN), `attention_dtype` (attention, KV cache, ring messages), `parallelism: {tp, cp}` (tp
defaults to gpus_per_node, cp to the rest), `ring`, `requests` (list) or `arrivals` (Poisson, from
the seeded substream "arrivals"), `allreduce_algorithm`, `background` (point-to-point flows that
share the links from t = 0), `simulate: {ranks, layers}` (fidelity: see cp_layers.py; `ranks: auto`
simulates one representative CP rank only where every rank sees the same network; where one rank
group runs alone, identical layers are replayed exactly, cp_replay.py, so `layers: all` costs about
one layer of simulation).

Memory check (at load): weights + KV cache + activations + ring buffers per GPU against the GPU's
memory; a model that does not fit is a one-line error with the numbers.

Metrics: `ttft_s` (first request), `ttft_s_per_request`, `ttft_p50_s`, `ttft_p99_s`,
`decode_s_per_token` (mean over all decode steps; null without decode), `ttit_p50_s`, `ttit_p99_s`,
`ring_algorithm` (first request; "none" when cp = 1), `ring_algorithm_per_request`, `ring_choice`
(the heuristic's inputs), `achieved_tflop_per_s_per_gpu` and `mfu` (model FLOPs of the first
prefill - dense GEMMs and causal attention, no padding - per second per GPU; MFU against the peak of
`dtype`), `prefill_breakdown_s` and `decode_breakdown_s` (GPU 0: dense, attention, merge,
ring_exposed, all2all, tp_allreduce; they add up to total), `ring_steps` (first layer),
`prefill_breakdown_s_per_request` (each prefill's breakdown with its `comm_latency` parts,
`kv_read_hbm_s`, `kernel_launches`, `launch_overhead_s` and `attention_kernel`: what dominates a partial
prefill against a long persistent KV cache), `decode_costs` (the same terms for the first decode step),
`ring_choice_per_request` (each prefill's `ring_choice`), `prefill_comm_latency_s` and
`decode_comm_latency_s` (GPU 0, one phase: NCCL's per-operation software latency charged to
ring_sends, all2all and tp_allreduce - sim/network/operation_cost.py - contained in the breakdown's
ring_exposed / all2all / tp_allreduce where it is not hidden under attention),
`memory_per_gpu_bytes`, `queue_s_per_request`, `prefill_s_per_request`, `tokens` (prompt and decode
tokens of all requests; energy_per_token_j is the run's energy over them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from hardware_models.gpu import DTYPE_BYTES, Dtype
from hardware_models.strict import StrictModel
from hardware_models.units import Bytes, Seconds
from sim.errors import ScenarioError
from sim.models.transformer import (
    TensorShard,
    TransformerSpec,
    activation_bytes,
    causal_keys_seen,
    resolve_model,
    tp_problem,
)
from sim.network.operation_cost import operation_cost
from sim.workloads.base import WorkloadBase
from sim.workloads.cp_inference.latency_parts import LATENCY_PARTS
from sim.workloads.cp_inference.layers import CpInferenceLayout, PhaseRun
from sim.workloads.cp_inference.plan import Phase, Precision, plan_layer
from sim.workloads.cp_inference.ring_attention import (
    choose_ring,
    local_cached,
    padded_tokens,
    percentile,
    ring_messages,
)

SYMMETRIC_TOPOLOGIES = ("single-switch", "rail-optimized")


class CpInferenceParallelism(StrictModel):
    tp: int | None = Field(None, ge=1, description="tensor parallel degree (default: gpus_per_node)")
    cp: int | None = Field(None, ge=1, description="context parallel degree (default: GPUs / tp)")


class Request(StrictModel):
    prompt_tokens: int = Field(ge=1, description="new tokens to prefill (T)")
    cached_tokens: int = Field(0, ge=0, description="tokens already in the persistent KV cache (P)")
    decode_tokens: int = Field(0, ge=0)
    arrival_s: Seconds | None = Field(None, ge=0, description="default: 0")


class Arrivals(StrictModel):
    rate_per_s: float = Field(gt=0)
    count: int = Field(ge=1)
    prompt_tokens: int = Field(ge=1)
    cached_tokens: int = Field(0, ge=0)
    decode_tokens: int = Field(0, ge=0)


class Background(StrictModel):
    src: int = Field(ge=0, description="source rank")
    dst: int = Field(ge=0, description="destination rank")
    bytes: Bytes = Field(gt=0)


class CpInferenceFidelity(StrictModel):
    ranks: Literal["auto", "all", "representative"] = "auto"
    layers: Literal["all"] | int = Field("all", description="layers simulated per phase (the rest replayed)")

    @field_validator("layers")
    @classmethod
    def _positive(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError("layers must be 'all' or an integer >= 1")
        return v


class Config(WorkloadBase):
    kind: Literal["cp_inference"]
    model: TransformerSpec
    dtype: Dtype = "bf16"
    ffn_dtype: Dtype | None = Field(None, description="FFN GEMM dtype (default: dtype)")
    attention_dtype: Literal["bf16", "fp16", "fp8"] = "bf16"
    parallelism: CpInferenceParallelism = CpInferenceParallelism()
    ring: Literal["auto", "pass-kv", "pass-q"] = "auto"
    requests: list[Request] = Field(default_factory=list)
    arrivals: Arrivals | None = None
    allreduce_algorithm: Literal["auto", "ring", "tree", "hierarchical"] = "auto"
    background: list[Background] = Field(default_factory=list)
    simulate: CpInferenceFidelity = CpInferenceFidelity()

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v):
        return resolve_model(v) if isinstance(v, str) else v

    # ---- derived -------------------------------------------------------------------------------
    @property
    def precision(self) -> Precision:
        return Precision(self.dtype, self.ffn_dtype or self.dtype, self.attention_dtype)

    def degrees(self, hardware) -> tuple[int, int]:
        tp = self.parallelism.tp or hardware.gpus_per_node
        cp = self.parallelism.cp or max(1, hardware.num_gpus // tp)
        return tp, cp

    def representative(self, hardware) -> bool:
        """Whether one CP rank stands for all: asked for, or (auto) where every rank sees the same network."""
        if self.simulate.ranks != "auto":
            return self.simulate.ranks == "representative"
        return self.symmetric(hardware)

    def symmetric(self, hardware) -> bool:
        """Every CP rank sees the same network: whole hosts per rank, a flat non-blocking fabric, no
        background flows."""
        tp, _ = self.degrees(hardware)
        whole_hosts = tp % hardware.gpus_per_node == 0 or hardware.nodes == 1
        topo = hardware.topology
        flat = topo.kind in SYMMETRIC_TOPOLOGIES and (topo.oversubscription or 1.0) <= 1.0
        return whole_hosts and flat and not self.background

    def request_list(self, rng) -> list[Request]:
        if self.arrivals is None:
            return sorted(self.requests, key=lambda r: r.arrival_s or 0.0)
        a = self.arrivals
        times = rng.exponential(1.0 / a.rate_per_s, a.count).cumsum()
        return [
            Request(
                prompt_tokens=a.prompt_tokens,
                cached_tokens=a.cached_tokens,
                decode_tokens=a.decode_tokens,
                arrival_s=float(t),
            )
            for t in times
        ]

    def memory_per_gpu(self, hardware) -> dict[str, float]:
        """Bytes per GPU for the most demanding request: weights, KV cache, activations (+ ring buffers)."""
        tp, cp = self.degrees(hardware)
        shard, p = TensorShard(self.model, tp), self.precision
        reqs = self.requests or [
            Request(
                prompt_tokens=self.arrivals.prompt_tokens,
                cached_tokens=self.arrivals.cached_tokens,
                decode_tokens=self.arrivals.decode_tokens,
            )
        ]
        act_b, kv_b = DTYPE_BYTES[p.activation_dtype], DTYPE_BYTES[p.attention_dtype]
        context = max(padded_tokens(r.prompt_tokens, cp) + r.cached_tokens + r.decode_tokens for r in reqs)
        tokens_local = max(padded_tokens(r.prompt_tokens, cp) // cp for r in reqs)
        kv_step = max(padded_tokens(r.prompt_tokens, cp) // cp + local_cached(r.cached_tokens, cp) for r in reqs)
        msg = ring_messages(tokens_local, kv_step, shard.q_heads, shard.kv_heads, shard.head_dim, kv_b)
        ring_buffers = 0.0 if cp == 1 else max(2 * msg.kv, 2 * msg.q + (cp - 1) * msg.partial_output)
        out = {
            "weights": shard.weight_bytes(p.dtype, p.ffn_dtype, p.activation_dtype),
            "kv_cache": local_cached(context, cp) * shard.kv_bytes_per_token(p.attention_dtype),
            "activations": activation_bytes(shard, tokens_local, act_b) + ring_buffers + self.model.vocab / tp * 4,
        }
        out["total"] = sum(out.values())
        out["capacity"] = float(hardware.gpu.memory)
        return out

    # ---- load-time checks ----------------------------------------------------------------------
    def check(self, hardware) -> None:
        if bool(self.requests) == (self.arrivals is not None):
            raise ScenarioError(
                "give either requests (a list) or arrivals (Poisson), not both or neither",
                path="workload.requests",
                value=len(self.requests),
            )
        tp, cp = self.degrees(hardware)
        n = hardware.num_gpus
        if tp * cp != n:
            raise ScenarioError(
                f"tp x cp = {tp} x {cp} = {tp * cp} must equal the cluster's {n} GPUs "
                f"({hardware.nodes} nodes x {hardware.gpus_per_node})",
                path="workload.parallelism",
                value=self.parallelism.model_dump(),
            )
        g = hardware.gpus_per_node
        if tp % g and g % tp:
            raise ScenarioError(
                f"tp must divide gpus_per_node ({g}) or be a multiple of it", path="workload.parallelism.tp", value=tp
            )
        problem = tp_problem(self.model, tp)
        if problem:
            raise ScenarioError(problem, path="workload.parallelism.tp", value=tp)
        p = self.precision
        for key, dtype in (("dtype", p.dtype), ("ffn_dtype", p.ffn_dtype), ("attention_dtype", p.attention_dtype)):
            if getattr(hardware.gpu.peak, dtype, None) is None:
                supported = [d for d in DTYPE_BYTES if getattr(hardware.gpu.peak, d, None) is not None]
                raise ScenarioError(
                    f"{hardware.gpu.name} has no {dtype} peak; supported: {', '.join(supported)}",
                    path=f"workload.{key}",
                    value=dtype,
                )
        for i, f in enumerate(self.background):
            if f.src >= n or f.dst >= n or f.src == f.dst:
                raise ScenarioError(
                    f"src and dst must be distinct ranks in 0..{n - 1}",
                    path=f"workload.background.{i}",
                    value=f.model_dump(),
                )
        if self.simulate.ranks == "representative" and cp > 1 and not self.symmetric(hardware):
            raise ScenarioError(
                "representative ranks need every CP rank to see the same network: whole hosts per "
                f"CP rank, a {' or '.join(SYMMETRIC_TOPOLOGIES)} topology without oversubscription "
                "and no background flows",
                path="workload.simulate.ranks",
                value="representative",
            )
        if isinstance(self.simulate.layers, int) and self.background:
            raise ScenarioError(
                "layer replay assumes identical layers; background flows make them differ",
                path="workload.simulate.layers",
                value=self.simulate.layers,
            )
        mem = self.memory_per_gpu(hardware)
        if mem["total"] > mem["capacity"]:
            gb = {k: v / 1e9 for k, v in mem.items()}
            raise ScenarioError(
                f"needs {gb['total']:.1f} GB per GPU (weights {gb['weights']:.1f} + KV cache {gb['kv_cache']:.1f} + "
                f"activations {gb['activations']:.1f}) but {hardware.gpu.name} has {gb['capacity']:.1f} GB; use fp8 "
                f"weights (dtype/ffn_dtype), a larger tp or cp, or a GPU with more memory",
                path="workload.model",
                value=self.model.name,
            )


# ---------------------------------------------------------------------------------------------
# simulation


def _phase_plan(config: Config, hardware, phase: Phase, ring: str):
    tp, cp = config.degrees(hardware)
    return plan_layer(config.model, hardware.gpu, tp, cp, phase, ring, config.precision)


def choose_prefill_ring(config: Config, cluster, layout: CpInferenceLayout, phase: Phase):
    """The ring for a prefill: forced, or Algorithm 1 (+ All2All term) from the model's estimates."""
    cp = layout.cp
    if cp == 1:
        return "none", None
    kv_plan = _phase_plan(config, cluster.hardware, phase, "pass-kv")
    net, src, dst = cluster.network, layout.device(0, 0).node, layout.device(0, 1).node
    msgs = kv_plan.messages
    step = kv_plan.attention_step
    ring_group = [layout.device(0, c).node for c in range(cp)]

    def latency(op: str, group: list[str], nbytes: float) -> float:  # NCCL's per-operation latency
        return operation_cost(net, op, group, nbytes).software_latency_s

    choice = choose_ring(
        new_tokens=padded_tokens(phase.new_tokens, cp),
        cached_tokens=phase.cached_tokens,
        cp=cp,
        heads=config.model.heads,
        kv_heads=config.model.kv_heads,
        elem_bytes=DTYPE_BYTES[config.attention_dtype],
        attention_step_s=step.duration_s,
        attention_step_flop=step.flop,
        kv_send_s=net.estimate_time_s(src, dst, msgs.kv),
        q_send_s=net.estimate_time_s(src, dst, msgs.q),
        all2all_s=net.estimate_time_s(src, dst, (cp - 1) * msgs.partial_output)
        + latency("all_to_all", ring_group, cp * msgs.partial_output),
        kv_message_bytes=msgs.kv,
        send_latency_s=latency("send_recv", [src, dst], msgs.q),
    )
    ring = choice.ring if config.ring == "auto" else config.ring
    return ring, choice


def _prefill_flop(model: TransformerSpec, req: Request) -> float:
    """Useful model FLOPs of a prefill: dense GEMMs of every new token, causal attention, LM head."""
    return (
        model.dense_flop_per_token() * req.prompt_tokens
        + model.attention_flop(causal_keys_seen(req.prompt_tokens, req.cached_tokens))
        + 2.0 * model.vocab * model.hidden
    )


def simulate(sim, cluster, config: Config):
    hw = cluster.hardware
    tp, cp = config.degrees(hw)
    layout = CpInferenceLayout(cluster, tp, cp, config.representative(hw))
    layers = None if config.simulate.layers == "all" else config.simulate.layers
    net = cluster.network
    # layers repeat exactly when nothing else shares the network (cp_replay.py): no background
    # flows, no other job (a job's view of a shared cluster has a topology view, not the network's)
    exact = not config.background and net.topology is cluster.topology
    for f in config.background:
        net.transfer(cluster.devices[f.src].node, cluster.devices[f.dst].node, f.bytes, name="background")
    rows, ttits = [], []
    first = {}
    for i, req in enumerate(config.request_list(sim.rng("arrivals"))):
        arrival = req.arrival_s or 0.0
        if sim.now < arrival:
            yield sim.timeout(arrival - sim.now)
        start = sim.now
        phase = Phase("prefill", req.prompt_tokens, req.cached_tokens)
        ring, choice = choose_prefill_ring(config, cluster, layout, phase)
        run = PhaseRun(
            sim, net, layout, _phase_plan(config, hw, phase, ring), layers, config.allreduce_algorithm, exact
        )
        breakdown = yield from run.run()
        row = {
            "breakdown": {**breakdown, **_phase_costs(run.plan, hw.gpu), "comm_latency": _latency_parts(run.latency)},
            "arrival_s": arrival,
            "queue_s": start - arrival,
            "prefill_s": sim.now - start,
            "ttft_s": sim.now - arrival,
            "ring": ring,
            "choice": choice.as_dict() if choice else None,
            "tokens": req.prompt_tokens + req.decode_tokens,
        }
        if i == 0:
            first = {
                "breakdown": breakdown,
                "latency": run.latency,
                "steps": run.ring_step_table(),
                "choice": choice,
                "req": req,
            }
        decode = []
        for t in range(req.decode_tokens):
            step_start = sim.now
            plan = _phase_plan(config, hw, Phase("decode", 1, req.prompt_tokens + req.cached_tokens + t), ring)
            drun = PhaseRun(sim, net, layout, plan, layers, config.allreduce_algorithm, exact)
            bd = yield from drun.run()
            decode.append(sim.now - step_start)
            if i == 0 and t == 0:
                first["decode_breakdown"] = bd
                first["decode_costs"] = _phase_costs(plan, hw.gpu)
                first["decode_latency"] = drun.latency
        ttits += decode
        rows.append(row)
    return _metrics(config, hw, rows, ttits, first, layout)


def _metrics(config: Config, hw, rows: list[dict], ttits: list[float], first: dict, layout: CpInferenceLayout) -> dict:
    ttfts = [r["ttft_s"] for r in rows]
    gpus = hw.num_gpus
    flop = _prefill_flop(config.model, first["req"])
    achieved = flop / (rows[0]["prefill_s"] * gpus)
    peak = hw.gpu.peak_flop_per_s(config.dtype)
    tp, cp = config.degrees(hw)
    metrics = {
        "ttft_s": ttfts[0],
        "ttft_s_per_request": ttfts,
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p99_s": percentile(ttfts, 99),
        "decode_s_per_token": sum(ttits) / len(ttits) if ttits else None,
        "ttit_p50_s": percentile(ttits, 50),
        "ttit_p99_s": percentile(ttits, 99),
        "ring_algorithm": rows[0]["ring"],
        "ring_algorithm_per_request": [r["ring"] for r in rows],
        "ring_choice": first["choice"].as_dict() if first["choice"] else None,
        "ring_choice_per_request": [r["choice"] for r in rows],
        "achieved_tflop_per_s_per_gpu": achieved / 1e12,
        "mfu": achieved / peak,
        "prefill_flop": flop,
        "prefill_breakdown_s": first["breakdown"],
        "decode_breakdown_s": first.get("decode_breakdown"),
        "decode_costs": first.get("decode_costs"),
        "prefill_breakdown_s_per_request": [r["breakdown"] for r in rows],
        "prefill_comm_latency_s": _latency_parts(first["latency"]),
        "decode_comm_latency_s": _latency_parts(first["decode_latency"]) if "decode_latency" in first else None,
        "ring_steps": first["steps"],
        "queue_s_per_request": [r["queue_s"] for r in rows],
        "prefill_s_per_request": [r["prefill_s"] for r in rows],
        "requests": len(rows),
        "tokens": sum(r["tokens"] for r in rows),
        "tp": tp,
        "cp": cp,
        "model": config.model.name,
        "simulated_ranks": "representative" if layout.representative else "all",
        "memory_per_gpu_bytes": config.memory_per_gpu(hw),
    }
    return metrics


def _latency_parts(latency: dict[str, float]) -> dict[str, float]:
    """NCCL software latency of a phase on GPU 0 by operation kind (part of ring_exposed, all2all
    and tp_allreduce of the breakdown, not an extra term), and its total."""
    parts = {k: latency.get(k, 0.0) for k in LATENCY_PARTS}
    return {**parts, "total": sum(parts.values())}


def _phase_costs(plan, gpu) -> dict[str, float]:
    """What bounds a phase on GPU 0, next to its breakdown: `kv_read_hbm_s`, the KV blocks the ring
    steps' attention reads at peak HBM bandwidth (the attention's floor: a short query block against
    a long cache is this read, not FLOPs); `kernel_launches` and `launch_overhead_s` (the hardware
    model's per-kernel launch overhead, contained in the kernel times; a split-KV attention step adds its
    combine kernel); `attention_kernel`, one steady ring step's attention kernel on one layer
    (hardware_models/attention.py): time, compute and KV-read terms, combine, which bounds it, thread
    blocks, KV splits, row and SM fill."""
    kv_bytes = 2.0 * plan.kv_tokens_step * plan.kv_heads_local * plan.head_dim * plan.kv_elem_bytes
    per_layer = (
        len(plan.pre_attention)
        + sum(len(step) for step in plan.ring_steps)
        + len(plan.post_exchange)
        + len(plan.out_proj)
        + len(plan.ffn)
    )
    splits = sum(c.occupancy.splits > 1 for c in plan.attention_costs)  # a split step adds its combine kernel
    launches = plan.layers * (per_layer + splits) + len(plan.final)
    return {
        "kv_read_hbm_s": plan.layers * len(plan.ring_steps) * kv_bytes / gpu.memory_bandwidth,
        "kernel_launches": float(launches),
        "launch_overhead_s": launches * gpu.launch_overhead,
        "attention_kernel": plan.attention_cost.as_dict(),
    }
