"""Record real PyTorch profiler traces on this machine (small models; the tests and the shipped example use them).

- `profile_mlp(path, ...)`: a small MLP's training steps (forward, MSE loss, backward, SGD) on one
  CPU thread under `torch.profiler` with `record_shapes=True`, `ProfilerStep#N` per step (a profiler
  schedule: wait 0, warm-up 1, active `steps`), exported as Chrome/Kineto JSON;
- `profile_gloo(out_dir, ...)`: the same with 2 processes joined by gloo over loopback TCP, every
  gradient all-reduced after backward (as plain data parallelism does), one trace per rank
  (`rank0.json`, `rank1.json`) - the layout of validation/distributed.py's 2-process session;
- `probe_gemm_s(m, n, k)`: the median time of one fp32 GEMM (a load probe taken beside a trace).

Torch is imported inside the functions: this module is imported only when recording.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model(torch, dims: tuple[int, ...], seed: int = 0):
    torch.manual_seed(seed)
    layers = []
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def _trainer(torch, dims, batch, seed=0, after_backward=None):
    model = _model(torch, dims, seed)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(seed + 1)
    x, y = torch.randn(batch, dims[0], generator=gen), torch.randn(batch, dims[-1], generator=gen)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if after_backward is not None:
            after_backward(model)
        opt.step()

    return step


def _profile(torch, step, path: Path, steps: int, warmup_steps: int) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    for _ in range(warmup_steps):
        step()
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle here
        warnings.simplefilter("ignore", UserWarning)
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=steps),
            on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
        ) as prof:
            for _ in range(steps + 1):
                step()
                prof.step()


def profile_mlp(
    path: str | Path, dims: tuple[int, ...] = (256, 512, 512, 256), batch: int = 128, steps: int = 3, threads: int = 1
) -> Path:
    """Profile `steps` training steps of an MLP with layer widths `dims` on `threads` CPU threads."""
    import torch

    torch.set_num_threads(threads)
    path = Path(path)
    _profile(torch, _trainer(torch, dims, batch), path, steps, warmup_steps=3)
    return path


def _gloo_worker(rank: int, port: int, out_dir: str, dims, batch, steps) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:

        def all_reduce_grads(model):
            for p in model.parameters():
                dist.all_reduce(p.grad)

        step = _trainer(torch, dims, batch, seed=0, after_backward=all_reduce_grads)
        _profile(torch, step, Path(out_dir) / f"rank{rank}.json", steps, warmup_steps=2)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def profile_gloo(
    out_dir: str | Path, dims: tuple[int, ...] = (128, 256, 128), batch: int = 64, steps: int = 2
) -> list[Path]:
    """Profile a 2-process gloo data-parallel MLP step; returns the two per-rank trace files."""
    import torch.multiprocessing as mp

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_gloo_worker, args=(_free_port(), str(out), dims, batch, steps), nprocs=2, join=True)
    return [out / "rank0.json", out / "rank1.json"]


def probe_gemm_s(m: int, n: int, k: int, repeats: int = 9) -> float:
    """Median wall time of one fp32 (m x k) @ (k x n) on one thread (after 2 warm-up calls)."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(2):
        a @ b
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        samples.append(time.perf_counter() - t)
    return sorted(samples)[len(samples) // 2]


def strip_trace(path: str | Path) -> None:
    """Drop what a shipped example needs not keep (flow arrows, host name, ids) to keep it small."""
    p = Path(path)
    data = json.loads(p.read_text())
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("ph") in ("X", "M")]
    for key in ("host_name", "trace_id", "traceName"):
        data.pop(key, None)
    p.write_text(json.dumps(data, separators=(",", ":")) + os.linesep)
