"""Two-process measurements: send/recv, all-reduce and all-to-all, and context-parallel prefill.

`run_two_process(ctx, comm_sizes, cp_configs)` spawns 2 processes (torch.multiprocessing, spawn)
joined by torch.distributed - gloo over loopback TCP on CPU, NCCL on 2 GPUs - each pinned to
`ctx.threads` torch threads. In one session they time

- `send_recv` (both ranks send `bytes` to each other at once, as dcsim's 2-rank send_recv ring),
  `all_reduce` (fp32 sum of a `bytes` buffer) and `all_to_all` (each rank sends `bytes` in all) per size;
- the compute primitives (gemm, sdpa, copy; the quick grids) on both ranks in lock-step, as the CP
  ranks run: on a CPU the two cores then share the memory system, so these calibrate a second
  device profile (`<device>-x2`) that the CP predictions use (records named `x2/...`, processes 2);
- the transformer stack of `torch_models.Stack` with context parallelism 2, pass-KV and pass-Q, and
  checks that the CP output equals the single-process output (max abs error, reported in `checks`).

Every timed iteration starts after a barrier; its time is the slower rank's. Rank 0 writes the raw
results to a JSON file the parent turns into records.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time

from validation.timing import core_wait_s, on_core_s, summarize


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(dist, torch, fn, repeats: int, warmup: int, device: str, inner: int = 1) -> dict:
    """The slower rank's wall time per sample, less the longest run-queue wait of either rank during
    it (a rank that lost its core delays the other, which waits blocked: validation/timing.py)."""
    for _ in range(warmup):
        fn()
    walls, waits = [], []
    for _ in range(repeats):
        dist.barrier()
        if device == "cuda":
            torch.cuda.synchronize()
        wait0, start = core_wait_s(), time.perf_counter()
        for _ in range(inner):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        walls.append((time.perf_counter() - start) / inner)
        wait1 = core_wait_s()
        waits.append((wait1 - wait0) / inner if wait0 is not None and wait1 is not None else 0.0)
    t = torch.tensor(walls + waits, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    both = t.tolist()
    walls, waits = both[:repeats], both[repeats:]
    timing = summarize([on_core_s(w, q) for w, q in zip(walls, waits)], walls)
    return {
        "median_s": timing.median_s,
        "spread_s": timing.spread_s,
        "repeats": timing.repeats,
        "min_s": timing.min_s,
        "preempted": timing.preempted,
        "wall_median_s": timing.wall_median_s,
    }


def _timing(row: dict):
    """A `Timing` from `_timed`'s row (JSON between the processes)."""
    from validation.timing import Timing

    return Timing(
        row["median_s"],
        row["spread_s"],
        row["repeats"],
        row["min_s"],
        preempted=row.get("preempted", 0),
        wall_median_s=row.get("wall_median_s"),
    )


