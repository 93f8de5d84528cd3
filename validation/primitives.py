"""Single-process primitives: GEMM, causal SDPA, memory copy, embedding_bag.

Each `measure_*` function times one primitive over a grid of parameters (smaller with `quick`) on the
context's device and returns one `Record` per point (family `primitive`). Calibration fits the device
model to these; nothing here knows about the model.

- `gemm`: (m x k) @ (k x n) over square, rectangular and skinny shapes, fp32 and bf16;
- `sdpa`: causal scaled-dot-product attention, batch 1, over sequence lengths (fp32);
- `copy`: `dst.copy_(src)` of large buffers (bytes moved = read + write, so 2 x size);
- `embedding_bag`: sum-pooled lookups of `batch` bags of `pooling` indices into a `rows x dim` table,
  indices uniform or Zipf-distributed (`zipf_alpha`), drawn from a seeded numpy generator.
"""
from __future__ import annotations

import numpy as np

from validation.timing import Context

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def gemm_grid(quick: bool) -> list[tuple[str, int, int, int]]:
    if quick:
        shapes = [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (1024, 1536, 512), (16, 1024, 1024)]
        return [(d, *s) for d in ("fp32", "bf16") for s in shapes]
    shapes = [(n, n, n) for n in (64, 128, 256, 512, 1024, 2048)]
    shapes += [(1024, 1536, 512), (1024, 512, 512), (2048, 2816, 512), (2048, 512, 1408), (16, 1024, 1024),
               (1024, 16, 1024), (4096, 256, 256)]
    return [(d, *s) for d in ("fp32", "bf16") for s in shapes]


def measure_gemm(ctx: Context) -> list:
    torch = ctx.torch
    out = []
    for dtype, m, n, k in gemm_grid(ctx.quick):
        tdt = getattr(torch, DTYPES[dtype])
        a = torch.randn(m, k, device=ctx.device).to(tdt)
        b = torch.randn(k, n, device=ctx.device).to(tdt)
        flop = 2.0 * m * n * k
        repeats = int(np.clip(0.15 / max(flop / 1.5e11, 1e-5), 5, 30 if not ctx.quick else 10))
        t = ctx.time(lambda: a @ b, repeats)
        out.append(ctx.record(f"gemm/{dtype}/{m}x{n}x{k}", "primitive", "gemm",
                              {"m": m, "n": n, "k": k, "dtype": dtype}, t))
    return out


def sdpa_grid(quick: bool) -> list[int]:
    return [256, 1024, 2048] if quick else [128, 256, 512, 1024, 2048, 4096]


def measure_sdpa(ctx: Context, heads: int = 8, head_dim: int = 64) -> list:
    torch = ctx.torch
    out = []
    for seq in sdpa_grid(ctx.quick):
        q, k, v = (torch.randn(1, heads, seq, head_dim, device=ctx.device) for _ in range(3))
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        t = ctx.time(fn, 5 if ctx.quick or seq >= 2048 else 10)
        out.append(ctx.record(f"sdpa/fp32/causal/s{seq}", "primitive", "sdpa",
                              {"seq": seq, "heads": heads, "head_dim": head_dim, "dtype": "fp32", "causal": True}, t))
    return out


def measure_copy(ctx: Context) -> list:
    torch = ctx.torch
    out = []
    sizes_mib = [32, 128] if ctx.quick else [32, 64, 128, 256, 512]
    for mib in sizes_mib:
        src = torch.ones(mib * 2**20 // 4, device=ctx.device)
        dst = torch.empty_like(src)
        t = ctx.time(lambda: dst.copy_(src), 5 if ctx.quick else 10)
        out.append(ctx.record(f"copy/{mib}MiB", "primitive", "copy", {"bytes": mib * 2**20}, t))
    return out


def zipf_indices(rng: np.random.Generator, rows: int, count: int, alpha: float) -> np.ndarray:
    """`count` row ids in [0, rows): uniform for alpha 0, else Zipf(alpha) ranks mapped to rows by a
    fixed random permutation (hot rows scattered over the table, as hashing leaves them)."""
    if alpha <= 0:
        return rng.integers(0, rows, count)
    ranks = np.arange(1, rows + 1, dtype=float)
    p = ranks ** -alpha
    p /= p.sum()
    perm = rng.permutation(rows)
    return perm[rng.choice(rows, size=count, p=p)]


def embedding_grid(quick: bool) -> list[tuple[int, int, float]]:
    if quick:
        return [(1_000_000, 32, 0.0), (1_000_000, 32, 1.05), (100_000, 8, 0.0)]
    return [(r, p, a) for r in (100_000, 1_000_000, 4_000_000) for p in (8, 32) for a in (0.0, 1.05)]


def measure_embedding_bag(ctx: Context, dim: int = 64, batch: int = 512, seed: int = 0) -> list:
    torch = ctx.torch
    rng = np.random.default_rng(seed)
    out = []
    tables: dict[int, object] = {}
    for rows, pooling, alpha in embedding_grid(ctx.quick):
        if rows not in tables:
            tables = {rows: torch.randn(rows, dim, device=ctx.device)}
        weight = tables[rows]
        idx = torch.from_numpy(zipf_indices(rng, rows, batch * pooling, alpha)).to(ctx.device)
        offsets = torch.arange(0, batch * pooling, pooling, device=ctx.device)
        fn = lambda: torch.nn.functional.embedding_bag(idx, weight, offsets, mode="sum")  # noqa: E731
        t = ctx.time(fn, 10 if ctx.quick else 20)
        out.append(ctx.record(f"embedding_bag/r{rows}/p{pooling}/z{alpha:g}", "primitive", "embedding_bag",
                              {"rows": rows, "dim": dim, "pooling": pooling, "batch": batch, "zipf_alpha": alpha,
                               "dtype": "fp32"}, t))
    return out


def measure_all(ctx: Context) -> list:
    return measure_gemm(ctx) + measure_sdpa(ctx) + measure_copy(ctx) + measure_embedding_bag(ctx)
