"""Continuous batching on one replica: iteration-level scheduling under a token budget with a paged
KV cache (vLLM, arXiv 2309.06180; chunked prefill as in Sarathi-Serve, arXiv 2403.02310). Pure
bookkeeping, no SimPy: sim/workloads/serving/replica.py times and runs what `schedule` returns.

A request's life (counters on `Req`):
- `kv`: tokens in its KV cache; `cached` prefix tokens are there on admission (no compute);
- prefill (`in_prefill`) until `kv` reaches `prefill_target` = cached + prompt + generated; the
  iteration that completes it emits a token (`generated` += 1; the first is the time to first token);
- then one decode per iteration (`kv` += 1, `generated` += 1) until `generated` = decode_tokens
  (the output length; 0 means prefill only). So while decoding kv = cached + prompt + generated - 1.

Paged KV cache (`KvBlocks`): `capacity` blocks of `block_size` tokens on every CP rank; a sequence's
tokens are spread round-robin over the N CP ranks, so one replica block holds block_size x N of its
tokens and it needs ceil(kv / (block_size x N)) blocks. Blocks are taken as tokens are scheduled and
all returned when the request leaves; `used` never exceeds `capacity` (tests assert it).

One iteration (`ReplicaScheduler.schedule`), within `max_batch_tokens` and `max_seqs`:
1. every running decode takes one token; when its next token needs a block and none is free, the
   most recently admitted running request is preempted (vLLM's policy) - `recompute`: its blocks are
   freed and it goes back to the head of the queue to prefill prompt and output again; `swap`: its
   blocks are copied to host memory (replica.py moves the bytes over the host links) and it waits in
   the swapped queue, which is served before new requests;
2. running prefills continue with a chunk of what the budget leaves;
3. swapped requests come back when their blocks fit, then waiting requests are admitted first come,
   first served while the budget, max_seqs and the free blocks (less a 1% watermark) allow; with
   `chunked_prefill: false` a prompt is scheduled whole (alone if it exceeds the budget).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sim.workloads.serving.cost import Batch

WATERMARK = 0.01  # share of the blocks kept free when admitting new requests (vLLM's default)


class Req:
    """One request's state (see module docstring)."""

    __slots__ = (
        "id",
        "arrival_s",
        "prompt",
        "cached",
        "decode_tokens",
        "kv",
        "generated",
        "blocks",
        "first_token_s",
        "last_token_s",
        "finish_s",
        "replica",
        "preemptions",
        "itl",
        "prefill_replica",
        "handoff_s",
        "load",
        "in_prefill",
        "prefill_blocks",
    )

    def __init__(self, rid: int, arrival_s: float, prompt: int, decode_tokens: int, cached: int = 0) -> None:
        self.id, self.arrival_s, self.prompt, self.cached = rid, arrival_s, prompt, cached
        self.decode_tokens = decode_tokens
        self.kv = 0
        self.generated = 0
        self.blocks = 0
        self.first_token_s: float | None = None
        self.last_token_s = 0.0
        self.finish_s: float | None = None
        self.replica = -1
        self.prefill_replica = -1
        self.preemptions = 0
        self.itl: list[float] = []
        self.handoff_s = 0.0
        self.in_prefill = True
        self.prefill_blocks = 0  # blocks it holds on its prefill replica until its KV has moved
        self.load = 0  # tokens this request adds to its replica's load (router)

    @property
    def prefill_target(self) -> int:
        return self.cached + self.prompt + self.generated

    @property
    def prefilling(self) -> bool:
        return self.in_prefill

    @property
    def done(self) -> bool:
        return self.generated >= max(1, self.decode_tokens)