def _comm(dist, torch, device: str, sizes: list[int], quick: bool) -> list[dict]:
    rank = dist.get_rank()
    peer = 1 - rank
    rows = []
    for nbytes in sizes:
        numel = max(nbytes // 4, 2)
        a = torch.ones(numel, device=device)
        b = torch.empty_like(a)
        reps = 5 if quick else (10 if nbytes >= 2**24 else 30)

        def send_recv():
            reqs = [dist.isend(a, peer), dist.irecv(b, peer)]
            for r in reqs:
                r.wait()

        cases = {
            "send_recv": send_recv,
            "all_reduce": lambda: dist.all_reduce(a),
            "all_to_all": lambda: dist.all_to_all_single(b, a),
        }
        for op, fn in cases.items():
            rows.append(
                {"workload": op, "params": {"bytes": numel * 4, "ranks": 2}, **_timed(dist, torch, fn, reps, 2, device)}
            )
    return rows


LOCKSTEP_PREFIX = "x2/"


def _lockstep_primitives(dist, torch, device: str) -> list[dict]:
    """The quick primitive grids timed on both ranks at once (barrier, slower rank's time)."""
    from validation import primitives
    from validation.timing import Context

    class Lockstep(Context):
        def time(self, fn, repeats, warmup=2, inner=1):
            t = _timed(dist, torch, fn, repeats, warmup, device.split(":")[0], inner)
            return _timing(t)

    ctx = Lockstep(torch, device.split(":")[0], torch.get_num_threads(), quick=True)
    records = primitives.measure_gemm(ctx) + primitives.measure_sdpa(ctx) + primitives.measure_copy(ctx)
    return [
        {
            "workload": r.workload,
            "name": LOCKSTEP_PREFIX + r.name,
            "params": r.params,
            "median_s": r.median_s,
            "spread_s": r.spread_s,
            "repeats": r.repeats,
            "min_s": r.min_s,
            "preempted": r.checks.get("preempted_samples", 0),
            "wall_median_s": r.checks.get("wall_median_s"),
        }
        for r in records
    ]


def _cp(dist, torch, device: str, configs: list[dict]) -> list[dict]:
    from validation import torch_models as tm

    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    for cfg in configs:
        model = tm.Stack(cfg["layers"], cfg["hidden"], cfg["ffn"], cfg["heads"], seed=0).to(device)
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(1, cfg["seq"], cfg["hidden"], generator=gen).to(device)
        x_local = tm.shard(x, rank, world)
        chunks = tm.load_balanced_chunks(rank, world)
        reference = model(x) if rank == 0 else None
        for ring in ("pass-kv", "pass-q"):
            fn = lambda: model.forward_cp(x_local, chunks, ring, rank, world)  # noqa: E731
            timing = _timed(dist, torch, fn, cfg.get("repeats", 3), 1, device)
            y_local = fn()
            gathered = [torch.empty_like(y_local) for _ in range(world)]
            dist.all_gather(gathered, y_local)
            checks = {}
            if rank == 0:
                err = (tm.unshard(gathered, world) - reference).abs().max().item()
                checks = {
                    "max_abs_error_vs_single_process": err,
                    "exact": bool(err <= 1e-4 * max(1.0, reference.abs().max().item())),
                }
            params = {k: cfg[k] for k in ("layers", "hidden", "ffn", "heads", "seq")}
            rows.append(
                {
                    "workload": "ring_attention",
                    "params": {**params, "cp": world, "ring": ring, "dtype": "fp32"},
                    "checks": checks,
                    **timing,
                }
            )
    return rows


def _worker(rank: int, port: int, device: str, threads: int, comm_sizes, cp_configs, quick, out_path):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    backend = "nccl" if device == "cuda" else "gloo"
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    dev = f"cuda:{rank}" if device == "cuda" else "cpu"
    try:
        rows = (
            _comm(dist, torch, dev, comm_sizes, quick)
            + _lockstep_primitives(dist, torch, dev)
            + _cp(dist, torch, dev, cp_configs)
        )
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump(rows, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_two_process(ctx, comm_sizes: list[int], cp_configs: list[dict]) -> list:
    """Spawn the 2-process session and return its measurements as records."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "rows.json")
        mp.spawn(
            _worker,
            args=(_free_port(), ctx.device, ctx.threads, comm_sizes, cp_configs, ctx.quick, out_path),
            nprocs=2,
            join=True,
        )
        with open(out_path) as f:
            rows = json.load(f)
    records = []
    for row in rows:
        p = row["params"]
        if row["workload"] == "ring_attention":
            name = f"ring_attention/{p['ring']}/L{p['layers']}-d{p['hidden']}-s{p['seq']}"
            family = "composition"
        elif "name" in row:
            name, family = row["name"], "primitive"
        else:
            name = f"{row['workload']}/{p['bytes']}B"
            family = "primitive"
        timing = _timing(row)
        records.append(
            ctx.record(name, family, row["workload"], p, timing, processes=2, checks=row.get("checks") or {})
        )
    return records
