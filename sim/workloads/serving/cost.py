"""The time of one continuous-batching iteration on a replica (a TP x CP group), from the same
per-layer cost functions `cp_inference` uses.

An iteration runs every layer once over a *mixed batch*: prefill chunks (T new tokens of a request
on top of P tokens already in its KV cache) and decodes (one token of a request with context C).
Per layer, on one GPU:
- dense kernels (norms, QKV, RoPE, output projection, FFN, activation: sim/models/transformer.py
  `layer_gemms`, `layer_elementwise_bytes`) over all the batch's rows at once: T/N rows of each
  prefill chunk (CP shards a chunk over the N ranks) plus one row per decode (decode dense work is
  replicated on every CP rank, as in cp_inference);
- the attention of each prefill chunk as cp_inference plans it (sim/workloads/cp_inference/plan.py
  `plan_layer`: its ring steps' kernels, pass-KV or pass-Q with the choice of
  ring_attention.choose_ring), composed as cp_inference's PhaseRun runs it: step s takes
  max(attention and merge of step s, the ring send of step s) and the last step only its kernels;
  pass-Q adds its All2All and merge;
- the decodes' attention as one batched kernel per ring step (FlashDecoding-style: GQA groups packed
  into rows) over each rank's round-robin share of every context, a pass-Q ring when N > 1
  (message sizes from ring_attention.ring_messages for the batch's rows);
- two TP all-reduces of rows x D activations (the network's uncontended schedule estimate,
  sim/network/collectives.py `choose` / `estimate_s`, exactly as cp_inference's all-reduces run
  alone), or, for MoE models, one all-reduce after attention plus the router GEMM, the experts'
  GEMMs (E/ep experts each with rows x k / E rows) and the dispatch and combine all-to-alls
  (sim/models/moe.py);
then the final norm and LM head for each sequence that emits a token.

Layers are identical, so the iteration takes layers x layer time + final time. With one prefill of
the whole prompt and nothing else in the batch this is cp_inference's prefill phase on an idle
network (tests compare the two). `ring_flows` lists the cross-GPU bytes of an iteration (ring sends,
All2All, expert all-to-all, summed over layers) for the replica to put on the flow network.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hardware_models.gpu import DTYPE_BYTES
from sim.models.moe import MoETransformerSpec
from sim.models.transformer import TensorShard, TransformerSpec, layer_elementwise_bytes, layer_gemms, lm_head_gemm
from sim.network.collectives import choose, estimate_s
from sim.network.operation_cost import operation_cost
from sim.workloads.cp_inference.plan import Phase, Precision, plan_layer
from sim.workloads.cp_inference.ring_attention import choose_ring, local_cached, padded_tokens, ring_messages


@dataclass
class Batch:
    """One iteration's work: prefill chunks (new, cached) and decode contexts (KV tokens before the token)."""

    prefills: list[tuple[int, int]] = field(default_factory=list)
    decodes: int = 0
    decode_context_sum: int = 0  # sum over decodes of their context (tokens already cached)
    logits: int = 0  # sequences that emit a token this iteration


@dataclass(frozen=True)
class IterationTime:
    total_s: float
    dense_s: float
    attention_s: float
    comm_s: float  # TP all-reduces, exposed ring sends, All2All, expert all-to-all
    ring_bytes_per_gpu: float  # bytes one GPU sends to its CP neighbour over the whole iteration
    expert_bytes_per_gpu: float  # bytes one GPU sends in expert all-to-alls over the whole iteration


