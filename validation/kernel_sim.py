"""Fallback predictions of compositions as kernel-and-flow simulations on a dcsim cluster.

Used only when the dedicated workload module (cp_inference, ingestion, embedding_training) is not in
`sim.workloads.MODULES`. Each composition is still a real SimPy run on the calibrated cluster: its
kernels run on `sim.engine.compute.Device` streams (cost from the calibrated DeviceSpec) and its messages
are flows on the calibrated link (`sim.network.backends`), so overlap and serialisation come from the
simulation, not from a closed formula.

- `transformer(hw, cfg, cp, ring)`: per layer and CP rank, norm / QKV / attention per chunk pair /
  out / norm / FFN kernels; with cp = 2 the ring send of K,V (pass-KV) or Q (pass-Q, then the partial
  outputs back) runs on the comm stream while the local chunk pairs' attention runs on compute.
- `dataloader(hw, params)`: `workers` worker devices each turn `batch` samples into a batch (one
  kernel of batch x cpu_s_per_sample), at most `prefetch` batches in flight per worker, delivered in
  order to a trainer that holds each batch for step_s.
- `embedding_step(hw, params)`: lookups (memory kernels over the gathered rows), bottom/top MLP and
  interaction GEMMs forward and backward (2x: dgrad + wgrad), sparse row-wise and dense SGD updates;
  backward of a lookup costs 2x its forward (TorchRec planner constants, shared/REFERENCE.md).
"""
from __future__ import annotations

import simpy

from sim.cluster.cluster import Cluster
from sim.engine.simulation import Simulation
from sim.scenario.model import HardwareConfig

F32 = 4


def _run(hardware: dict, body) -> float:
    sim = Simulation(seed=0)
    cluster = Cluster.build(sim, HardwareConfig.model_validate(hardware))
    proc = sim.process(body(sim, cluster))
    sim.env.run(until=proc)
    return float(sim.now)


def _pairs(q_chunks, kv_chunks):
    """(full, diagonal) chunk pairs a set of Q chunks attends over a set of K,V chunks."""
    full = sum(1 for a in q_chunks for b in kv_chunks if b < a)
    diag = sum(1 for a in q_chunks for b in kv_chunks if b == a)
    return full, diag


def transformer(hardware: dict, cfg: dict, cp: int = 1, ring: str = "pass-kv") -> float:
    L, D, F, H, T = cfg["layers"], cfg["hidden"], cfg["ffn"], cfg["heads"], cfg["seq"]
    hd, t = D // H, T // cp
    chunk = T // (2 * cp)

    def attention(dev, name, full, diag):
        spec = dev.spec
        flop = 4.0 * H * hd * (full * chunk * chunk + diag * chunk * (chunk + 1) / 2)
        q = chunk * (full + diag) if cp > 1 else T
        return dev.run(name, spec.attention_time_s(q, q, H, hd, dtype="fp32", flop=flop) if flop else 0.0,
                       flop=flop)

    def rank(sim, cluster, r):
        dev, peer = cluster.devices[r], cluster.devices[(r + 1) % cp]
        mine = (r, 2 * cp - 1 - r)
        theirs = ((r + 1) % cp, 2 * cp - 1 - (r + 1) % cp)
        for layer in range(L):
            yield dev.memory_kernel("norm", 4 * t * D * F32)
            yield dev.gemm("qkv", t, 3 * D, D, "fp32")
            if cp == 1:
                yield dev.run("attention", dev.spec.attention_time_s(T, T, H, hd, dtype="fp32"))
            else:
                nbytes = (2 if ring == "pass-kv" else 1) * t * D * F32
                send = cluster.network.transfer(dev.node, peer.node, nbytes, name=f"{ring}")
                yield attention(dev, "attn_local", *_pairs(mine, mine))
                yield send
                if ring == "pass-kv":
                    yield attention(dev, "attn_peer", *_pairs(mine, theirs))
                else:
                    yield attention(dev, "attn_visit", *_pairs(theirs, mine))
                    yield cluster.network.transfer(dev.node, peer.node, t * (hd + 1) * H * F32, name="all2all")
                yield dev.memory_kernel("merge", 4 * t * D * F32)
            yield dev.gemm("out", t, D, D, "fp32")
            yield dev.memory_kernel("norm", 4 * t * D * F32)
            yield dev.gemm("gate_up", t, 2 * F, D, "fp32")
            yield dev.memory_kernel("act", 3 * t * F * F32)
            yield dev.gemm("down", t, D, F, "fp32")

    def body(sim, cluster):
        yield sim.all_of([sim.process(rank(sim, cluster, r)) for r in range(cp)])
    return _run(hardware, body)


def dataloader(hardware: dict, p: dict, prefetch: int = 2) -> float:
    workers, batch, batches, step_s = p["workers"], p["batch"], p["batches"], p["step_s"]
    total = batches + 1

    def body(sim, cluster):
        devs = cluster.devices[:workers]
        ready = {i: sim.env.event() for i in range(total + workers * prefetch)}
        slots = [simpy.Resource(sim.env, capacity=prefetch) for _ in devs]

        def worker(w):
            for b in range(w, total + workers * prefetch, workers):
                req = slots[w].request()
                yield req
                yield devs[w].run(f"batch{b}", batch * p["cpu_s_per_sample"], category="compute")
                ready[b].succeed(req)

        for w in range(workers):
            sim.process(worker(w))
        start = None
        for b in range(total):
            req = yield ready[b]
            slots[b % workers].release(req)
            if b == 0:
                start = sim.now                    # the first batch is not timed (as measured)
                continue
            yield sim.timeout(step_s)
        return sim.now - start

    sim = Simulation(seed=0)
    cluster = Cluster.build(sim, HardwareConfig.model_validate(hardware))
    proc = sim.process(body(sim, cluster))
    sim.env.run(until=proc)
    return float(proc.value)


def embedding_step(hardware: dict, p: dict) -> float:
    T, d, B, P = p["tables"], p["dim"], p["batch"], p["pooling"]
    mlps = [[p["dense_features"], *p["bottom_mlp"]], [(T + 1) * T // 2 + d, *p["top_mlp"]]]
    gathered = B * P * d * F32

    def body(sim, cluster):
        dev = cluster.devices[0]
        for sizes in mlps[:1]:
            for a, b in zip(sizes, sizes[1:]):
                yield dev.gemm("bottom_fwd", B, b, a, "fp32")
        for _ in range(T):
            yield dev.memory_kernel("lookup_fwd", gathered + B * d * F32)
        yield dev.gemm("interaction", T + 1, T + 1, d, "fp32", batch=B)
        for a, b in zip(mlps[1], mlps[1][1:]):
            yield dev.gemm("top_fwd", B, b, a, "fp32")
        for sizes in mlps:
            for a, b in zip(sizes, sizes[1:]):
                yield dev.gemm("dgrad", B, a, b, "fp32")
                yield dev.gemm("wgrad", a, b, B, "fp32")
                yield dev.memory_kernel("sgd_dense", 3 * a * b * F32)
        yield dev.gemm("interaction_bwd", T + 1, d, T + 1, "fp32", batch=2 * B)
        for _ in range(T):
            yield dev.memory_kernel("lookup_bwd_and_update", 2 * (gathered + B * d * F32))
    return _run(hardware, body)