class KvBlocks:
    """A replica's paged KV cache: `capacity` blocks of `block_tokens` sequence tokens."""

    def __init__(self, capacity: int, block_tokens: int) -> None:
        self.capacity, self.block_tokens, self.used = capacity, block_tokens, 0

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_tokens)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def grow(self, req: Req, tokens: int) -> bool:
        """Give `req` the blocks `tokens` KV tokens need; False (nothing taken) if they are not free."""
        need = self.blocks_for(tokens) - req.blocks
        if need <= 0:
            return True
        if need > self.free:
            return False
        self.used += need
        req.blocks += need
        return True

    def release(self, req: Req) -> int:
        freed, req.blocks = req.blocks, 0
        self.used -= freed
        return freed


@dataclass
class IterationPlan:
    """What one iteration does: the batch for the cost model and who advances."""

    batch: Batch = field(default_factory=Batch)
    decodes: list[Req] = field(default_factory=list)
    prefills: list[tuple[Req, int]] = field(default_factory=list)  # (request, chunk tokens)
    swap_out: list[tuple[Req, int]] = field(default_factory=list)  # (request, KV tokens moved)
    swap_in: list[tuple[Req, int]] = field(default_factory=list)
    preempted: int = 0

    @property
    def empty(self) -> bool:
        """Nothing to compute and nothing moved (a swap-in alone is progress: the next plan runs it)."""
        return not self.decodes and not self.prefills and not self.swap_in and not self.swap_out


