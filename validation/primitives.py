"""Single-process primitives: GEMM, causal SDPA, memory copy, embedding_bag.

Each `measure_*` function times one primitive over a grid of parameters (smaller with `quick`) on the
context's device and returns one `Record` per point (family `primitive`). Calibration fits the device
model to these; nothing here knows about the model.

- `gemm`: (m x k) @ (k x n) over square, rectangular and skinny shapes, fp32 and bf16;
- `sdpa`: causal scaled-dot-product attention, batch 1, over sequence lengths (fp32 on a CPU, bf16
  on a GPU - the dtypes the compositions run);
- `copy`: `dst.copy_(src)` of large buffers (bytes moved = read + write, so 2 x size);
- `embedding_bag`: sum-pooled lookups of `batch` bags of `pooling` indices into a `rows x dim` table,
  indices uniform or Zipf-distributed (`zipf_alpha`), drawn from a seeded numpy generator. Each
  timed call uses the next of several index sets (as a training loop sees a new batch each step),
  so the rows a call reads are cached only as far as the table's size and skew allow.

Grids depend on the device: a GPU runs shapes up to the sizes of real models (a CPU core would
take minutes on them), and on a GPU every sample is 10 back-to-back calls (`Context.inner`).
"""

from __future__ import annotations

import numpy as np

from validation.timing import Context

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def gemm_grid(quick: bool, gpu: bool = False) -> list[tuple[str, int, int, int]]:
    if gpu:
        shapes = [(n, n, n) for n in ((256, 1024, 4096, 8192) if quick else (256, 512, 1024, 2048, 4096, 8192))]
        shapes += [(4096, 12288, 4096), (4096, 4096, 14336), (16, 8192, 8192)]
        if not quick:
            shapes += [(4096, 28672, 4096), (8192, 1024, 8192), (8192, 16, 8192), (16384, 512, 512)]
        return [(d, *s) for d in ("fp32", "bf16") for s in shapes]
    if quick:
        shapes = [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (1024, 1536, 512), (16, 1024, 1024)]
        return [(d, *s) for d in ("fp32", "bf16") for s in shapes]
    shapes = [(n, n, n) for n in (64, 128, 256, 512, 1024, 2048)]
    shapes += [
        (1024, 1536, 512),
        (1024, 512, 512),
        (2048, 2816, 512),
        (2048, 512, 1408),
        (16, 1024, 1024),
        (1024, 16, 1024),
        (4096, 256, 256),
    ]
    return [(d, *s) for d in ("fp32", "bf16") for s in shapes]


def measure_gemm(ctx: Context) -> list:
    torch = ctx.torch
    out = []
    for dtype, m, n, k in gemm_grid(ctx.quick, ctx.gpu):
        tdt = getattr(torch, DTYPES[dtype])
        a = torch.randn(m, k, device=ctx.device).to(tdt)
        b = torch.randn(k, n, device=ctx.device).to(tdt)
        flop = 2.0 * m * n * k
        repeats = int(np.clip(0.15 / max(flop / 1.5e11, 1e-5), 5, 30 if not ctx.quick else 10))
        t = ctx.time(lambda: a @ b, repeats, inner=ctx.inner)
        out.append(
            ctx.record(f"gemm/{dtype}/{m}x{n}x{k}", "primitive", "gemm", {"m": m, "n": n, "k": k, "dtype": dtype}, t)
        )
    return out


def sdpa_grid(quick: bool, gpu: bool = False) -> list[int]:
    if gpu:
        return [1024, 4096, 16384] if quick else [512, 1024, 2048, 4096, 8192, 16384, 32768]
    return [256, 1024, 2048] if quick else [128, 256, 512, 1024, 2048, 4096]


def compute_dtype(ctx: Context) -> str:
    """The dtype attention and the transformer compositions run in: fp32 on a CPU core (its bf16
    path is oneDNN's, far from peak), bf16 on a GPU (what inference runs)."""
    return "bf16" if ctx.gpu else "fp32"


