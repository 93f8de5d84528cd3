"""Single-process compositions: transformer prefill, a DataLoader pipeline, an embedding training step.

These are what the simulator predicts from the calibrated primitives (never fitted to):

- `transformer_prefill`: `torch_models.Stack` (pre-norm Llama-style layers, SwiGLU FFN) on one
  sequence, batch 1 - the single-process twin of the 2-process ring-attention runs.
- `dataloader`: a `torch.utils.data.DataLoader` with `workers` worker processes whose dataset spends
  a known CPU time per sample (a pure-Python loop, timed first in `workers` processes at once, as
  the workers will run it: `cpu_s_per_sample`; alone: `cpu_s_per_sample_alone`), feeding a
  trainer that takes `step_s` per batch without using the CPU (it sleeps, like a host waiting for
  an accelerator). One case is data-bound, one trainer-bound. Measured: seconds for `batches` batches
  after the first (worker start-up excluded).
- `embedding_step`: a DLRM-like model (embedding_bag tables, bottom MLP, dot interaction, top MLP),
  one training iteration: forward, BCE loss, backward, SGD. The embedding backward and its SGD update
  run as eager torch can without a fused kernel: every lookup's gradient row is materialised
  (`repeat_interleave` of its bag's pooled gradient x -lr) and added to its row by one
  `scatter_add_` (a row looked up twice is updated twice), instead of torch's generic sparse-gradient
  path (a sparse COO gradient, coalesce, then a sparse add). dcsim predicts it with
  `embedding_backward: unfused`; FBGEMM's fused update of the distinct rows is the default.
"""

from __future__ import annotations

import time

import numpy as np

from validation.primitives import DTYPES, compute_dtype, zipf_indices
from validation.timing import Context, Timing, summarize


def transformer_configs(quick: bool, gpu: bool = False) -> list[dict]:
    if gpu:  # Llama-like widths (Llama 3 8B: hidden 4096, FFN 14336, 32 heads) at a few layers
        configs = [
            {"layers": 4, "hidden": 4096, "ffn": 14336, "heads": 32, "seq": 4096, "repeats": 10},
            {"layers": 2, "hidden": 4096, "ffn": 14336, "heads": 32, "seq": 16384, "repeats": 5},
            {"layers": 8, "hidden": 2048, "ffn": 8192, "heads": 16, "seq": 8192, "repeats": 5},
            {"layers": 8, "hidden": 1024, "ffn": 4096, "heads": 8, "seq": 2048, "repeats": 10},
        ]
        return configs[:1] if quick else configs
    if quick:
        return [{"layers": 2, "hidden": 512, "ffn": 1408, "heads": 8, "seq": 1024, "repeats": 3}]
    return [
        {"layers": 2, "hidden": 512, "ffn": 1408, "heads": 8, "seq": 2048, "repeats": 5},
        {"layers": 4, "hidden": 256, "ffn": 704, "heads": 4, "seq": 1024, "repeats": 5},
        {"layers": 2, "hidden": 768, "ffn": 2048, "heads": 12, "seq": 512, "repeats": 5},
    ]


def measure_transformer(ctx: Context) -> list:
    from validation import torch_models as tm

    torch = ctx.torch
    out = []
    dtype = compute_dtype(ctx)
    for cfg in transformer_configs(ctx.quick, ctx.gpu):
        tdt = getattr(torch, DTYPES[dtype])
        model = tm.Stack(cfg["layers"], cfg["hidden"], cfg["ffn"], cfg["heads"]).to(ctx.device, tdt)
        x = torch.randn(1, cfg["seq"], cfg["hidden"], device=ctx.device).to(tdt)
        t = ctx.time(lambda: model(x), cfg["repeats"], warmup=1)
        params = {k: cfg[k] for k in ("layers", "hidden", "ffn", "heads", "seq")}
        out.append(
            ctx.record(
                f"transformer_prefill/{dtype}/L{cfg['layers']}-d{cfg['hidden']}-s{cfg['seq']}"
                if dtype != "fp32"
                else f"transformer_prefill/L{cfg['layers']}-d{cfg['hidden']}-s{cfg['seq']}",
                "composition",
                "transformer_prefill",
                {**params, "dtype": dtype},
                t,
            )
        )
    return out


# ---- DataLoader ---------------------------------------------------------------------------------