class IterationCost:
    """Iteration times of one replica shape (model, GPU, tp, cp, ep, precision) on a network.

    `nodes[c][j]` is the network node of TP index j of CP rank c (uncontended estimates only)."""

    def __init__(
        self,
        model: TransformerSpec,
        device,
        tp: int,
        cp: int,
        precision: Precision,
        ring: str,
        network,
        nodes: list[list[str]],
        allreduce_algorithm: str = "auto",
    ) -> None:
        self.model, self.device, self.tp, self.cp, self.precision = model, device, tp, cp, precision
        self.ring, self.network, self.nodes, self.allreduce_algorithm = ring, network, nodes, allreduce_algorithm
        self.shard = TensorShard(model, tp)
        self.moe = model if isinstance(model, MoETransformerSpec) else None
        self.act_b = DTYPE_BYTES[precision.activation_dtype]
        self.kv_b = DTYPE_BYTES[precision.attention_dtype]
        self._dense: dict[int, float] = {}
        self._prefill: dict[tuple[int, int], tuple[float, float, float, int]] = {}
        self._allreduce: dict[int, float] = {}
        self._alltoall: dict[int, float] = {}
        self._send: dict[float, float] = {}

    # ---- communication estimates (uncontended, from the network) ---------------------------------
    def send_s(self, nbytes: float) -> float:
        """A ring send to the next CP rank as cp_inference times it: NCCL's software latency
        (sim/network/operation_cost.py), then the bytes times the protocol's wire factor."""
        if nbytes <= 0 or self.cp == 1:
            return 0.0
        if nbytes not in self._send:
            src, dst = self.nodes[0][0], self.nodes[1][0]
            cost = operation_cost(self.network, "send_recv", [src, dst], nbytes)
            self._send[nbytes] = cost.software_latency_s + self.network.estimate_time_s(
                src, dst, nbytes * cost.wire_factor
            )
        return self._send[nbytes]

    def all2all_s(self, exchange_bytes: float) -> float:
        """pass-Q's All2All of `exchange_bytes` to each other CP rank, as cp_inference times it."""
        group = [rank[0] for rank in self.nodes[: self.cp]]
        cost = operation_cost(self.network, "all_to_all", group, self.cp * exchange_bytes)
        wire = (self.cp - 1) * exchange_bytes * cost.wire_factor
        return cost.software_latency_s + self.network.estimate_time_s(group[0], group[1], wire)

    def allreduce_s(self, rows: int) -> float:
        """A TP all-reduce of `rows` activations as cp_inference runs it: NCCL's plan (tuner's
        algorithm and protocol, its latencies), timed by the plan's estimate on an idle network."""
        if self.tp == 1 or rows <= 0:
            return 0.0
        if rows not in self._allreduce:
            nbytes = rows * self.model.hidden * self.act_b
            cost = operation_cost(self.network, "all_reduce", self.nodes[0], nbytes, self.allreduce_algorithm)
            self._allreduce[rows] = cost.plan.estimate_s
        return self._allreduce[rows]

    def alltoall_bytes(self, rows: int) -> float:
        """Bytes one GPU sends in one expert all-to-all: its rows / tp tokens x k copies x D."""
        return rows / self.tp * self.moe.experts_per_token * self.model.hidden * self.act_b * (self.tp - 1) / self.tp

    def alltoall_s(self, rows: int) -> float:
        if self.tp == 1 or rows <= 0:
            return 0.0
        if rows not in self._alltoall:
            _, steps = choose(self.network, "all_to_all", "direct", self.nodes[0], self.alltoall_bytes(rows))
            self._alltoall[rows] = estimate_s(self.network, steps)
        return self._alltoall[rows]

    # ---- per-layer parts ----------------------------------------------------------------------------
    def dense_layer_s(self, rows: int) -> float:
        """Dense kernels of one layer over `rows` token rows (GEMMs and memory-bound kernels; MoE:
        attention GEMMs, router and local experts) plus the layer's TP / EP communication."""
        if rows <= 0:
            return 0.0
        if rows in self._dense:
            return self._dense[rows]
        d, p = self.device, self.precision
        gemms = layer_gemms(self.shard, rows, p.dtype, p.ffn_dtype)
        elementwise = layer_elementwise_bytes(self.shard, rows, self.act_b)
        if self.moe is None:
            t = sum(d.gemm_time_s(g.m, g.n, g.k, g.dtype) for g in gemms)
            t += sum(d.memory_time_s(b) for b in elementwise.values())
            t += 2 * self.allreduce_s(rows)
        else:
            m = self.moe
            attention = [g for g in gemms if not g.name.startswith("ffn")]
            t = sum(d.gemm_time_s(g.m, g.n, g.k, g.dtype) for g in attention)
            t += sum(d.memory_time_s(b) for k, b in elementwise.items() if k != "ffn_act")
            t += d.gemm_time_s(rows, m.experts, m.hidden, p.dtype)  # router
            expert_rows = max(1, round(rows * m.experts_per_token / m.experts))
            local_experts = max(1, m.experts // self.tp)
            up = m.ffn * (2 if m.mlp == "swiglu" else 1)
            per_expert = d.gemm_time_s(expert_rows, up, m.hidden, p.ffn_dtype) + d.gemm_time_s(
                expert_rows, m.hidden, m.ffn, p.ffn_dtype
            )
            act = (3 if m.mlp == "swiglu" else 2) * expert_rows * m.ffn * self.act_b
            t += local_experts * (per_expert + d.memory_time_s(act))
            t += self.allreduce_s(rows) + 2 * self.alltoall_s(rows)
        self._dense[rows] = t
        return t

    def prefill_attention(self, new: int, cached: int) -> tuple[float, float, float, int]:
        """(time, exposed comm, ring bytes sent per GPU, rows per GPU) of one layer's attention of a
        prefill chunk, as cp_inference runs it."""
        key = (new, cached)
        if key in self._prefill:
            return self._prefill[key]
        phase = Phase("prefill", new, cached)
        ring = self.ring_for(phase)
        plan = plan_layer(self.model, self.device, self.tp, self.cp, phase, ring, self.precision)
        kernels = [sum(k.duration_s for k in step) for step in plan.ring_steps]
        send = self.send_s(plan.ring_send_bytes)
        total, exposed = kernels[-1], 0.0
        for k in kernels[:-1]:
            total += max(k, send)
            exposed += max(0.0, send - k)
        all2all = 0.0
        if plan.exchange_bytes:
            all2all = self.all2all_s(plan.exchange_bytes)
        total += all2all + sum(k.duration_s for k in plan.post_exchange)
        sent = (self.cp - 1) * plan.ring_send_bytes + (self.cp - 1) * plan.exchange_bytes
        out = (total, exposed + all2all, sent, plan.tokens_local)
        self._prefill[key] = out
        return out

    def ring_for(self, phase: Phase) -> str:
        """The prefill ring: forced, or Algorithm 1 of arXiv 2411.01783 (ring_attention.choose_ring)."""
        if self.cp == 1:
            return "none"
        if self.ring != "auto":
            return self.ring
        plan = plan_layer(self.model, self.device, self.tp, self.cp, phase, "pass-kv", self.precision)
        msgs, step = plan.messages, plan.attention_step
        return choose_ring(
            new_tokens=padded_tokens(phase.new_tokens, self.cp),
            cached_tokens=phase.cached_tokens,
            cp=self.cp,
            heads=self.model.heads,
            kv_heads=self.model.kv_heads,
            elem_bytes=self.kv_b,
            attention_step_s=step.duration_s,
            attention_step_flop=step.flop,
            kv_send_s=self.send_s(msgs.kv),
            q_send_s=self.send_s(msgs.q),
            all2all_s=self.send_s((self.cp - 1) * msgs.partial_output),
            kv_message_bytes=msgs.kv,
        ).ring

    def decode_attention(self, decodes: int, context_sum: int) -> tuple[float, float, float]:
        """(time, exposed comm, bytes sent per GPU) of one layer's attention of `decodes` decode
        rows with `context_sum` cached tokens in all: one batched kernel per pass-Q ring step."""
        if decodes <= 0:
            return 0.0, 0.0, 0.0
        sh, cp, d = self.shard, self.cp, self.device
        qh, kvh, hd = sh.q_heads, sh.kv_heads, sh.head_dim
        kv_local = local_cached(context_sum + decodes, cp)  # every rank's share of every context
        flop = 4.0 * hd * qh * kv_local
        kernel = d.attention_time_s(
            qh // kvh,
            kv_local / decodes,
            kvh,
            hd,
            kv_heads=kvh,
            dtype=self.precision.attention_dtype,
            batch=decodes,
            flop=flop,
        )
        if cp == 1:
            return kernel, 0.0, 0.0
        msgs = ring_messages(decodes, kv_local, qh, kvh, hd, self.kv_b)
        send = self.send_s(msgs.q)
        total = kernel + (cp - 1) * max(kernel, send)
        all2all = self.send_s((cp - 1) * msgs.partial_output)
        merge = d.memory_time_s(decodes * qh * (hd + 1) * 4 * (cp + 1))
        exposed = (cp - 1) * max(0.0, send - kernel) + all2all
        return total + all2all + merge, exposed, (cp - 1) * (msgs.q + msgs.partial_output)

    def final_s(self, logits: int) -> float:
        if logits <= 0:
            return 0.0
        d, g = self.device, lm_head_gemm(self.shard, logits, self.precision.activation_dtype)
        return d.memory_time_s(2 * self.model.hidden * self.act_b * logits) + d.gemm_time_s(g.m, g.n, g.k, g.dtype)

    # ---- the iteration ------------------------------------------------------------------------------
    def iteration(self, batch: Batch) -> IterationTime:
        rows, attention, exposed, sent = batch.decodes, 0.0, 0.0, 0.0
        for new, cached in batch.prefills:
            t, e, b, r = self.prefill_attention(new, cached)
            attention, exposed, sent, rows = attention + t, exposed + e, sent + b, rows + r
        t, e, b = self.decode_attention(batch.decodes, batch.decode_context_sum)
        attention, exposed, sent = attention + t, exposed + e, sent + b
        dense_comm = self.dense_layer_s(rows)
        comm = 2 * self.allreduce_s(rows) if self.moe is None else self.allreduce_s(rows) + 2 * self.alltoall_s(rows)
        layers = self.model.layers
        total = layers * (attention + dense_comm) + self.final_s(batch.logits)
        expert_bytes = 2 * layers * self.alltoall_bytes(rows) if self.moe is not None and self.tp > 1 else 0.0
        return IterationTime(
            total_s=total,
            dense_s=layers * (dense_comm - comm) + self.final_s(batch.logits),
            attention_s=layers * (attention - exposed),
            comm_s=layers * (comm + exposed),
            ring_bytes_per_gpu=layers * sent,
            expert_bytes_per_gpu=expert_bytes,
        )
