"""The terminal table of `dcsim run`: units read from metric names and the kinds' documentation,
numbers with a sensible number of digits, nested metrics as sub-tables (the per-size collective
table in nccl-tests columns, breakdowns with shares that sum to the whole they name, per-request
rows, per-job rows) and bound metrics that say what they bound.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sim.report.metric_layout import breakdown, header, layout, split_list_name
from sim.report.quantities import (
    bound_note,
    column_scale,
    compact_list,
    format_percent,
    format_quantity,
    format_time,
    shares,
    unit_of,
)
from sim.report.table import docs_of

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "metrics.json").read_text())


# ---- units and digits ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,doc,unit",
    [
        ("busbw_bytes_per_s", None, "B/s"),
        ("time_s", None, "s"),
        ("ttft_s_per_request", None, "s"),
        ("iteration_s_each", None, "s"),
        ("energy_j_by_class", None, "J"),
        ("energy_per_token_j", None, "J"),
        ("avg_power_w", None, "W"),
        ("cluster_power_swing_w_per_s", None, "W/s"),
        ("cost_usd", None, "USD"),
        ("data_stall_fraction", None, "%"),
        ("mfu", None, "%"),
        ("tflop_per_s_per_gpu", None, "TFLOP/s"),
        ("achieved_attention_flop_per_s", None, "FLOP/s"),
        ("prefill_flop", None, "FLOP"),
        ("samples_per_s", None, "samples/s"),
        ("dedup.read_bytes_ratio", None, "x"),
        ("hbm_bytes_per_gpu_max", None, "B"),
        ("memory_per_stage_bytes", None, "B"),
        ("utilisation", "per resource (worker cores, memory ...), fraction", "%"),
        ("interruptions_by_cause", "interruptions per failure cause, mean over replicas, counts", "count"),
        ("tokens_per_iteration", "tokens of one global batch, tokens", "tokens"),
        ("model", "the model's name", ""),
    ],
)
def test_unit_comes_from_the_name_then_from_the_documented_meaning(name, doc, unit):
    assert unit_of(name, doc) == unit


@pytest.mark.parametrize(
    "value,unit,text",
    [
        (0.008158355, "s", "8.158 ms"),
        (9.5367431640625e-07, "s", "953.7 ns"),
        (10.714471788, "s", "10.71 s"),
        (11135.08, "s", "11,135 s (3.09 h)"),
        (4665600.0, "s", "4,665,600 s (54 d)"),
        (69958044672.0, "B", "65.2 GiB"),
        (131612539918.9, "B/s", "132 GB/s"),
        (3235.3, "J", "3.24 kJ"),
        (13697901.19, "W", "13.7 MW"),
        (0.33510, "%", "33.5 %"),
        (0.0061, "%", "0.61 %"),
        (0.000151, "USD", "0.000151 USD"),
        (67609544.2, "USD", "67,609,544 USD"),
        (386.41797, "TFLOP/s", "386.4 TFLOP/s"),
        (16384, "count", "16,384"),
        (463.75, "count", "463.8"),
        (2508380.1, "tokens/s", "2.51 M tokens/s"),
        (3.673, "x", "3.67x"),
        (None, "s", "-"),
        (True, "", "yes"),
    ],
)
def test_quantities_are_written_with_their_unit_and_three_or_four_digits(value, unit, text):
    assert format_quantity(value, unit) == text


def test_time_rounds_up_to_the_next_unit_instead_of_printing_1000():
    assert format_time(0.99999999) == "1 s" and format_time(999.99e-6) == "1 ms"
    assert format_percent(1.0) == "100.0 %" and format_percent(0) == "0 %"


def test_a_column_is_written_in_one_unit_chosen_by_its_largest_value():
    assert column_scale([5.3e-4, 2.1e-3, 8.2e-3], "s") == (1e-3, "ms")
    assert column_scale([1.27e11, 1.31e11], "B/s") == (1e9, "GB/s")
    assert column_scale([2**26, 2**30], "B") == (2**30, "GiB")


def test_lists_are_written_out_with_runs_folded_when_short():
    assert compact_list([3] + [4] * 30 + [3], "count") == "3, 4 x 30, 3"
    assert compact_list(list(range(20)), "count") is None
    assert split_list_name("memory_per_stage_bytes") == ("memory_bytes", "stage")
    assert header("algbw_bytes_per_s", "GB/s") == "algbw (GB/s)" and header("bytes", "") == "size"


# ---- sub-tables -----------------------------------------------------------------------------------
def test_per_size_collective_table_has_nccl_tests_columns_in_one_unit_each():
    metrics = GOLDEN["scenarios/allreduce-2x8-h100.yaml"]
    rows, sections = layout(metrics, docs_of("collective"))
    [per_size] = [s for s in sections if s.title == "per_size"]
    assert per_size.columns[:4] == ["size", "time (ms)", "algbw (GB/s)", "busbw (GB/s)"]
    assert [r[0] for r in per_size.rows] == ["64 MiB", "256 MiB", "1 GiB"]
    for row, entry in zip(per_size.rows, metrics["per_size"]):
        # what is printed is the metric in the header's unit, to 4 significant digits
        assert float(row[1]) == pytest.approx(entry["time_s"] * 1e3, rel=5e-4)
        assert float(row[3]) == pytest.approx(entry["busbw_bytes_per_s"] / 1e9, rel=5e-4)
    assert not any("entries" in text for _, text in rows)


def test_breakdown_shares_sum_to_the_whole_and_name_the_metric_it_equals():
    metrics = GOLDEN["scenarios/train-llama3-405b-16k-gpus-seq8k.yaml"]
    section = breakdown("breakdown_s", metrics["breakdown_s"], docs_of("training")["breakdown_s"], metrics)
    parts = metrics["breakdown_s"]
    largest = sorted(parts, key=parts.get, reverse=True)
    assert [r[0] for r in section.rows[:2]] == largest[:2] and largest[0] == "compute_s"  # largest first
    total = sum(parts.values())
    assert sum(shares(parts).values()) == pytest.approx(1.0)
    assert section.rows[1][2] == format_percent(parts[largest[1]] / total)
    assert section.rows[-1][0] == "sum" and "sum = iteration_s" in section.notes


def test_breakdown_with_a_total_keeps_capacity_and_counts_out_of_the_parts():
    memory = {"weights": 60.0e9, "kv_cache": 8.0e9, "activations": 0.0, "total": 68.0e9, "capacity": 96.0e9}
    section = breakdown("memory_per_gpu_bytes", memory, None, {})
    assert [r[0] for r in section.rows] == ["weights", "kv_cache", "total"]
    assert section.rows[0][2] == format_percent(60 / 68)
    assert any(n.startswith("capacity") and "70.8 % of it" in n for n in section.notes)
    assert "zero: activations" in section.notes


def test_a_lower_bound_larger_than_the_result_says_what_it_bounds():
    metrics = GOLDEN["scenarios/emb-dlrm-1x8-a100-scm.yaml"]
    assert metrics["planner_lower_bound_s"] > metrics["iteration_s"]  # the case a reader would misread
    rows, _ = layout(metrics, docs_of("embedding_training"))
    text = dict(rows)["planner_lower_bound_s"]
    assert "most loaded GPU's cost" in text and "not a bound on iteration_s" in text
    assert bound_note("iteration_s", 1.0, None, {}) is None


def test_entries_of_a_dict_take_the_unit_of_its_name_else_their_own():
    rows = dict(layout({"op_s": {"F v0": 0.8674}, "totals": {"batches_delivered": 943, "bytes_sent": 2.0**30}})[0])
    assert rows["op_s.F v0"] == "867.4 ms"
    assert rows["totals.batches_delivered"] == "943" and rows["totals.bytes_sent"] == "1 GiB"


def test_same_keyed_dicts_share_a_table_and_the_bottleneck_stage_is_marked():
    metrics = GOLDEN["scenarios/ingest-video-curation.yaml"]
    _, sections = layout(metrics, docs_of("ingestion"))
    [stages] = [s for s in sections if "utilisation" in s.title]
    assert stages.columns[1:3] == ["stage_capacity (samples/s)", "utilisation (%)"]
    marked = [r for r in stages.rows if r[-1]]
    assert [r[0] for r in marked] == [metrics["bounding_stage"]]


def test_lists_per_request_become_one_row_per_request():
    metrics = GOLDEN["scenarios/cp-70b-poisson-serving.yaml"]
    _, sections = layout(metrics, docs_of("cp_inference"))
    [per_request] = [s for s in sections if s.title == "per request"]
    assert len(per_request.rows) == metrics["requests"] == 20
    assert "ttft (s)" in per_request.columns and "ring_algorithm" in per_request.columns


# ---- every shipped scenario ----------------------------------------------------------------------
_UNIT_TEXT = {
    "s": re.compile(r"(\d (ns|µs|ms|s)( \(.*\))?$)|^-$"),
    "B": re.compile(r"\d (B|KiB|MiB|GiB|TiB|PiB)$|^-$"),
    "B/s": re.compile(r"B/s$|^-$"),
    "%": re.compile(r"%|^-$"),
    "J": re.compile(r"J$|^-$"),
    "W": re.compile(r"W$|^-$"),
    "USD": re.compile(r"USD$"),
}


@pytest.mark.parametrize("scenario", sorted(k for k in GOLDEN if k.startswith("scenarios/")))
def test_every_quantity_of_every_shipped_scenario_is_printed_with_its_unit(scenario):
    metrics = dict(GOLDEN[scenario])
    jobs = metrics.pop("jobs", {})
    for m in [metrics, *jobs.values()]:
        docs = docs_of(m.get("kind", "")) if m is not metrics else {}
        rows, sections = layout(m, docs)
        for name, text in rows:
            unit = unit_of(name, docs.get(name))
            if unit in _UNIT_TEXT and "," not in text and "rows" not in text:
                assert _UNIT_TEXT[unit].search(text.split(" (")[0] if unit != "s" else text), (name, text)
            assert "entries" not in text
        for section in sections:
            assert all(len(r) == len(section.columns) for r in section.rows), section.title


def test_render_run_prints_sub_tables_and_the_bottleneck_rows():
    from sim import load_scenario, run
    from sim.report.table import render_run

    result = run(load_scenario("scenarios/allreduce-2x8-h100.yaml", ["workload.bytes=[1MiB, 4MiB]"]))
    text = render_run(result, links_top=3, width=120)
    assert "per_size" in text and "busbw (GB/s)" in text and "1 MiB" in text
    assert "energy_j_by_class" in text and "sum = energy_j" in text
    assert "bottleneck" in text and "critical path" in text
    assert "bytes / (capacity x run)" in text and "busy / run" in text


def test_the_tables_print_names_as_they_are_without_markup_or_emoji_codes():
    import io

    from rich.table import Table

    from sim.report.table import literal_console

    table = Table()
    table.add_column("link [nvlink]")
    table.add_row("ring [scale-up] :x: step")
    console = literal_console(file=io.StringIO(), width=80, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    assert "link [nvlink]" in text and "ring [scale-up] :x: step" in text