def measure_sdpa(ctx: Context) -> list:
    torch = ctx.torch
    heads, head_dim = (32, 128) if ctx.gpu else (8, 64)
    dtype = compute_dtype(ctx)
    out = []
    for seq in sdpa_grid(ctx.quick, ctx.gpu):
        q, k, v = (
            torch.randn(1, heads, seq, head_dim, device=ctx.device).to(getattr(torch, DTYPES[dtype])) for _ in range(3)
        )
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        t = ctx.time(fn, 5 if ctx.quick or (seq >= 2048 and not ctx.gpu) else 10, inner=ctx.inner)
        out.append(
            ctx.record(
                f"sdpa/{dtype}/causal/s{seq}",
                "primitive",
                "sdpa",
                {"seq": seq, "heads": heads, "head_dim": head_dim, "dtype": dtype, "causal": True},
                t,
            )
        )
    return out


def measure_copy(ctx: Context) -> list:
    torch = ctx.torch
    out = []
    if ctx.gpu:
        sizes_mib = [256, 1024] if ctx.quick else [64, 256, 1024, 2048, 4096]
    else:
        sizes_mib = [32, 128] if ctx.quick else [32, 64, 128, 256, 512]
    for mib in sizes_mib:
        src = torch.ones(mib * 2**20 // 4, device=ctx.device)
        dst = torch.empty_like(src)
        t = ctx.time(lambda: dst.copy_(src), 5 if ctx.quick else 10, inner=ctx.inner)
        out.append(ctx.record(f"copy/{mib}MiB", "primitive", "copy", {"bytes": mib * 2**20}, t))
    return out


def zipf_indices(rng: np.random.Generator, rows: int, count: int, alpha: float) -> np.ndarray:
    """`count` row ids in [0, rows): uniform for alpha 0, else Zipf(alpha) ranks mapped to rows by a
    fixed random permutation (hot rows scattered over the table, as hashing leaves them)."""
    if alpha <= 0:
        return rng.integers(0, rows, count)
    ranks = np.arange(1, rows + 1, dtype=float)
    p = ranks**-alpha
    p /= p.sum()
    perm = rng.permutation(rows)
    return perm[rng.choice(rows, size=count, p=p)]


def embedding_grid(quick: bool, gpu: bool = False) -> list[tuple[int, int, float]]:
    if gpu:
        rows = (1_000_000, 20_000_000) if quick else (1_000_000, 10_000_000, 40_000_000)
        return [(r, p, a) for r in rows for p in (8, 32) for a in (0.0, 1.05)]
    if quick:
        return [(1_000_000, 32, 0.0), (1_000_000, 32, 1.05), (100_000, 8, 0.0)]
    return [(r, p, a) for r in (100_000, 1_000_000, 4_000_000) for p in (8, 32) for a in (0.0, 1.05)]


LOOKUPS_DRAWN = 2**21  # indices drawn per grid point, cut into index sets (>= 8) cycled through by the calls


def measure_embedding_bag(ctx: Context, dim: int = 64, batch: int | None = None, seed: int = 0) -> list:
    torch = ctx.torch
    batch = batch or (16384 if ctx.gpu else 512)
    rng = np.random.default_rng(seed)
    out = []
    tables: dict[int, object] = {}
    for rows, pooling, alpha in embedding_grid(ctx.quick, ctx.gpu):
        if rows not in tables:
            tables = {rows: torch.randn(rows, dim, device=ctx.device)}
        weight = tables[rows]
        sets = max(8, LOOKUPS_DRAWN // (batch * pooling))
        drawn = torch.from_numpy(zipf_indices(rng, rows, sets * batch * pooling, alpha)).to(ctx.device)
        idx_sets = drawn.view(sets, batch * pooling)
        offsets = torch.arange(0, batch * pooling, pooling, device=ctx.device)
        state = {"i": 0}

        def fn():
            state["i"] += 1
            return torch.nn.functional.embedding_bag(idx_sets[state["i"] % sets], weight, offsets, mode="sum")

        t = ctx.time(fn, 10 if ctx.quick else 24, inner=ctx.inner)
        out.append(
            ctx.record(
                f"embedding_bag/r{rows}/p{pooling}/z{alpha:g}",
                "primitive",
                "embedding_bag",
                {"rows": rows, "dim": dim, "pooling": pooling, "batch": batch, "zipf_alpha": alpha, "dtype": "fp32"},
                t,
            )
        )
    return out


def measure_all(ctx: Context) -> list:
    return measure_gemm(ctx) + measure_sdpa(ctx) + measure_copy(ctx) + measure_embedding_bag(ctx)
