"""`kind: serving` - LLM serving at scale: replicas with continuous batching, a router, optional
prefill/decode disaggregation and context parallelism for long prompts.

Placement: pools in order, replicas in order, each on tp x cp consecutive GPUs of the cluster (a
replica of at least a host starts on a host boundary, a smaller one never straddles two hosts);
GPUs left over stay idle. Per pool one cost model (cost.py: every replica of a pool sees the same
uncontended network) and a paged KV cache per replica sized from the HBM left after weights and
activations (config.py `memory_per_gpu`).

Requests arrive (requests.py) and the router (router.py) gives each to a replica of the pools that
take new requests (mixed, or prefill when disaggregated); a request whose KV cache (cached + prompt +
output tokens) could never fit the replica it would go to is rejected and counted. A prefilled
request on a prefill replica goes to a decode replica by the same policy (replica.py moves its KV).
The run ends when every request has finished or been rejected; metrics.py reports.
"""

from __future__ import annotations

from sim.errors import ScenarioError
from sim.models.transformer import TensorShard
from sim.workloads.serving.cost import IterationCost
from sim.workloads.serving.metrics import serving_metrics
from sim.workloads.serving.replica import ServingReplica
from sim.workloads.serving.requests import requests_of
from sim.workloads.serving.router import Router
from sim.workloads.serving.scheduler import KvBlocks, ReplicaScheduler, Req


def place(config, hardware) -> list[tuple[int, int, int]]:
    """(pool index, first rank, GPUs) of every replica, pools in order (see module docstring)."""
    g, out, cursor = hardware.gpus_per_node, [], 0
    for i, pool in enumerate(config.pools):
        size = config.tp_of(pool, hardware) * pool.cp
        for _ in range(pool.replicas):
            if size >= g or cursor // g != (cursor + size - 1) // g:
                cursor = -(-cursor // g) * g
            out.append((i, cursor, size))
            cursor += size
    if cursor > hardware.num_gpus:
        raise ScenarioError(
            f"the pools need {cursor} GPUs once replicas are aligned to hosts, the cluster has {hardware.num_gpus}",
            path="workload.pools",
            value=[p.name for p in config.pools],
        )
    return out


class ServingRun:
    """What the replicas share during one run: the cluster, the router and the request tallies."""

    def __init__(self, sim, cluster, config) -> None:
        hw = cluster.hardware
        self.sim, self.cluster, self.network, self.config = sim, cluster, cluster.network, config
        self.flop_per_token = config.model.dense_flop_per_token()
        self.kv_bytes_per_token_per_gpu = [config.kv_bytes_per_token_per_gpu(p, hw) for p in config.pools]
        self.kv_bytes_per_token_full = TensorShard(config.model, 1).kv_bytes_per_token(config.attention_dtype)
        self.kv_transfer_bytes = 0.0
        self.kv_transfer_s: list[float] = []
        self.replicas: list[ServingReplica] = []
        self.capacity_blocks: list[int] = []
        costs: dict[int, IterationCost] = {}
        sched = config.scheduler
        for index, (p, first, size) in enumerate(place(config, hw)):
            pool = config.pools[p]
            devices = cluster.devices[first : first + size]
            tp = config.tp_of(pool, hw)
            if p not in costs:
                nodes = [[devices[c * tp + j].node for j in range(tp)] for c in range(pool.cp)]
                costs[p] = IterationCost(
                    config.model,
                    hw.gpu,
                    tp,
                    pool.cp,
                    config.precision,
                    config.ring,
                    cluster.network,
                    nodes,
                    config.allreduce_algorithm,
                )
            mem = config.memory_per_gpu(pool, hw)
            capacity = int(mem["kv_cache"] // (sched.block_size * self.kv_bytes_per_token_per_gpu[p]))
            blocks = KvBlocks(capacity, sched.block_size * pool.cp)
            scheduler = ReplicaScheduler(
                blocks, sched.max_batch_tokens, sched.max_seqs, sched.chunked_prefill, sched.preemption, pool.role
            )
            self.replicas.append(ServingReplica(index, pool, p, devices, scheduler, costs[p], self))
        self.router = Router(config, self.replicas)
        self.requests: list[Req] = []
        self.rejected = 0
        self.finished = 0
        self.done = sim.env.event()

    def fits(self, replica: ServingReplica, req: Req) -> bool:
        blocks = replica.scheduler.blocks
        return blocks.blocks_for(req.cached + req.prompt + max(req.decode_tokens, 1)) <= blocks.capacity

    def arrivals(self, arrays):
        sim = self.sim
        for i in range(len(arrays)):
            t = float(arrays.arrival_s[i])
            if t > sim.now:
                yield sim.timeout(t - sim.now)
            req = Req(i, t, int(arrays.prompt_tokens[i]), int(arrays.decode_tokens[i]), int(arrays.cached_tokens[i]))
            req.last_token_s = t
            self.requests.append(req)
            replica = self.router.first(req)
            if not self.fits(replica, req):
                self._reject(req)
                continue
            req.replica = replica.index
            replica.scheduler.add(req)
            replica.poke()

    def on_leave(self, replica: ServingReplica, req: Req) -> None:
        replica.scheduler.left(req)
        if req.done:
            self._finish()
            return
        target = self.router.decode(req)  # prefilled on a prefill replica
        req.prefill_replica, req.prefill_blocks, req.blocks = replica.index, req.blocks, 0
        if not self.fits(target, req):
            replica.release_handed_over(req)
            self._reject(req)
            return
        req.replica = target.index
        target.scheduler.add_incoming(req)
        target.poke()

    def _reject(self, req: Req) -> None:
        self.rejected += 1
        req.finish_s = None
        self._finish()

    def _finish(self) -> None:
        self.finished += 1
        if self.finished == self.total and not self.done.triggered:
            self.done.succeed()


def simulate(sim, cluster, config):
    arrays = requests_of(config, sim)
    run = ServingRun(sim, cluster, config)
    run.total = len(arrays)
    for replica in run.replicas:
        sim.process(replica.run())
    sim.process(run.arrivals(arrays))
    yield run.done
    return serving_metrics(run, cluster.hardware)
