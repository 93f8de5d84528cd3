"""The critical path (sim/report/critical_path.py) walks back through the causes spans record, and
the bottleneck report (sim/report/bottleneck.py) charges every second of it to one resource."""

import pandas as pd
import pytest

from hardware_models import catalog
from sim.engine.compute import Device
from sim.engine.simulation import SPAN_COLUMNS, Simulation
from sim.report.bottleneck import bottleneck_report, critical_path, summary_rows
from sim.report.critical_path import walk


def table(*rows) -> pd.DataFrame:
    """Spans from (id, component, track, name, start, end, category, after, until) tuples."""
    df = pd.DataFrame(
        [(c, t, n, s, e, 0.0, 0.0, cat, i, a, u) for i, c, t, n, s, e, cat, a, u in rows], columns=SPAN_COLUMNS
    )
    df["duration_s"] = df["end_s"] - df["start_s"]
    return df


def hand_spans(*rows) -> pd.DataFrame:
    """Spans without recorded causes, from (component, track, name, start, end[, category])."""
    df = pd.DataFrame(
        [(r[0], r[1], r[2], r[3], r[4], 0.0, 0.0, r[5] if len(r) > 5 else "") for r in rows],
        columns=SPAN_COLUMNS[:8],
    )
    df["duration_s"] = df["end_s"] - df["start_s"]
    return df


def test_the_path_follows_recorded_causes_not_the_latest_finisher():
    # c waited for a (recorded), although b ended later and just before c started
    df = table(
        (0, "h0/g0", "compute", "a", 0.0, 1.0, "compute", -1, -1),
        (1, "h0/g1", "compute", "b", 0.0, 1.9, "compute", -1, -1),
        (2, "h0/g0", "nic", "c ->h1/g0", 2.0, 3.0, "comm", 0, 0),
    )
    path = walk(df)
    assert list(path.spans["name"]) == ["a", "c ->h1/g0"]
    assert list(path.spans["gap_before_s"]) == [0.0, 1.0]  # the latency between a's end and c's start
    assert path.exact and path.total_s == pytest.approx(3.0)
    report = bottleneck_report(df)
    assert report["critical_path"] == {"compute": 1.0, "latency": 1.0, "nic": 1.0}


def test_a_span_that_waited_for_a_flow_is_charged_to_the_flow():
    # the comm stream held a collective (ended by its flow); the kernel after it waited for the stream
    df = table(
        (0, "h0/g0", "compute", "k0", 0.0, 1.0, "compute", -1, -1),
        (1, "h0/g0", "nic", "send ->h1/g0", 1.0, 4.0, "comm", 0, 0),
        (2, "h0/g0", "comm", "all_reduce (stream)", 1.0, 4.0, "comm", 0, 1),
        (3, "h0/g0", "compute", "k1", 4.0, 5.0, "compute", 2, 2),
    )
    report = bottleneck_report(df)
    assert report["critical_path"] == {"nic": 3.0, "compute": 2.0}
    assert report["resource"] == "nic" and report["share_of_critical_path"] == pytest.approx(0.6)


def test_a_path_that_reaches_a_dropped_span_says_it_is_partial():
    df = table(
        (5, "h0/g0", "compute", "k5", 4.0, 5.0, "compute", 4, 4),  # 4 was dropped (trace_limit)
    )
    report = bottleneck_report(df, spans_dropped=5)
    assert report["exact"] is False and "trace_limit" in report["partial"]
    assert report["critical_path"] == {"unrecorded": 4.0, "compute": 1.0}
    assert report["resource"] == "compute"
    assert any("partial" in v for _, v in summary_rows(report))


def test_spans_without_causes_get_them_from_their_times():
    df = hand_spans(
        ("h0/g0", "compute", "A", 0.0, 1.0, "compute"),
        ("h0/g1", "compute", "short side job", 0.0, 0.5, "compute"),
        ("h0/g0", "nic", "B ->h1/g0", 1.0, 3.0, "comm"),
        ("h1/g0", "compute", "C", 3.5, 4.0, "compute"),
    )
    path = critical_path(df)
    assert list(path["name"]) == ["A", "B ->h1/g0", "C"]
    assert list(path["gap_before_s"]) == [0.0, 0.0, 0.5]
    report = bottleneck_report(df)
    assert report["critical_path"] == {"nic": 2.0, "compute": 1.5, "latency": 0.5}
    assert report["resource"] == "nic" and report["critical_path_s"] == pytest.approx(4.0)


