"""Pareto fronts of sweep tables, for notebooks: which points are not beaten on every objective.

    from sim.studies.pareto import pareto_front
    front = pareto_front(table, minimize=["cost_usd"], maximize=["samples_per_s"])

A row dominates another when it is at least as good on every objective and strictly better on at
least one; the front is the set of rows no other row dominates. Rows with a missing objective or a
status other than 'ok' take no part. Equal rows do not dominate each other, so both stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sim.errors import ScenarioError


def objective_matrix(df: pd.DataFrame, minimize: Sequence[str], maximize: Sequence[str]) -> np.ndarray:
    """Objectives as columns of a float matrix, all turned into 'smaller is better'."""
    missing = [c for c in (*minimize, *maximize) if c not in df.columns]
    if missing:
        raise ScenarioError(
            f"no such column; columns are {', '.join(map(str, df.columns))}", path="pareto", value=missing[0]
        )
    cols = [df[c].to_numpy(dtype=float) for c in minimize] + [-df[c].to_numpy(dtype=float) for c in maximize]
    return np.column_stack(cols) if cols else np.empty((len(df), 0))


def dominated(objectives: np.ndarray) -> np.ndarray:
    """Boolean mask: row i is dominated by some row j (all <=, one <) in a minimise-all matrix."""
    n = len(objectives)
    mask = np.zeros(n, dtype=bool)
    for i in range(n):
        no_worse = np.all(objectives <= objectives[i], axis=1)
        better = np.any(objectives < objectives[i], axis=1)
        mask[i] = bool(np.any(no_worse & better))
    return mask


def pareto_front(
    df: pd.DataFrame, minimize: Sequence[str] = (), maximize: Sequence[str] = (), only_ok: bool = True
) -> pd.DataFrame:
    """The non-dominated rows of `df` (original index kept), sorted by the first objective."""
    if not minimize and not maximize:
        raise ScenarioError("give at least one objective to minimize or maximize", path="pareto")
    objectives = [*minimize, *maximize]
    rows = df.dropna(subset=[c for c in objectives if c in df.columns])
    if only_ok and "status" in rows.columns:
        rows = rows[rows["status"] == "ok"]
    front = rows[~dominated(objective_matrix(rows, minimize, maximize))]
    return front.sort_values(objectives[0], ascending=objectives[0] in minimize)
