"""Results over several seeds: the mean and a confidence interval of every scalar metric.

    from sim import load_scenario
    from sim.studies.seeds import run_seeds
    runs, summary = run_seeds(load_scenario("scenarios/ingest-dlrm-on-trainer.yaml"), seeds=range(5))
    summary.loc["data_stall_fraction", ["mean", "ci_low", "ci_high"]]

A scenario's randomness comes from its `seed` (every random process draws from a named substream
of it), so runs with different seeds are independent replications. `run_seeds` runs the scenario
once per seed and returns one row per seed (scalar metrics, sim time, wall time) and a summary per
metric: n, mean, standard deviation, standard error and the two-sided Student-t confidence interval
(`scipy.stats.t`) at `confidence`. A metric that does not vary across seeds (deterministic
workloads) has a zero-width interval.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy import stats

from sim.runner import run
from sim.scenario.model import Scenario


def scalar_metrics(metrics: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a metrics dict, nested keys joined with dots (lists and strings skipped)."""
    out = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(scalar_metrics(value, f"{name}."))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)) and value is not None:
            out[name] = float(value)
    return out


def confidence_summary(table: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per column of `table`: n, mean, std, sem, ci_low, ci_high (Student t, two-sided)."""
    rows = {}
    for col in table.columns:
        values = table[col].dropna().to_numpy(dtype=float)
        n = len(values)
        mean = float(values.mean()) if n else np.nan
        std = float(values.std(ddof=1)) if n > 1 else 0.0
        sem = std / np.sqrt(n) if n > 1 else 0.0
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * sem) if n > 1 and sem > 0 else 0.0
        rows[col] = {"n": n, "mean": mean, "std": std, "sem": sem, "ci_low": mean - half, "ci_high": mean + half}
    return pd.DataFrame.from_dict(rows, orient="index")


def run_seeds(
    scenario: Scenario, seeds: Iterable[int] = range(5), confidence: float = 0.95, progress: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run `scenario` once per seed; returns (one row per seed, summary per metric)."""
    seeds = list(seeds)
    rows = []
    iterator = seeds
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(seeds, desc=f"{scenario.name} seeds", unit="run")
    for seed in iterator:
        result = run(scenario.model_copy(update={"seed": int(seed)}))
        rows.append(
            {
                "seed": int(seed),
                "sim_time_s": result.sim_time_s,
                "wall_s": result.wall_s,
                **scalar_metrics(result.metrics),
            }
        )
    table = pd.DataFrame(rows).set_index("seed")
    return table, confidence_summary(table.drop(columns=["wall_s"]), confidence)
