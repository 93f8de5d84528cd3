"""What users see: bottleneck reports, resource utilisation, the Perfetto trace, plots, seeds,
progress and the generated scenario reference.

Bottleneck cases have known answers: a ring all-reduce across two hosts waits on the NICs; the same
collective with NVLink slowed 20x waits on NVLink; an all-to-all over a 4:1 oversubscribed fat-tree
waits on the leaf uplinks. Interval maths is checked against hand-computed spans.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import stats

from hardware_models.units import format_bytes
from sim import load_scenario, run
from sim.report.resources import busy_by_resource, resource_of, tier_bytes, utilisation_over_time
from sim.report.trace import chrome_trace, parse_window
from tests.conftest import make_scenario

ALLREDUCE = "scenarios/allreduce-2x8-h100.yaml"
FATTREE = "scenarios/alltoall-fattree-oversub.yaml"


def spans(*rows) -> pd.DataFrame:
    """Spans from (component, track, name, start, end[, category]) tuples."""
    df = pd.DataFrame(
        [(r[0], r[1], r[2], r[3], r[4], 0.0, 0.0, r[5] if len(r) > 5 else "") for r in rows],
        columns=["component", "track", "name", "start_s", "end_s", "bytes", "flop", "category"],
    )
    df["duration_s"] = df["end_s"] - df["start_s"]
    return df


@pytest.fixture(scope="module")
def ring_nic_bound():
    return run(load_scenario(ALLREDUCE, ["workload.algorithm=ring", "workload.bytes=256MiB"]))


# ---- resources and interval maths ---------------------------------------------------------------
@pytest.mark.parametrize(
    "component,track,category,expected",
    [
        ("h0/g3", "compute", "compute", "compute"),
        ("h0/g3", "comm", "comm", "gpu:comm"),
        ("h0/g3", "nic", "comm", "nic"),
        ("h0/g3", "scale_up", "comm", "scale_up"),
        ("h0/g3", "host", "comm", "host"),
        ("h1/ddr5-host", "memory", "comm", "memory:ddr5-host"),
        ("storage7/hdd", "memory", "comm", "storage:hdd"),
        ("h0", "cpu", "compute", "cpu"),
        ("preproc2/g0", "compute", "compute", "compute"),
        ("h0", "trainer", "stall", "stall"),
        ("h0/g0", "compute", "replayed", "compute"),
    ],
)
def test_every_span_maps_to_the_resource_it_occupied(component, track, category, expected):
    assert resource_of(component, track, category) == expected


def test_busy_time_counts_overlapping_spans_on_one_instance_once():
    df = spans(
        ("h0/g0", "nic", "a ->h1/g0", 0.0, 2.0),
        ("h0/g0", "nic", "b ->h1/g1", 1.0, 3.0),
        ("h0/g1", "nic", "c ->h1/g2", 0.0, 1.0),
    )
    table = busy_by_resource(df, window_s=4.0).set_index("resource")
    assert table.loc["nic", "instances"] == 2
    assert table.loc["nic", "busy_s"] == pytest.approx(3.0 + 1.0)  # [0,3] on g0 + [0,1] on g1
    assert table.loc["nic", "utilisation"] == pytest.approx(4.0 / (2 * 4.0))


def test_utilisation_over_time_integrates_to_the_busy_time():
    df = spans(
        ("h0/g0", "compute", "k", 0.0, 1.0), ("h0/g0", "compute", "k", 2.5, 4.0), ("h0/g1", "compute", "k", 0.5, 3.0)
    )
    util = utilisation_over_time(df, bins=40)
    width = 4.0 / 40
    assert (util["compute"] * width * 2).sum() == pytest.approx(1.0 + 1.5 + 2.5)
    assert util["compute"].between(0, 1).all()


def test_tier_bytes_reads_leave_the_tier_and_writes_enter_it():
    links = pd.DataFrame(
        {
            "link": ["h0/ddr5->h0/cpu", "h0/cpu->h0/ddr5", "h1/ddr5->h1/cpu", "storage3/hdd->storage3"],
            "kind": ["memory"] * 4,
            "bytes": [10.0, 4.0, 6.0, 7.0],
        }
    )
    table = tier_bytes(links).set_index(["tier", "where"])
    assert table.loc[("ddr5", "host"), "read_bytes"] == 16.0
    assert table.loc[("ddr5", "host"), "write_bytes"] == 4.0
    assert table.loc[("hdd", "storage"), "read_bytes"] == 7.0


# ---- critical path --------------------------------------------------------------------------------
def test_ring_allreduce_across_hosts_is_nic_bound_on_a_nic_link(ring_nic_bound):
    b = ring_nic_bound.bottleneck
    assert b["resource"] == "nic"
    assert b["share_of_critical_path"] > 0.9
    src, dst = b["link"].split("->")
    assert dst == "switch" and src.startswith("h")  # a GPU's NIC uplink
    assert b["link_utilisation"] > 0.9


def test_hierarchical_allreduce_with_slow_nvlink_is_nvlink_bound():
    result = run(
        load_scenario(ALLREDUCE, ["hardware.scale_up={base: nvlink4, bandwidth: 20GB/s}", "workload.bytes=256MiB"])
    )
    b = result.bottleneck
    assert b["resource"] == "scale_up" and b["share_of_critical_path"] > 0.9
    assert b["link"].endswith("/nvs") or "/nvs->" in b["link"]


def test_alltoall_on_an_oversubscribed_fat_tree_is_bound_by_the_leaf_uplinks():
    b = run(load_scenario(FATTREE, ["workload.bytes=64MiB"])).bottleneck
    assert b["resource"] == "fabric"
    assert b["link"].startswith("leaf") and "spine" in b["link"]
    assert b["links"]["fabric"]["max_utilisation"] > 0.95


# ---- trace ---------------------------------------------------------------------------------------
def test_trace_has_one_process_per_host_and_named_threads_with_bytes(ring_nic_bound):
    trace = chrome_trace(ring_nic_bound.spans)
    json.dumps(trace)  # serialisable
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"host 0", "host 1", "cluster utilisation"} <= set(procs.values())
    assert {"g7 nic", "g0 scale_up"} <= set(threads.values())  # the ring leaves a host from g7
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(ring_nic_bound.spans)
    for e in slices:
        assert (e["pid"], e["tid"]) in threads and e["dur"] >= 0 and procs[e["pid"]].startswith("host ")
    flow = next(e for e in slices if e["args"]["resource"] == "nic")
    host = int(procs[flow["pid"]].split()[1])
    assert flow["args"]["size"] == format_bytes(flow["args"]["bytes"])
    assert threads[(flow["pid"], flow["tid"])].endswith("nic") and host in (0, 1)
    # a ring all-reduce of S bytes over n ranks moves 2 (n - 1) S bytes in all, whatever its slices
    moved = sum(e["args"]["bytes"] for e in slices if e["args"]["resource"] in ("nic", "scale_up"))
    assert moved == pytest.approx(2 * 15 * 256 * 2**20)
    assert any(e["ph"] == "C" for e in events)  # utilisation counters


def test_trace_size_cap_and_time_window(ring_nic_bound):
    s = ring_nic_bound.spans
    capped = chrome_trace(s, max_events=10)
    assert sum(e["ph"] == "X" for e in capped["traceEvents"]) == 10
    assert capped["otherData"]["spans_total"] == len(s)
    t1 = float(s["end_s"].max()) / 4
    windowed = chrome_trace(s, max_events=None, window_s=(0.0, t1))
    ts = [e["ts"] for e in windowed["traceEvents"] if e["ph"] == "X"]
    assert ts and max(ts) <= t1 * 1e6 and len(ts) == int((s["start_s"] <= t1).sum())
    assert parse_window("0:2ms") == (0.0, 0.002) and parse_window(None) is None


# ---- CLI output ----------------------------------------------------------------------------------
def test_dcsim_run_out_writes_plots_trace_and_the_bottleneck_report(tmp_path, capsys):
    from sim.cli import main

    with pytest.raises(SystemExit) as done:
        main(
            [
                "run",
                ALLREDUCE,
                "--set",
                "workload.algorithm=ring",
                "--set",
                "workload.bytes=64MiB",
                "--out",
                str(tmp_path),
                "--quiet",
                "--trace-window",
                "0:1ms",
            ]
        )
    assert done.value.code == 0
    table = capsys.readouterr().out
    assert "bottleneck" in table and "NIC (scale-out)" in table and "critical path" in table
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {"scenario", "kind", "metrics", "sim_time_s", "wall_s", "events"} <= set(summary)
    assert summary["bottleneck"]["resource"] == "nic"
    for name in ("timeline", "utilisation", "links", "topology"):
        with Image.open(tmp_path / f"{name}.png") as img:
            assert img.size[0] > 400 and img.size[1] > 200
    assert not (tmp_path / "tier_bytes.png").exists()  # no tier traffic in a collective
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert max(e["ts"] for e in trace["traceEvents"] if e["ph"] == "X") <= 1e3


def test_json_output_keeps_the_contract_fields_and_adds_the_report(capsys):
    from sim.cli import main

    with pytest.raises(SystemExit):
        main(["run", ALLREDUCE, "--set", "workload.bytes=1MiB", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert list(out)[:6] == ["scenario", "kind", "metrics", "sim_time_s", "wall_s", "events"]
    assert out["bottleneck"]["resource"] in ("nic", "scale_up")


# ---- plots from data (no simulation) -------------------------------------------------------------
def _labelled(fig) -> None:
    for ax in fig.axes:
        if ax.axison and ax.has_data() and ax.get_label() != "<colorbar>":  # graph drawings: axis off
            assert ax.get_xlabel() or ax.get_ylabel(), "every plotted axis has a label"


def test_generic_plots_label_their_axes(ring_nic_bound, tmp_path):
    import matplotlib.pyplot as plt

    for name in ("timeline", "utilisation", "links", "topology", "tier_bytes"):
        fig = getattr(ring_nic_bound.plot, name)()
        _labelled(fig)
        plt.close(fig)


def test_kind_specific_plots_draw_from_metrics(tmp_path):
    from sim.workloads.cp_inference.plots import cp_breakdown, cp_scaling
    from sim.workloads.embedding.plots import embedding_load, plan_load
    from sim.workloads.ingestion.plots import ingestion_buffers

    bd = {"dense": 1.0, "attention": 2.0, "merge": 0.1, "ring_exposed": 0.2, "tp_allreduce": 0.7, "total": 4.0}
    fig = cp_breakdown(
        {
            "prefill_breakdown_s": bd,
            "ring_algorithm": "pass-kv",
            "tp": 8,
            "cp": 2,
            "ring_steps": [{"step": 0, "attention_s": 1.0, "exposed_s": 0.0, "send_s": 0.5}],
        },
        path=tmp_path / "cp.png",
    )
    _labelled(fig)
    table = pd.DataFrame({"hosts": [1, 1, 2, 2], "ring": ["pass-kv", "pass-q"] * 2, "ttft_s": [8.0, 8.0, 4.1, 4.6]})
    cp_scaling(table, path=tmp_path / "scaling.png")
    plan = {
        "t0": {"ranks": "0-1", "estimated_s": 2.0, "hbm_bytes": 4.0, "slow_bytes": 2.0},
        "t1": {"ranks": "all", "estimated_s": 4.0, "hbm_bytes": 8.0, "slow_bytes": 0.0},
    }
    load = plan_load(plan, 4)
    assert list(load["estimated_s"]) == [2.0, 2.0, 1.0, 1.0] and load["hbm_bytes"].sum() == 12.0
    emb = spans(
        ("h0/g0", "compute", "embedding_fwd", 0.0, 1.0, "embedding"),
        ("h0/g1", "compute", "embedding_bwd_update", 0.0, 3.0, "embedding"),
    )
    embedding_load({"plan": plan, "load_imbalance": 1.5}, emb, 4, path=tmp_path / "emb.png")
    ingestion_buffers(
        {
            "buffer_trace_columns": ["t_s", "buffer_fill", "stall_fraction", "workers", "core_utilisation"],
            "buffer_trace": [[2.0, 0.5, 0.1, 3, 0.9], [4.0, 0.9, 0.0, 4, 0.8]],
            "data_stall_fraction": 0.05,
        },
        path=tmp_path / "ing.png",
    )
    for name in ("cp", "scaling", "emb", "ing"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000


def test_trace_screenshot_renders_hosts_and_lanes(ring_nic_bound, tmp_path):
    from sim.report.trace_view import render_trace

    fig = render_trace(chrome_trace(ring_nic_bound.spans), max_lanes=6)
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels[0] == "host 0" and sum(not lab.startswith("   ") for lab in labels) >= 1
    assert len([lab for lab in labels if lab.startswith("   ")]) == 6


# ---- seeds, progress, reference docs -------------------------------------------------------------
def test_confidence_interval_is_the_student_t_interval():
    from sim.studies.seeds import confidence_summary

    summary = confidence_summary(pd.DataFrame({"x": [1.0, 2.0, 3.0], "const": [5.0, 5.0, 5.0]}))
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert summary.loc["x", "mean"] == 2.0
    assert summary.loc["x", "ci_high"] - summary.loc["x", "mean"] == pytest.approx(half)
    assert summary.loc["const", "ci_low"] == summary.loc["const", "ci_high"] == 5.0


def test_run_seeds_gives_one_row_per_seed():
    from sim.studies.seeds import run_seeds

    scenario = make_scenario({"kind": "collective", "bytes": "1 MiB"})
    per_seed, summary = run_seeds(scenario, seeds=[0, 1])
    assert list(per_seed.index) == [0, 1] and summary.loc["time_s", "n"] == 2
    assert summary.loc["time_s", "std"] == 0.0  # a collective draws no random numbers


def test_progress_bar_does_not_change_the_run(capsys):
    from sim.engine.progress import progress_enabled

    scenario = load_scenario(ALLREDUCE, ["workload.bytes=16MiB"])
    quiet, shown = run(scenario), run(scenario, progress=True)
    assert quiet.metrics == shown.metrics and quiet.events == shown.events
    assert not progress_enabled(quiet=False)  # pytest's stderr is not a terminal
    assert not progress_enabled(quiet=True)


def test_scenario_reference_page_is_up_to_date():
    from pathlib import Path

    from sim.scenario.schema_doc import scenario_reference_markdown
    from sim.workloads import kinds

    page = scenario_reference_markdown()
    committed = (Path(__file__).resolve().parents[2] / "docs" / "scenario-reference.md").read_text()
    assert committed == page, "regenerate: dcsim schema --markdown > docs/scenario-reference.md"
    for kind in kinds():
        assert f"### kind: `{kind}`" in page
    assert "| `bandwidth` | bytes/s" in page and "`hardware.topology`" in page


def test_topology_drawing_aggregates_large_clusters():
    from sim.report.plot_topology import aggregate, node_groups

    result = run(
        load_scenario(
            FATTREE,
            [
                "hardware.nodes=64",
                "hardware.topology={kind: rail-optimized, spines: 4}",
                "workload.bytes=1MiB",
                "network_model=analytical",
            ],
        )
    )
    topo = result.cluster.topology
    mapping, role = node_groups(topo, max_hosts=16)
    hosts = sorted({v for v in mapping.values() if role[v] == "host"})
    assert len(hosts) == 16 and "h0-3" in hosts
    g, inside = aggregate(topo, result.links, mapping)
    util = result.links.set_index("link")["utilisation"]
    rail_links = [name for name in util.index if name.startswith("h0/") and "->rail" in name]
    assert g.edges["h0-3", "rail0"]["utilisation"] >= util[[n for n in rail_links if n.endswith("rail0")]].max()
    assert np.isfinite(list(inside.values())).all()
