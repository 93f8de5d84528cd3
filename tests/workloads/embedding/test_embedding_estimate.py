"""The resource estimate of an embedding run (sim/workloads/embedding/sizing.py), which `dcsim check`
prints and `dcsim run` warns from, counts what the run does: every GPU's dense kernels (the DLRM
graph's GEMMs forward and backward and its pointwise passes) and two embedding kernels per
iteration, and events of the right order (a kernel is its own process; an all-to-all is one bulk
transfer per source)."""

from __future__ import annotations

from pathlib import Path

from sim.runner import run
from sim.scenario.estimate import estimate
from sim.scenario.model import load_scenario

ROOT = Path(__file__).resolve().parents[3]


def test_estimate_counts_the_kernels_the_run_runs_and_about_its_events():
    scenario = load_scenario(ROOT / "scenarios" / "emb-dlrm-2x8-a100-recshard.yaml", ["workload.iterations=1"])
    est, result = estimate(scenario), run(scenario)
    kernels = int((result.spans["track"] == "compute").sum())  # one span per kernel, dense and embedding
    assert est.kernels == kernels == 16 * 81
    assert 0.67 <= est.events / result.events <= 1.5, (est.events, result.events)
