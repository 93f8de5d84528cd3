"""A serving replica on the cluster: one SimPy process that runs its scheduler's iterations.

Each iteration is one SimPy step: the scheduler's plan (scheduler.py) is timed by the cost model
(cost.py) and the replica waits for that time and, at the same time, for the iteration's
cross-host traffic on the flow network: each GPU's ring sends to its CP neighbour and expert
all-to-all bytes that leave its host, summed over the layers, as one flow per GPU pair. Uncontended,
those flows end before the computed time (the cost model already charges their exposed part); when
other traffic (KV transfers, other replicas, other jobs) shares the links they can stretch the
iteration. Swaps (preemption `swap`) move each GPU's share of the request's KV cache over its host
link to host memory and back before the iteration computes.

Disaggregation: a prefill replica hands a prefilled request to the workload (`on_leave`), which
routes it to a decode replica's `incoming` queue; the decode replica takes its blocks and pulls the
KV cache over the network (one flow per source GPU, each GPU's share of the KV bytes, to the GPU of
the same index modulo the decode replica's size), then decodes it. The prefill replica keeps the
blocks until the transfer ends.

Every iteration records one span on the replica's first GPU (track `compute`, name `iteration`),
counts busy time and model FLOPs on every GPU of the replica, and shows the span observers (energy)
the same busy interval on the others; and a sample (time, KV blocks used, queue length, running
requests) for the over-time metrics.
"""

from __future__ import annotations

from array import array


class ServingReplica:
    def __init__(self, index: int, pool, pool_index: int, devices: list, scheduler, cost, ctx) -> None:
        self.index, self.pool, self.pool_index = index, pool, pool_index
        self.devices, self.scheduler, self.cost, self.ctx = devices, scheduler, cost, ctx
        self.sim = ctx.sim
        self.wake = None
        self.iterations = 0
        self.busy_s = 0.0
        self.batch_tokens = 0
        self.swap_bytes = 0.0
        self.samples = {k: array("d") for k in ("t", "kv_used", "queue", "running")}
        self.preempt_times = array("d")
        cp, tp = pool.cp, len(devices) // pool.cp
        self.grid = [devices[c * tp : (c + 1) * tp] for c in range(cp)]
        self._ring_pairs = (
            [(self.grid[c][j].node, self.grid[(c + 1) % cp][j].node) for c in range(cp) for j in range(tp)]
            if cp > 1
            else []
        )
        self._expert_pairs = [
            (a.node, b.node) for g in self.grid for a in g for b in g if a is not b and a.host != b.host
        ]

    # ---- waking -------------------------------------------------------------------------------------
    def poke(self) -> None:
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    # ---- the loop -----------------------------------------------------------------------------------
    def run(self):
        sim, sched, net = self.sim, self.scheduler, self.ctx.network
        while True:
            for req in sched.admit_transfers():
                sim.process(self._pull_kv(req))
            plan = sched.schedule()
            if plan.preempted:
                self.preempt_times.extend([sim.now] * plan.preempted)
            if plan.swap_out or plan.swap_in:
                yield self._swap(plan.swap_out, plan.swap_in)
            if plan.empty:
                self.wake = sim.env.event()
                yield self.wake
                self.wake = None
                continue
            it = self.cost.iteration(plan.batch)
            start = sim.now
            events = [sim.timeout(it.total_s)]
            flows = [(s, d, it.ring_bytes_per_gpu) for s, d in self._ring_pairs if it.ring_bytes_per_gpu > 0]
            if it.expert_bytes_per_gpu > 0 and self._expert_pairs:
                share = it.expert_bytes_per_gpu / (len(self.grid[0]) - 1)
                flows += [(s, d, share) for s, d in self._expert_pairs]
            if flows:
                events.append(net.transfer_many(flows, name=f"replica {self.index} iteration traffic"))
            yield sim.all_of(events) if len(events) > 1 else events[0]
            tokens = len(plan.decodes) + sum(c for _, c in plan.prefills)
            self._account(start, tokens)
            for req in sched.advance(plan, sim.now):
                self.ctx.on_leave(self, req)
            s = self.samples
            s["t"].append(sim.now)
            s["kv_used"].append(sched.blocks.used)
            s["queue"].append(sched.queue_length)
            s["running"].append(len(sched.running))

    def _account(self, start: float, tokens: int) -> None:
        sim, end = self.sim, self.sim.now
        busy = end - start
        self.iterations += 1
        self.busy_s += busy
        self.batch_tokens += tokens
        flop = self.ctx.flop_per_token * tokens / len(self.devices)
        first = self.devices[0]
        sim.span(first.node, "compute", "iteration", start, end, flop=flop, category="compute")
        observers = sim.recorder.observers
        for d in self.devices:
            d.record("compute", busy, flop)
            if d is not first:
                for observe in observers:
                    observe(d.node, "compute", "compute", start, end, 1.0)

    # ---- KV movement --------------------------------------------------------------------------------
    def _kv_bytes_per_gpu(self, tokens: int) -> float:
        return -(-tokens // self.pool.cp) * self.ctx.kv_bytes_per_token_per_gpu[self.pool_index]

    def _swap(self, swap_out, swap_in):
        """Swap-outs and swap-ins of this iteration: each GPU's share over its host link."""
        flows = []
        for moves, out in ((swap_out, True), (swap_in, False)):
            for _, tokens in moves:
                nbytes = self._kv_bytes_per_gpu(tokens)
                for d in self.devices:
                    cpu = self.ctx.cluster.cpu_node(d.host)
                    flows.append((d.node, cpu, nbytes) if out else (cpu, d.node, nbytes))
                    self.swap_bytes += nbytes
        return self.ctx.network.transfer_many(flows, name=f"replica {self.index} swap")

    def _pull_kv(self, req):
        """Move `req`'s KV cache from its prefill replica to this one, then let it decode here."""
        source = self.ctx.replicas[req.prefill_replica]
        start = self.sim.now
        tokens = req.kv
        total = tokens * self.ctx.kv_bytes_per_token_full
        src, dst = source.devices, self.devices
        share = total / len(src)
        flows = [(s.node, dst[k % len(dst)].node, share) for k, s in enumerate(src)]
        yield self.ctx.network.transfer_many(flows, name=f"kv transfer {req.id}")
        source.release_handed_over(req)
        req.handoff_s = self.sim.now - start
        self.ctx.kv_transfer_bytes += total
        self.ctx.kv_transfer_s.append(req.handoff_s)
        self.scheduler.transferred(req)
        self.poke()

    def release_handed_over(self, req) -> None:
        """The KV of a handed-over request has left: free its blocks here."""
        self.scheduler.blocks.used -= req.prefill_blocks
        req.prefill_blocks = 0
        self.poke()
