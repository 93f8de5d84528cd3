"""Sweeps (sim/studies/sweep.py, sim/studies/executors.py), Pareto fronts (sim/studies/pareto.py), sweep plots.

A sweep is a base scenario times a grid of `--set`-style overrides; each point is one `run`, each row
of `results.parquet`/`results.csv` one point. These tests use a small 2x4-GPU all-reduce so that a
point takes milliseconds.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

import sim.studies.sweep as sweep_module
from sim.cli import main
from sim.errors import ScenarioError
from sim.studies.pareto import pareto_front
from sim.studies.sweep import expand, flatten_metrics, parse_axis, point_id, results_frame, run_sweep
from sim.studies.sweep_plots import plot_metric, unit_of

BASE = {
    "name": "sweep-test",
    "seed": 0,
    "hardware": {
        "gpu": "h100-sxm",
        "gpus_per_node": 4,
        "nodes": 2,
        "scale_up": "nvlink4",
        "nic": "cx7-400g-rdma",
        "topology": {"kind": "single-switch"},
    },
    "workload": {"kind": "collective", "op": "all_reduce", "algorithm": "ring", "bytes": "1 MiB"},
}
GRID = {"workload.bytes": ["1 MiB", "16 MiB"], "workload.algorithm": ["ring", "tree"], "hardware.nodes": [1, 2]}


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(BASE))
    return path


def without_wall(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns="wall_s").reset_index(drop=True)


# ------------------------------------------------------------------------------------- expansion


def test_grid_is_the_cartesian_product_with_the_first_axis_slowest():
    points = expand({"a": [1, 2], "b": ["x", "y", "z"]})
    assert len(points) == 6
    assert points[:3] == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"}]
    assert points[-1] == {"a": 2, "b": "z"}


def test_zipped_keys_advance_together_and_multiply_with_the_grid():
    points = expand({"a": [1, 2]}, zipped={"b": [10, 20, 30], "c": ["p", "q", "r"]})
    assert len(points) == 2 * 3
    assert all((p["b"], p["c"]) in {(10, "p"), (20, "q"), (30, "r")} for p in points)
    assert expand(zipped={"b": [1, 2], "c": [3, 4]}) == [{"b": 1, "c": 3}, {"b": 2, "c": 4}]


@pytest.mark.parametrize(
    "grid, zipped",
    [
        ({}, {"b": [1, 2], "c": [1]}),  # zipped lists of different lengths
        ({"a": [1]}, {"a": [2]}),  # one key in both
        ({"a": []}, {}),  # an empty axis
    ],
)
def test_inconsistent_axes_are_one_line_errors(grid, zipped):
    with pytest.raises(ScenarioError) as info:
        expand(grid, zipped)
    assert "\n" not in str(info.value)


def test_axis_values_are_read_as_yaml_like_set_values():
    assert parse_axis("hardware.nodes=1,2,4") == ("hardware.nodes", [1, 2, 4])
    assert parse_axis("workload.bytes=64 MiB, 1 GiB") == ("workload.bytes", ["64 MiB", "1 GiB"])
    assert parse_axis("workload.group=[0, 1],[2, 3]") == ("workload.group", [[0, 1], [2, 3]])
    assert parse_axis("workload.algorithm=ring") == ("workload.algorithm", ["ring"])
    for bad in ("hardware.nodes", "=1,2", "workload.bytes="):
        with pytest.raises(ScenarioError, match="--grid"):
            parse_axis(bad)


def test_point_id_hashes_base_and_overrides_but_not_their_order():
    a = point_id(BASE, {"x.y": 1, "z": "ring"})
    assert a == point_id(BASE, {"z": "ring", "x.y": 1})
    assert a != point_id(BASE, {"x.y": 2, "z": "ring"})
    assert a != point_id({**BASE, "seed": 1}, {"x.y": 1, "z": "ring"})


# ------------------------------------------------------------------------------------- rows


def test_metrics_flatten_nested_dicts_to_dotted_names_and_lists_to_json():
    flat = flatten_metrics({"time_s": 1.0, "jobs": {"a": {"time_s": 2.0}}, "per_size": [{"bytes": 1}]})
    assert flat == {"time_s": 1.0, "jobs.a.time_s": 2.0, "per_size": '[{"bytes": 1}]'}


def test_each_column_holds_one_kind_of_value():
    frame = results_frame([{"n": 2, "v": 1}, {"n": None, "v": "1 GiB"}])
    assert str(frame["n"].dtype) == "Int64" and frame["n"].isna().tolist() == [False, True]
    assert frame["v"].tolist() == ["1", "1 GiB"]  # mixed numbers and text -> text


# ------------------------------------------------------------------------------------- running


def test_process_pool_and_dask_give_the_same_table_as_in_process(base, tmp_path):
    distributed = pytest.importorskip("distributed")
    reference = run_sweep(base, GRID, out_dir=tmp_path / "inproc", workers=1, progress=False)
    assert reference.points == reference.ran == 8 and reference.failed == 0
    pool = run_sweep(base, GRID, out_dir=tmp_path / "pool", workers=2, progress=False)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, protocol="tcp://", host="127.0.0.1"
    ) as cluster:  # loopback only
        dask = run_sweep(base, GRID, out_dir=tmp_path / "dask", dask=cluster.scheduler_address, progress=False)
    for other in (pool, dask):
        pd.testing.assert_frame_equal(without_wall(reference.table), without_wall(other.table))
    assert (reference.table["wall_s"] > 0).all()


def test_table_has_overrides_status_and_metrics_in_parquet_and_csv(base, tmp_path):
    result = run_sweep(
        base,
        {"workload.algorithm": ["ring", "tree"]},
        zipped={"workload.bytes": [["1 MiB", "4 MiB"]]},
        out_dir=tmp_path / "s",
        workers=1,
        progress=False,
    )
    parquet = pd.read_parquet(tmp_path / "s" / "results.parquet")
    csv = pd.read_csv(tmp_path / "s" / "results.csv", keep_default_na=False)
    assert len(parquet) == len(csv) == 2
    assert parquet["point"].tolist() == csv["point"].tolist() == result.table["point"].tolist()
    for col in (
        "point",
        "workload.algorithm",
        "workload.bytes",
        "overrides",
        "status",
        "error",
        "wall_s",
        "sim_time_s",
        "events",
        "time_s",
        "busbw_bytes_per_s",
        "per_size",
    ):
        assert col in parquet.columns and col in csv.columns
    row = parquet.iloc[1]
    assert json.loads(row["overrides"]) == {"workload.algorithm": "tree", "workload.bytes": ["1 MiB", "4 MiB"]}
    assert json.loads(row["workload.bytes"]) == ["1 MiB", "4 MiB"]
    assert [r["bytes"] for r in json.loads(row["per_size"])] == [2**20, 4 * 2**20]
    assert math.isclose(csv["busbw_bytes_per_s"][1], row["busbw_bytes_per_s"], rel_tol=1e-12)
    # the row's metrics are those of the same scenario run on its own
    from sim import load_scenario, run

    alone = run(load_scenario(base, ["workload.algorithm=tree", "workload.bytes=[1 MiB, 4 MiB]"])).metrics
    assert row["time_s"] == alone["time_s"]
    summary = json.loads((tmp_path / "s" / "points" / f"{row['point']}.json").read_text())["summary"]
    assert summary["metrics"] == alone and summary["scenario"] == "sweep-test"


def test_failing_point_is_recorded_with_its_error_and_the_sweep_goes_on(base, tmp_path):
    result = run_sweep(
        base,
        {"workload.op": ["all_gather"], "workload.algorithm": ["tree", "ring"], "hardware.nodez": [1]},
        out_dir=tmp_path / "bad-key",
        workers=1,
        progress=False,
    )
    assert result.failed == 2 and "hardware.nodez: unknown key" in result.table["error"][0]
    result = run_sweep(
        base,
        {"workload.op": ["all_gather"], "workload.algorithm": ["tree", "ring"]},
        out_dir=tmp_path / "s",
        workers=1,
        progress=False,
    )
    table = result.table.set_index("workload.algorithm")
    assert table.loc["tree", "status"] == "error" and table.loc["ring", "status"] == "ok"
    error = table.loc["tree", "error"]
    assert "workload.algorithm" in error and "tree implements all_reduce only" in error and "\n" not in error
    assert pd.isna(table.loc["tree", "time_s"]) and table.loc["ring", "time_s"] > 0
    assert result.failed == 1 and result.first_errors() == [error]


def test_rerun_skips_finished_points_and_runs_only_new_ones(base, tmp_path):
    out = tmp_path / "s"
    small = {"workload.algorithm": ["ring", "tree"], "hardware.nodes": [1, 2]}
    first = run_sweep(base, small, out_dir=out, workers=1, progress=False)
    again = run_sweep(base, small, out_dir=out, workers=1, progress=False)
    assert (first.ran, again.ran, again.skipped) == (4, 0, 4)
    pd.testing.assert_frame_equal(first.table, again.table)
    grown = run_sweep(base, {**small, "hardware.nodes": [1, 2, 4]}, out_dir=out, workers=1, progress=False)
    assert (grown.points, grown.ran, grown.skipped) == (6, 2, 4)


def test_interrupted_sweep_keeps_finished_points_and_resumes(base, tmp_path, monkeypatch):
    out, calls = tmp_path / "s", []
    real = sweep_module.run_point

    def interrupted_after_three(task):
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the 4th point runs
        calls.append(task.point)
        return real(task)

    monkeypatch.setattr(sweep_module, "run_point", interrupted_after_three)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(base, GRID, out_dir=out, workers=1, progress=False)
    assert len(pd.read_parquet(out / "results.parquet")) == 3 and len(list((out / "points").glob("*.json"))) == 3
    monkeypatch.setattr(sweep_module, "run_point", real)
    resumed = run_sweep(base, GRID, out_dir=out, workers=1, progress=False)
    assert (resumed.ran, resumed.skipped, len(resumed.table)) == (5, 3, 8)
    assert set(calls) <= set(resumed.table["point"]) and resumed.failed == 0


def test_failed_points_rerun_only_when_asked(base, tmp_path):
    grid = {"workload.op": ["all_gather"], "workload.algorithm": ["tree", "ring"]}
    run_sweep(base, grid, out_dir=tmp_path, workers=1, progress=False)
    assert run_sweep(base, grid, out_dir=tmp_path, workers=1, progress=False).ran == 0
    assert run_sweep(base, grid, out_dir=tmp_path, workers=1, progress=False, retry_failed=True).ran == 1


# ------------------------------------------------------------------------------------- CLI


def test_cli_sweep_writes_tables_and_is_silent_with_quiet(base, tmp_path, capsys):
    with pytest.raises(SystemExit) as code:
        main(
            [
                "sweep",
                str(base),
                "--grid",
                "workload.bytes=1 MiB,2 MiB",
                "--zip",
                "hardware.nodes=1,2",
                "--zip",
                "workload.algorithm=ring,tree",
                "--workers",
                "1",
                "--out",
                str(tmp_path),
                "--quiet",
            ]
        )
    assert code.value.code == 0
    assert capsys.readouterr() == ("", "")
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == 4 and set(zip(table["hardware.nodes"], table["workload.algorithm"])) == {
        (1, "ring"),
        (2, "tree"),
    }


def test_cli_sweep_reports_and_plots(base, tmp_path, capsys):
    with pytest.raises(SystemExit) as code:
        main(
            [
                "sweep",
                str(base),
                "--grid",
                "workload.bytes=1 MiB,4 MiB",
                "--grid",
                "workload.algorithm=ring,tree",
                "--workers",
                "1",
                "--out",
                str(tmp_path),
                "--plot",
                "busbw_bytes_per_s",
            ]
        )
    out, err = capsys.readouterr()
    assert code.value.code == 0 and err == ""  # no progress bar when stderr is not a TTY
    assert out.startswith("4 points: 4 ok, 0 failed (4 run now, 0 finished before)")
    assert (tmp_path / "busbw_bytes_per_s-vs-workload.bytes.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "args, where",
    [
        (["--grid", "workload.bytes"], "--grid"),
        (["--grid", "workload.bytes=1,2", "--grid", "workload.bytes=3"], "--grid"),
        (["--grid", "workload.bytes=1", "--plot", "no_such_metric"], "--plot"),
        (["--grid", "workload.bytes=1", "--workers", "0"], "--workers"),
    ],
)
def test_cli_sweep_bad_arguments_are_one_line_errors(base, tmp_path, capsys, args, where):
    with pytest.raises(SystemExit) as code:
        main(["sweep", str(base), *args, "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code.value.code == 2 and err.startswith("dcsim: error:") and where in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------- analysis


def test_pareto_front_keeps_exactly_the_non_dominated_ok_rows():
    df = pd.DataFrame(
        {
            "name": ["A", "B", "C", "D", "E", "F", "G"],
            "cost_usd": [1.0, 2.0, 2.0, 3.0, 0.5, 0.1, np.nan],
            "samples_per_s": [10.0, 20.0, 15.0, 20.0, 5.0, 99.0, 99.0],
            "status": ["ok", "ok", "ok", "ok", "ok", "error", "ok"],
        }
    )
    front = pareto_front(df, minimize=["cost_usd"], maximize=["samples_per_s"])
    assert front["name"].tolist() == ["E", "A", "B"]  # C and D lose to B; F failed; G has no cost


def test_pareto_front_matches_brute_force_on_random_points():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.integers(0, 6, size=(60, 3)), columns=["a", "b", "c"]).astype(float)
    front = set(pareto_front(df, minimize=["a", "b"], maximize=["c"]).index)
    x = df.to_numpy() * [1, 1, -1]
    brute = {i for i in range(len(x)) if not any((x[j] <= x[i]).all() and (x[j] < x[i]).any() for j in range(len(x)))}
    assert front == brute and front


def test_units_come_from_metric_names():
    assert unit_of("busbw_bytes_per_s") == "B/s"
    assert unit_of("time_s") == "s" and unit_of("jobs.a.iteration_s") == "s"
    assert unit_of("samples_per_s") == "samples/s" and unit_of("decode_s_per_token") == "s/token"
    assert unit_of("hbm_bytes_per_gpu_max") == "B" and unit_of("workload.bytes") == "B"
    assert unit_of("data_stall_fraction") == "fraction" and unit_of("hardware.nodes") == ""


def test_plot_of_a_metric_against_a_swept_key_has_labelled_axes(tmp_path):
    table = pd.DataFrame(
        {
            "workload.bytes": ["1 MiB", "1 GiB", "1 MiB", "1 GiB"],
            "workload.algorithm": ["ring", "ring", "tree", "tree"],
            "busbw_bytes_per_s": [1e9, 4e10, 2e9, 3e10],
            "status": ["ok"] * 4,
        }
    )
    fig = plot_metric(table, "busbw_bytes_per_s", "workload.bytes", by=["workload.algorithm"], path=tmp_path / "p.png")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "workload.bytes [B]" and ax.get_ylabel() == "busbw_bytes_per_s [B/s]"
    assert ax.get_xscale() == "log"  # 1 MiB .. 1 GiB, converted to bytes
    assert [line.get_label() for line in ax.get_lines()] == ["workload.algorithm=ring", "workload.algorithm=tree"]
    assert ax.get_lines()[0].get_xdata().tolist() == [2**20, 2**30]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
