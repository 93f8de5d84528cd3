"""Driving a run with the progress bar steps the engine exactly as without it: same metrics, same
event count (sim/engine/progress.py `drive`, sim/engine/simulation.py `CountingEnvironment.run`)."""

from sim import load_scenario, run
from sim.engine.simulation import REPORT_EVERY, Simulation


def test_a_run_with_the_progress_bar_counts_and_computes_what_a_run_without_it_does():
    scenario = load_scenario("scenarios/emb-dlrm-2x8-a100-size-greedy.yaml")
    quiet, shown = run(scenario), run(scenario, progress=True)
    assert quiet.events == shown.events > REPORT_EVERY
    assert quiet.metrics == shown.metrics


def test_reports_add_up_to_the_events_processed():
    sim = Simulation(seed=0)

    def ticker():
        for _ in range(3 * REPORT_EVERY + 5):
            yield sim.timeout(1)

    reports: list[int] = []
    sim.env.run(until=sim.process(ticker()), report=reports.append)
    assert sum(reports) == sim.env.events_processed
    assert reports[:3] == [REPORT_EVERY] * 3