class ReplicaScheduler:
    """The queues and KV cache of one replica (see module docstring). `role`: mixed, prefill or decode."""

    def __init__(
        self,
        blocks: KvBlocks,
        max_batch_tokens: int,
        max_seqs: int,
        chunked: bool,
        preemption: str,
        role: str = "mixed",
    ) -> None:
        self.blocks, self.budget, self.max_seqs = blocks, max_batch_tokens, max_seqs
        self.chunked, self.preemption, self.role = chunked, preemption, role
        self.waiting: deque[Req] = deque()
        self.swapped: deque[Req] = deque()
        self.running: list[Req] = []  # admission order
        self.incoming: deque[Req] = deque()  # decode role: prefilled elsewhere, KV not here yet
        self.transferring = 0
        self.preemptions = 0
        self.load_tokens = 0  # tokens still to compute of requests assigned here (router)

    @property
    def queue_length(self) -> int:
        return len(self.waiting) + len(self.swapped) + len(self.incoming)

    def admit_transfers(self) -> list[Req]:
        """Decode role: requests whose KV may now move here (blocks taken, first come first served)."""
        out, blocks = [], self.blocks
        reserve = int(WATERMARK * blocks.capacity)
        while self.incoming and len(self.running) + self.transferring < self.max_seqs:
            req = self.incoming[0]
            if blocks.blocks_for(req.kv + 1) + reserve > blocks.free and (self.running or self.transferring):
                break
            if not blocks.grow(req, req.kv):
                break
            self.incoming.popleft()
            self.transferring += 1
            out.append(req)
        return out

    def transferred(self, req: Req) -> None:
        """Its KV has arrived: it decodes from the next iteration on."""
        self.transferring -= 1
        self.running.append(req)

    def add_incoming(self, req: Req) -> None:
        self.incoming.append(req)
        req.load = max(0, req.decode_tokens - req.generated)
        self.load_tokens += req.load

    def add(self, req: Req) -> None:
        self.waiting.append(req)
        req.load = req.prefill_target - max(req.kv, req.cached) + max(0, req.decode_tokens - max(req.generated, 1))
        self.load_tokens += req.load

    def schedule(self) -> IterationPlan:
        plan, budget, blocks = IterationPlan(), self.budget, self.blocks
        # 1. decodes (oldest first), preempting the newest when a block is missing
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if req.prefilling:
                i += 1
                continue
            preempted_self = False
            while not blocks.grow(req, req.kv + 1):
                victim = self.running[-1]
                self._preempt(victim, plan)
                if victim is req:
                    preempted_self = True
                    break
            if preempted_self:
                continue
            plan.decodes.append(req)
            budget -= 1
            i += 1
        # 2. running prefills continue
        for req in self.running:
            if budget <= 0:
                break
            if req.prefilling:
                budget = self._chunk(req, budget, plan)
        # 3. swapped back in, then new admissions
        while self.swapped and len(self.running) < self.max_seqs:
            req = self.swapped[0]
            if blocks.blocks_for(req.kv + 1) > blocks.free:
                break
            self.swapped.popleft()
            blocks.grow(req, req.kv)
            plan.swap_in.append((req, req.kv))
            self.running.append(req)
        reserve = int(WATERMARK * blocks.capacity)
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs and not self.swapped:
            req = self.waiting[0]
            if req.kv < req.cached:
                req.kv = req.cached  # prefix-cache hits: in the cache, not computed
            first = self._chunk_size(req, budget, plan)
            if first <= 0 or blocks.blocks_for(req.kv + first) + reserve > blocks.free:
                break
            self.waiting.popleft()
            self.running.append(req)
            budget = self._chunk(req, budget, plan)
        self._fill_batch(plan)
        return plan

    def _chunk_size(self, req: Req, budget: int, plan: IterationPlan) -> int:
        remaining = req.prefill_target - req.kv
        if self.chunked:
            return min(remaining, budget)
        if remaining <= budget or (not plan.prefills and not plan.decodes):
            return remaining
        return 0

    def _chunk(self, req: Req, budget: int, plan: IterationPlan) -> int:
        chunk = self._chunk_size(req, budget, plan)
        if chunk <= 0 or not self.blocks.grow(req, req.kv + chunk):
            return budget
        plan.prefills.append((req, chunk))
        return budget - chunk

    def _preempt(self, req: Req, plan: IterationPlan) -> None:
        self.running.remove(req)
        if req in plan.decodes:
            plan.decodes.remove(req)
        req.preemptions += 1
        self.preemptions += 1
        plan.preempted += 1
        if self.preemption == "swap" and req.kv > 0:
            plan.swap_out.append((req, req.kv))
            self.blocks.release(req)
            self.swapped.appendleft(req)
        else:
            self.blocks.release(req)
            redo = req.kv - req.cached
            req.in_prefill = True
            req.kv = 0  # recompute prompt and output (cached prefix hits return on admission)
            self.load_tokens += redo
            req.load += redo
            self.waiting.appendleft(req)

    def _fill_batch(self, plan: IterationPlan) -> None:
        b = plan.batch
        b.prefills = [(chunk, req.kv) for req, chunk in plan.prefills]
        b.decodes = len(plan.decodes)
        b.decode_context_sum = sum(r.kv for r in plan.decodes)
        b.logits = b.decodes + sum(1 for req, chunk in plan.prefills if req.kv + chunk >= req.prefill_target)

    def advance(self, plan: IterationPlan, now: float) -> list[Req]:
        """Apply a finished iteration at time `now`; returns the requests that left the replica
        (finished, or - on a prefill replica - prefilled and ready to hand over)."""
        for req in plan.decodes:
            req.kv += 1
            req.generated += 1
            req.itl.append(now - req.last_token_s)
            req.last_token_s = now
            req.load -= 1
            self.load_tokens -= 1
        for req, chunk in plan.prefills:
            req.kv += chunk
            req.load -= chunk
            self.load_tokens -= chunk
            if req.kv >= req.prefill_target:
                req.in_prefill = False
                req.generated += 1
                if req.first_token_s is None:
                    req.first_token_s = now
                else:  # the token after a recompute
                    req.itl.append(now - req.last_token_s)
                req.last_token_s = now
        out, keep = [], []
        for req in self.running:
            leaves = req.done or (self.role == "prefill" and not req.prefilling)
            (out if leaves else keep).append(req)
        self.running = keep
        for req in out:
            if req.done:
                req.finish_s = now
                self.blocks.release(req)
        return out

    def left(self, req: Req) -> None:
        """`req` no longer counts in this replica's load (finished, or handed to a decode replica)."""
        self.load_tokens -= req.load