def busy_work(iterations: int) -> int:
    """A fixed amount of pure-Python CPU work (no I/O, no allocation to speak of)."""
    acc = 0
    for i in range(iterations):
        acc += i * i % 7
    return acc


class BusyDataset:
    """Map-style dataset: each sample costs `iterations` of busy_work and returns a 1 KiB tensor."""

    def __init__(self, size: int, iterations: int):
        self.size, self.iterations = size, iterations

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int):
        import torch

        busy_work(self.iterations)
        return torch.full((256,), float(i))


def _pipeline_once(torch, dataset, batch: int, workers: int, batches: int, step_s: float) -> float:
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers, prefetch_factor=2)
    it = iter(loader)
    next(it)  # worker start-up and the first batch: not timed
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
        time.sleep(step_s)  # the trainer's step (an accelerator; no host CPU)
    elapsed = time.perf_counter() - start
    del it
    return elapsed


def _busy_worker_s(iterations: int, seconds: float) -> list[float]:
    """Per-sample wall times of busy_work, looping for about `seconds` (in a worker process)."""
    out: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(out) < 3:
        out.append(_timed_call(busy_work, iterations))
    return out


def parallel_sample_s(workers: int, iterations: int, seconds: float = 0.6) -> Timing:
    """Seconds per sample of busy_work when `workers` processes run it at once, as the DataLoader's
    workers do: on a quiet machine with a core per worker the same as alone; with other load on the
    cores, what the workers actually get (a core shared with a CPU-bound process runs each at about
    half speed). Per worker: its samples' total wall / count; the statistic is over workers."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_timed_call, [busy_work] * workers, [iterations] * workers))  # start-up, untimed
        runs = list(pool.map(_busy_worker_s, [iterations] * workers, [seconds] * workers))
    per_worker = [sum(r) / len(r) for r in runs]
    q1, q3 = np.percentile([x for r in runs for x in r], [25, 75])
    return Timing(
        float(np.mean(per_worker)),
        float(q3 - q1),
        sum(len(r) for r in runs),
        float(min(min(r) for r in runs)),
    )


def measure_dataloader(ctx: Context, workers: int = 2, batch: int = 8) -> list:
    torch = ctx.torch
    iterations = 100_000
    alone = summarize([_timed_call(busy_work, iterations) for _ in range(15)])
    batches, repeats = (12, 2) if ctx.quick else (30, 3)
    out = []
    for regime, demand_factor in (("data-bound", 2.0), ("trainer-bound", 0.5)):
        # the workers' per-sample time is measured right before each pipeline, with `workers`
        # processes at once: the pipeline then meets the machine its input figure saw
        per_sample = parallel_sample_s(workers, iterations)
        c = per_sample.median_s
        supply = workers / c  # samples/s the workers can produce
        demand = supply * demand_factor  # samples/s the trainer could consume
        step_s = batch / demand
        dataset = BusyDataset(batch * (batches + 2) * workers, iterations)
        samples = [_pipeline_once(torch, dataset, batch, workers, batches, step_s) for _ in range(repeats)]
        t = summarize(samples)
        params = {
            "workers": workers,
            "batch": batch,
            "batches": batches,
            "step_s": step_s,
            "cpu_s_per_sample": c,
            "cpu_s_per_sample_spread": per_sample.spread_s,
            "cpu_s_per_sample_alone": alone.median_s,
            "sample_bytes": 1024,
            "regime": regime,
        }
        out.append(ctx.record(f"dataloader/{regime}/w{workers}", "composition", "dataloader", params, t))
    return out


def _timed_call(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


# ---- embedding-bag + MLP training step ------------------------------------------------------------


def embedding_configs(quick: bool, gpu: bool = False) -> list[dict]:
    if gpu:
        configs = [
            {
                "tables": 8,
                "rows": 4_000_000,
                "dim": 128,
                "pooling": 32,
                "zipf_alpha": 1.05,
                "batch": 16384,
                "dense_features": 13,
                "bottom_mlp": [512, 256, 128],
                "top_mlp": [1024, 512, 1],
                "repeats": 10,
            },
            {
                "tables": 8,
                "rows": 10_000_000,
                "dim": 64,
                "pooling": 16,
                "zipf_alpha": 0.0,
                "batch": 32768,
                "dense_features": 13,
                "bottom_mlp": [256, 64],
                "top_mlp": [512, 256, 1],
                "repeats": 10,
            },
        ]
        return configs[:1] if quick else configs
    if quick:
        return [
            {
                "tables": 2,
                "rows": 500_000,
                "dim": 64,
                "pooling": 16,
                "zipf_alpha": 1.05,
                "batch": 1024,
                "dense_features": 13,
                "bottom_mlp": [128, 64],
                "top_mlp": [256, 1],
                "repeats": 5,
            }
        ]
    return [
        {
            "tables": 4,
            "rows": 500_000,
            "dim": 64,
            "pooling": 16,
            "zipf_alpha": 1.05,
            "batch": 1024,
            "dense_features": 13,
            "bottom_mlp": [128, 64],
            "top_mlp": [256, 1],
            "repeats": 10,
        },
        {
            "tables": 4,
            "rows": 1_000_000,
            "dim": 64,
            "pooling": 32,
            "zipf_alpha": 0.0,
            "batch": 512,
            "dense_features": 13,
            "bottom_mlp": [256, 64],
            "top_mlp": [512, 256, 1],
            "repeats": 10,
        },
    ]


def _mlp(torch, sizes: list[int]):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def measure_embedding_step(ctx: Context, seed: int = 0) -> list:
    torch = ctx.torch
    rng = np.random.default_rng(seed)
    out = []
    for cfg in embedding_configs(ctx.quick, ctx.gpu):
        T, d, B, P = cfg["tables"], cfg["dim"], cfg["batch"], cfg["pooling"]
        torch.manual_seed(seed)
        tables = [torch.randn(cfg["rows"], d, device=ctx.device) * 0.01 for _ in range(T)]
        bottom = _mlp(torch, [cfg["dense_features"], *cfg["bottom_mlp"]]).to(ctx.device)
        n_int = (T + 1) * T // 2 + d
        top = _mlp(torch, [n_int, *cfg["top_mlp"]]).to(ctx.device)
        lr = 0.01
        opt_dense = torch.optim.SGD(list(bottom.parameters()) + list(top.parameters()), lr=lr)
        offsets = torch.arange(0, B * P, P, device=ctx.device)
        batches = [
            (
                [
                    torch.from_numpy(zipf_indices(rng, cfg["rows"], B * P, cfg["zipf_alpha"])).to(ctx.device)
                    for _ in range(T)
                ],
                torch.randn(B, cfg["dense_features"], device=ctx.device),
                torch.randint(0, 2, (B, 1), device=ctx.device).float(),
            )
            for _ in range(4)
        ]
        iu = torch.triu_indices(T + 1, T + 1, offset=1)
        state = {"i": 0}

        def step():
            idx, dense, label = batches[state["i"] % len(batches)]
            state["i"] += 1
            x = bottom(dense)
            pooled = [
                torch.nn.functional.embedding_bag(ix, w, offsets, mode="sum").requires_grad_()
                for w, ix in zip(tables, idx)
            ]
            feats = torch.stack([x] + pooled, 1)  # [B, T+1, d]
            inter = torch.bmm(feats, feats.transpose(1, 2))[:, iu[0], iu[1]]
            logit = top(torch.cat([x, inter], 1))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, label)
            opt_dense.zero_grad()
            loss.backward()
            opt_dense.step()
            with torch.no_grad():  # fused embedding backward + SGD (as FBGEMM's TBE):
                for w, ix, po in zip(tables, idx, pooled):  # every looked-up row += -lr x its bag's grad
                    w.scatter_add_(0, ix.unsqueeze(1).expand(-1, d), po.grad.repeat_interleave(P, 0).mul_(-lr))

        t = ctx.time(step, cfg["repeats"], warmup=2)
        params = {k: v for k, v in cfg.items() if k != "repeats"}
        out.append(
            ctx.record(
                f"embedding_step/t{T}-r{cfg['rows']}-p{P}-b{B}-z{cfg['zipf_alpha']:g}",
                "composition",
                "embedding_step",
                {**params, "dtype": "fp32", "optimizer": "sgd"},
                t,
            )
        )
    return out


def measure_all(ctx: Context) -> list:
    return measure_transformer(ctx) + measure_dataloader(ctx) + measure_embedding_step(ctx)


__all__ = ["measure_all", "transformer_configs", "Timing"]
