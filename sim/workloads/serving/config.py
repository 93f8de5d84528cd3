"""The `kind: serving` scenario section: model, replica pools, scheduler, router, requests and SLOs.

- `pools`: groups of identical replicas, each a TP x CP group of GPUs (tp x cp GPUs, whole hosts when
  cp > 1 or tp >= gpus_per_node), placed on the cluster in order (pool 0's replicas first). `role`:
  `mixed` (prefill and decode on the same replica), or `prefill` / `decode` (disaggregated: a request
  is prefilled in a prefill pool, its KV cache moves over the network to a decode pool).
  `min_prompt_tokens`: with `router: prompt-length`, the pool of the largest threshold at most the
  prompt takes it (long prompts to CP replicas).
- `scheduler`: the per-replica continuous batching (sim/workloads/serving/scheduler.py).
- `arrivals` (Poisson or gamma, lengths from distributions, seeded substream "arrivals") or `trace`
  (a CSV: arrival_s, prompt_tokens, decode_tokens[, cached_tokens]).
- `slo`: per-request targets for goodput (a request is good when it meets every target given).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from hardware_models.gpu import DTYPE_BYTES, Dtype
from hardware_models.strict import StrictModel
from hardware_models.units import Seconds
from sim.errors import ScenarioError
from sim.models.moe import MoETransformerSpec, moe_weight_bytes, resolve_any_model
from sim.models.transformer import TensorShard, TransformerSpec, activation_bytes, tp_problem
from sim.workloads.base import WorkloadBase
from sim.workloads.cp_inference.plan import Precision


class Pool(StrictModel):
    name: str = Field(description="pool name (metrics per pool and replica)")
    replicas: int = Field(1, ge=1, description="replicas in the pool")
    tp: int | None = Field(None, ge=1, description="tensor-parallel degree (default: gpus_per_node)")
    cp: int = Field(1, ge=1, description="context-parallel degree (ring attention across CP ranks)")
    role: Literal["mixed", "prefill", "decode"] = Field("mixed", description="disaggregation role")
    min_prompt_tokens: int = Field(0, ge=0, description="router prompt-length: smallest prompt this pool takes")


class Scheduler(StrictModel):
    max_batch_tokens: int = Field(8192, ge=1, description="token budget of one iteration (prefill + decode)")
    max_seqs: int = Field(256, ge=1, description="requests running at once on a replica")
    chunked_prefill: bool = Field(True, description="split prompts into budget-sized chunks (Sarathi)")
    block_size: int = Field(16, ge=1, description="KV-cache block, tokens (per CP rank)")
    gpu_memory_fraction: float = Field(0.9, gt=0, le=1, description="HBM share for weights + activations + KV")
    preemption: Literal["recompute", "swap"] = Field("recompute", description="what a preempted request does")


class Lengths(StrictModel):
    dist: Literal["fixed", "uniform", "exponential", "lognormal"] = "fixed"
    mean: float = Field(gt=0, description="mean tokens")
    sigma: float = Field(0.5, gt=0, description="lognormal: sigma of the log")
    min: int = Field(1, ge=0, description="smallest value (clipped)")
    max: int | None = Field(None, ge=1, description="largest value (clipped; uniform: upper end)")


def _lengths(v):
    return {"dist": "fixed", "mean": v} if isinstance(v, (int, float)) and not isinstance(v, bool) else v


class RequestArrivals(StrictModel):
    process: Literal["poisson", "gamma"] = "poisson"
    rate_per_s: float = Field(gt=0, description="mean requests per second")
    cv: float = Field(1.0, gt=0, description="gamma: coefficient of variation of inter-arrival times")
    count: int = Field(ge=1, description="requests")
    prompt_tokens: Lengths = Field(description="new prompt tokens: a number or {dist, mean, ...}")
    decode_tokens: Lengths = Field(description="output tokens: a number or {dist, mean, ...}")
    cached_tokens: Lengths | None = Field(None, description="prefix-cache hits per request (default none)")

    _num = field_validator("prompt_tokens", "decode_tokens", "cached_tokens", mode="before")(
        classmethod(lambda cls, v: _lengths(v))
    )


class Slo(StrictModel):
    ttft_s: Seconds | None = Field(None, gt=0, description="time to first token target, s")
    tpot_s: Seconds | None = Field(None, gt=0, description="time per output token target (mean after the first), s")
    e2e_s: Seconds | None = Field(None, gt=0, description="end-to-end latency target, s")


class Config(WorkloadBase):
    kind: Literal["serving"]
    model: TransformerSpec = Field(description="preset (llama3-70b, mixtral-8x7b, ...) or inline; MoE: with experts")
    dtype: Dtype = "bf16"
    ffn_dtype: Dtype | None = Field(None, description="FFN / expert GEMM dtype (default: dtype)")
    attention_dtype: Literal["bf16", "fp16", "fp8"] = Field("bf16", description="attention and KV cache")
    pools: list[Pool] = Field(min_length=1)
    scheduler: Scheduler = Scheduler()
    router: Literal["round-robin", "least-loaded", "prompt-length"] = "least-loaded"
    ring: Literal["auto", "pass-kv", "pass-q"] = "auto"
    allreduce_algorithm: Literal["auto", "ring", "tree", "hierarchical"] = "auto"
    arrivals: RequestArrivals | None = None
    trace: str | None = Field(None, description="CSV: arrival_s, prompt_tokens, decode_tokens[, cached_tokens]")
    slo: Slo = Slo()
    timeline_bins: int = Field(50, ge=1, le=1000, description="points of the over-time metrics")

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v):
        return resolve_any_model(v) if isinstance(v, (str, dict)) else v

    @field_validator("trace")
    @classmethod
    def _trace(cls, v, info: ValidationInfo):
        from pathlib import Path

        base_dir = (info.context or {}).get("base_dir")
        if v and base_dir and not Path(v).is_absolute() and not Path(v).exists() and (Path(base_dir) / v).exists():
            return str(Path(base_dir) / v)
        return v

    @model_validator(mode="after")
    def _names(self) -> Config:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be distinct: {names}")
        return self

    # ---- derived -------------------------------------------------------------------------------
    @property
    def precision(self) -> Precision:
        return Precision(self.dtype, self.ffn_dtype or self.dtype, self.attention_dtype)

    @property
    def disaggregated(self) -> bool:
        return any(p.role != "mixed" for p in self.pools)

    def tp_of(self, pool: Pool, hardware) -> int:
        return pool.tp or hardware.gpus_per_node

    def gpus(self, hardware) -> int:
        return sum(p.replicas * self.tp_of(p, hardware) * p.cp for p in self.pools)

    def memory_per_gpu(self, pool: Pool, hardware) -> dict[str, float]:
        """Bytes per GPU of a replica of `pool`: weights, activations of a full token budget, and the
        KV cache: what the HBM share leaves."""
        tp, p = self.tp_of(pool, hardware), self.precision
        shard = TensorShard(self.model, tp)
        act_b = DTYPE_BYTES[p.activation_dtype]
        weights = moe_weight_bytes(shard, tp, p.dtype, p.ffn_dtype, p.activation_dtype)
        rows = self.scheduler.max_batch_tokens
        activations = activation_bytes(shard, rows, act_b) + self.model.vocab / tp * 4 * self.scheduler.max_seqs
        budget = float(hardware.gpu.memory) * self.scheduler.gpu_memory_fraction
        return {
            "weights": weights,
            "activations": activations,
            "kv_cache": budget - weights - activations,
            "capacity": float(hardware.gpu.memory),
        }

    def kv_bytes_per_token_per_gpu(self, pool: Pool, hardware) -> float:
        return TensorShard(self.model, self.tp_of(pool, hardware)).kv_bytes_per_token(self.attention_dtype)

    # ---- load-time checks ----------------------------------------------------------------------
    def check(self, hardware) -> None:
        if (self.arrivals is None) == (self.trace is None):
            raise ScenarioError(
                "give either arrivals (poisson/gamma) or trace (a CSV file), not both or neither",
                path="workload.arrivals",
                value=None if self.arrivals is None else "arrivals and trace",
            )
        if self.trace is not None:
            from sim.workloads.serving.requests import read_trace

            read_trace(self.trace)  # one-line errors on a missing or malformed file
        g = hardware.gpus_per_node
        for i, pool in enumerate(self.pools):
            tp = self.tp_of(pool, hardware)
            if tp % g and g % tp:
                raise ScenarioError(
                    f"tp must divide gpus_per_node ({g}) or be a multiple of it",
                    path=f"workload.pools.{i}.tp",
                    value=tp,
                )
            if pool.cp > 1 and tp % g:
                raise ScenarioError(
                    f"a CP replica spans whole hosts: tp must be a multiple of gpus_per_node ({g}) when cp > 1",
                    path=f"workload.pools.{i}.tp",
                    value=tp,
                )
            problem = tp_problem(self.model, tp)
            if problem:
                raise ScenarioError(problem, path=f"workload.pools.{i}.tp", value=tp)
            if isinstance(self.model, MoETransformerSpec) and self.model.experts % tp and tp % self.model.experts:
                raise ScenarioError(
                    f"expert parallelism over the TP group: tp must divide the {self.model.experts} experts",
                    path=f"workload.pools.{i}.tp",
                    value=tp,
                )
            mem = self.memory_per_gpu(pool, hardware)
            block = self.scheduler.block_size * self.kv_bytes_per_token_per_gpu(pool, hardware)
            if mem["kv_cache"] < block:
                gb = {k: v / 1e9 for k, v in mem.items()}
                raise ScenarioError(
                    f"no room for the KV cache: weights {gb['weights']:.1f} GB + activations "
                    f"{gb['activations']:.1f} GB per GPU exceed {self.scheduler.gpu_memory_fraction:g} of "
                    f"{hardware.gpu.name}'s {gb['capacity']:.1f} GB; use a larger tp, fp8 weights or a smaller "
                    "max_batch_tokens",
                    path=f"workload.pools.{i}",
                    value=pool.name,
                )
        roles = {p.role for p in self.pools}
        if self.disaggregated and roles != {"prefill", "decode"}:
            raise ScenarioError(
                "disaggregated serving needs prefill and decode pools only (no mixed pool beside them)",
                path="workload.pools",
                value=sorted(roles),
            )
        need, have = self.gpus(hardware), hardware.num_gpus
        if need > have:
            raise ScenarioError(
                f"the pools need {need} GPUs but the cluster has {have} ({hardware.nodes} nodes x {g})",
                path="workload.pools",
                value=[p.name for p in self.pools],
            )
        p = self.precision
        for key, dtype in (("dtype", p.dtype), ("ffn_dtype", p.ffn_dtype), ("attention_dtype", p.attention_dtype)):
            if getattr(hardware.gpu.peak, dtype, None) is None:
                raise ScenarioError(f"{hardware.gpu.name} has no {dtype} peak", path=f"workload.{key}", value=dtype)