def test_a_flow_is_preferred_to_the_stream_span_that_waits_for_it_when_causes_are_inferred():
    df = hand_spans(
        ("h0/g0", "comm", "send (stream)", 0.0, 2.0, "comm"), ("h0/g0", "nic", "send ->h1/g0", 0.0, 2.0, "comm")
    )
    assert bottleneck_report(df)["resource"] == "nic"


def test_replayed_spans_are_charged_to_the_resource_they_copy():
    df = hand_spans(
        ("h0/g0", "compute", "L0 attention", 0.0, 1.0, "attention"),
        ("h0/g0", "scale_up", "L0 all_reduce ->h0/g1", 1.0, 1.2, "comm"),
        ("h0/g0", "compute", "L1 compute (replayed)", 1.2, 10.0, "replayed"),
    )
    report = bottleneck_report(df)
    assert report["resource"] == "compute"
    assert report["share_of_critical_path"] == pytest.approx(9.8 / 10.0)


def test_compute_bound_chain_names_compute_and_the_summary_rows_say_so():
    df = hand_spans(
        *[("h0/g0", "compute", f"k{i}", i, i + 0.9, "compute") for i in range(5)],
        *[("h0/g0", "nic", f"s{i} ->h1/g0", i + 0.9, i + 1.0, "comm") for i in range(5)],
    )
    report = bottleneck_report(df)
    assert report["resource"] == "compute" and report["share_of_critical_path"] == pytest.approx(0.9)
    assert summary_rows(report)[0] == ("bottleneck", "GPU compute, 90% of critical path")


def test_a_simulated_chain_of_kernels_and_latency_adds_up_to_the_run():
    sim = Simulation()
    gpu = Device(sim, "h0/g0", catalog.resolve("device", "h100-sxm"), host=0)

    def chain():
        for _ in range(3):
            yield gpu.run("kernel", 1.0)
            yield sim.timeout(0.25)

    sim.process(chain())
    sim.env.run()
    report = bottleneck_report(sim.recorder.frame(), sim_time_s=sim.now)
    assert report["critical_path"] == pytest.approx({"compute": 3.0, "latency": 0.5, "idle": 0.25})
    assert report["critical_path_s"] == pytest.approx(sim.now)


@pytest.mark.parametrize(
    "scenario, overrides",
    [
        ("scenarios/allreduce-2x8-h100.yaml", ["workload.algorithm=ring"]),
        ("tests/report/data/train-llama3-8b-tp8-dp8.yaml", ["workload.global_batch_tokens=262144"]),
        ("scenarios/cp-70b-h100-2hosts-128k.yaml", []),
    ],
)
def test_spans_dropped_past_the_trace_limit_leave_the_critical_path_whole(scenario, overrides):
    """Dropped spans keep their skeletons (sim/engine/span_skeleton.py): the report of a run whose
    trace is capped is the report of the same run with every span kept."""
    from pathlib import Path

    from sim.runner import run
    from sim.scenario.model import load_scenario

    path = str(Path(__file__).resolve().parents[2] / scenario)
    full = run(load_scenario(path, [*overrides, "trace_limit=100000000"])).bottleneck
    capped = run(load_scenario(path, [*overrides, "trace_limit=50"]))
    assert capped.sim.recorder.dropped > 0 and capped.bottleneck["exact"]

    def seconds(path: dict) -> dict:  # rounding in replayed times can leave femtoseconds of latency
        return {k: v for k, v in path.items() if v > 1e-12}

    assert seconds(capped.bottleneck["critical_path"]) == pytest.approx(seconds(full["critical_path"]), rel=1e-9)
    assert capped.bottleneck["resource"] == full["resource"]


def test_the_report_of_a_run_is_the_report_of_its_span_and_link_tables():
    """`run_bottleneck` computes on the recorder's columns and the network's link columns (no pandas:
    start-up); the same spans and links as the DataFrames a user gets (`result.spans`,
    `result.links`) give the same report."""
    from pathlib import Path

    from sim.runner import run
    from sim.scenario.model import load_scenario

    path = str(Path(__file__).resolve().parents[2] / "scenarios/allreduce-2x8-h100.yaml")
    result = run(load_scenario(path, ["workload.bytes=64 MiB"]))
    tables = bottleneck_report(result.spans, result.links, result.cluster.topology, result.sim_time_s)
    assert tables == result.bottleneck
    assert result.bottleneck["resource"] == "scale_up" and result.bottleneck["link"]


def test_an_empty_link_table_summarises_to_nothing():
    from sim.report.bottleneck import link_summary

    assert link_summary(None) == {} and link_summary(pd.DataFrame()) == {}
    assert link_summary({"link": [], "kind": [], "bytes": [], "utilisation": []}) == {}
