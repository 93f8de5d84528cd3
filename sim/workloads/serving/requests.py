"""Request sources for `kind: serving`: synthetic arrivals or a trace CSV, as plain arrays.

- Arrivals: `poisson` (exponential gaps, mean 1 / rate) or `gamma` (gamma gaps with the same mean and
  coefficient of variation `cv`: shape 1 / cv^2, so cv = 1 is Poisson and cv > 1 is burstier), from
  the simulation's seeded substream "arrivals"; lengths from `fixed`, `uniform` (min..max),
  `exponential` or `lognormal` (median chosen so that the mean is `mean`) distributions, rounded and
  clipped to [min, max] - each from its own substream, so changing one length distribution leaves
  the arrival times and the other lengths as they were.
- Trace: a CSV with a header naming at least arrival_s, prompt_tokens, decode_tokens (and optionally
  cached_tokens: prefix-cache hits), one request per row; rows are sorted by arrival.

`prompt_tokens` are the new tokens to prefill and `cached_tokens` the tokens of the prompt's prefix
already in the KV cache (as in cp_inference): a request holds prompt + cached + decode tokens of KV
when it finishes.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.errors import ScenarioError

REQUEST_TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "decode_tokens")


@dataclass(frozen=True)
class RequestArrays:
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    decode_tokens: np.ndarray
    cached_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)


def sample_lengths(spec, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` integer lengths from a `Lengths` spec."""
    if spec.dist == "fixed":
        values = np.full(n, spec.mean)
    elif spec.dist == "uniform":
        high = spec.max if spec.max is not None else 2 * spec.mean - spec.min
        values = rng.uniform(spec.min, high, n)
    elif spec.dist == "exponential":
        values = rng.exponential(spec.mean, n)
    else:  # lognormal with mean `mean`: mu = ln(mean) - sigma^2 / 2
        values = rng.lognormal(np.log(spec.mean) - spec.sigma**2 / 2, spec.sigma, n)
    values = np.maximum(np.rint(values), spec.min)
    if spec.max is not None:
        values = np.minimum(values, spec.max)
    return values.astype(np.int64)


def arrival_times(arrivals, sim) -> np.ndarray:
    rng = sim.rng("arrivals")
    n, mean = arrivals.count, 1.0 / arrivals.rate_per_s
    if arrivals.process == "poisson":
        gaps = rng.exponential(mean, n)
    else:
        shape = 1.0 / arrivals.cv**2
        gaps = rng.gamma(shape, mean / shape, n)
    return np.cumsum(gaps)


def synthetic(arrivals, sim) -> RequestArrays:
    n = arrivals.count
    cached = (
        sample_lengths(arrivals.cached_tokens, n, sim.rng("arrivals/cached_tokens"))
        if arrivals.cached_tokens is not None
        else np.zeros(n, dtype=np.int64)
    )
    prompt = np.maximum(sample_lengths(arrivals.prompt_tokens, n, sim.rng("arrivals/prompt_tokens")), 1)
    return RequestArrays(
        arrival_times(arrivals, sim),
        prompt,
        sample_lengths(arrivals.decode_tokens, n, sim.rng("arrivals/decode_tokens")),
        cached,
    )


def read_trace(path: str) -> RequestArrays:
    """The requests of a trace CSV (one-line ScenarioError on a missing file or a bad row)."""
    file = Path(path)
    if not file.is_file():
        raise ScenarioError(
            "trace file not found (a CSV: arrival_s, prompt_tokens, decode_tokens[, cached_tokens])",
            path="workload.trace",
            value=path,
        )
    with file.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUEST_TRACE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ScenarioError(
                f"trace CSV lacks column(s) {', '.join(missing)}; needs arrival_s, prompt_tokens, decode_tokens"
                " (cached_tokens optional)",
                path="workload.trace",
                value=path,
            )
        rows = []
        for line, row in enumerate(reader, start=2):
            try:
                values = (
                    float(row["arrival_s"]),
                    int(row["prompt_tokens"]),
                    int(row["decode_tokens"]),
                    int(row.get("cached_tokens") or 0),
                )
            except (TypeError, ValueError):
                raise ScenarioError(
                    f"line {line}: arrival_s must be a number and token counts integers",
                    path="workload.trace",
                    value=path,
                ) from None
            if values[0] < 0 or values[1] < 1 or values[2] < 0 or values[3] < 0:
                raise ScenarioError(
                    f"line {line}: needs arrival_s >= 0, prompt_tokens >= 1, decode_tokens >= 0, cached_tokens >= 0",
                    path="workload.trace",
                    value=path,
                )
            rows.append(values)
    if not rows:
        raise ScenarioError("trace CSV has no requests", path="workload.trace", value=path)
    rows.sort(key=lambda r: r[0])
    cols = list(zip(*rows))
    return RequestArrays(np.array(cols[0], dtype=float), *(np.array(c, dtype=np.int64) for c in cols[1:]))


def requests_of(config, sim) -> RequestArrays:
    return read_trace(config.trace) if config.trace is not None else synthetic(config.arrivals, sim)
