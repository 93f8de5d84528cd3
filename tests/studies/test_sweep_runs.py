"""`sweep_runs` (sim/studies/cp_scaling.py, the notebooks' one-key sweeps): one row per value, with
the run's scalar metrics and its top-level text metrics (ingestion's `bounding_stage`)."""

from __future__ import annotations

from pathlib import Path

from sim.scenario.model import load_scenario
from sim.studies.cp_scaling import sweep_runs

ROOT = Path(__file__).resolve().parents[2]


def test_one_row_per_value_with_scalar_and_text_metrics():
    base = load_scenario(
        ROOT / "scenarios" / "ingest-dlrm-disaggregated.yaml", ["workload.duration_s=2", "workload.warmup_s=0.5"]
    )
    table = sweep_runs(base, "workload.preprocessing.workers", [8, 11])
    assert list(table["workload.preprocessing.workers"]) == [8, 11]
    assert table["bounding_stage"].map(type).eq(str).all()  # a text metric kept as text
    assert (table["trainer_samples_per_s"] > 0).all()
    # more workers feed the trainers at least as well
    assert table["trainer_samples_per_s"].iloc[1] >= table["trainer_samples_per_s"].iloc[0]
