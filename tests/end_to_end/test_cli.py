"""The CLI contract: `dcsim run` prints a table, `--json` exactly one object, `--out` writes files,
and every class of bad input ends in one line on stderr with exit code 2 - never a traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
ALLREDUCE = str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml")

GOOD = """
name: t
hardware: {gpu: h100-sxm, gpus_per_node: 8, nodes: 2, scale_up: nvlink4, nic: cx7-400g-rdma,
           topology: {kind: single-switch}}
workload: {kind: collective, op: all_reduce, algorithm: ring, bytes: "64 MiB"}
"""


def cli(*args):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        with pytest.raises(SystemExit) as exc:
            main(list(args))
    return exc.value.code, out.getvalue(), err.getvalue()


def write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_json_prints_exactly_the_contract_object():
    code, out, _ = cli("run", ALLREDUCE, "--json")
    assert code == 0
    summary = json.loads(out)
    assert {"scenario", "kind", "metrics", "sim_time_s", "wall_s", "events"} <= summary.keys()
    assert summary["kind"] == "collective"
    assert {"time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "per_size"} <= summary["metrics"].keys()


def test_table_output_and_out_dir(tmp_path):
    code, out, _ = cli("run", ALLREDUCE, "--out", str(tmp_path / "res"))
    assert code == 0 and "busbw_bytes_per_s" in out
    files = {p.name for p in (tmp_path / "res").iterdir()}
    assert {"summary.json", "scenario.resolved.yaml", "events.parquet", "trace.json", "timeline.png"} <= files
    trace = json.loads((tmp_path / "res" / "trace.json").read_text())
    assert any(e["ph"] == "X" for e in trace["traceEvents"])
    # the resolved scenario is itself a valid scenario that gives the same metrics
    code2, out2, _ = cli("run", str(tmp_path / "res" / "scenario.resolved.yaml"), "--json")
    assert json.loads(out2)["metrics"] == json.loads((tmp_path / "res" / "summary.json").read_text())["metrics"]


def test_same_seed_gives_identical_metrics_and_other_seeds_run():
    a = json.loads(cli("run", ALLREDUCE, "--json")[1])
    b = json.loads(cli("run", ALLREDUCE, "--json")[1])
    assert a["metrics"] == b["metrics"]
    code, _, _ = cli("run", ALLREDUCE, "--json", "--set", "seed=7")
    assert code == 0


def test_set_overrides_with_list_indices(tmp_path):
    code, out, _ = cli("run", ALLREDUCE, "--json", "--set", "workload.bytes.0=1GiB", "--set", "workload.algorithm=ring")
    assert code == 0
    assert json.loads(out)["metrics"]["per_size"][0]["bytes"] == 2**30


@pytest.mark.parametrize(
    "mutation,needle",
    [
        (("hardware:", "hardwre:"), "hardwre"),  # unknown key
        (("gpus_per_node: 8", "gpus_per_node: eight"), "hardware.gpus_per_node"),  # wrong type
        (('bytes: "64 MiB"', 'bytes: "64 MiBs"'), "workload.bytes"),  # bad unit
        (('bytes: "64 MiB"', "bytes: -5"), "workload.bytes"),  # negative size
        (("gpu: h100-sxm", "gpu: h999"), "hardware.gpu"),  # unknown catalog name
        (("algorithm: ring", "algorithm: hierarchical, group: 12"), "workload.group"),  # does not divide
        (("kind: single-switch", "kind: fat-tree, hosts_per_leaf: 3"), "hardware.topology"),
        (("nic: cx7-400g-rdma", "nic: {base: cx7-400g-rdma, bandwidth: fast}"), "hardware.nic.bandwidth"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(tmp_path, mutation, needle):
    path = write(tmp_path, GOOD.replace(*mutation))
    code, out, err = cli("run", path, "--json")
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and path in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args,needle",
    [
        (("run", "/nonexistent/x.yaml"), "file not found"),
        (("run", "{ALLREDUCE}", "--set", "noequals"), "key.path=value"),
        (("run", "{ALLREDUCE}", "--set", "workload.bytes.9=1"), "out of range"),
        (("hw", "show", "nope"), "unknown hardware"),
    ],
)
def test_bad_files_and_flags_give_one_line_and_exit_2(args, needle):
    args = [a.replace("{ALLREDUCE}", ALLREDUCE) for a in args]
    code, _, err = cli(*args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_invalid_yaml_names_the_line(tmp_path):
    code, _, err = cli("run", write(tmp_path, "name: [unclosed\n"))
    assert code == 2 and "line" in err


def test_hw_list_and_show():
    code, out, _ = cli("hw", "list")
    assert code == 0 and "h100-sxm" in out and "cx7-400g-rdma" in out
    code, out, _ = cli("hw", "show", "nvlink4")
    assert code == 0 and "450 GB/s (3.6 Tbit/s)" in out  # units: tests/end_to_end/test_user_defects.py
    code, out, _ = cli("hw", "show", "nvlink4", "--json")
    assert code == 0 and json.loads(out)["bandwidth"] == 450e9


def test_console_script_is_installed():
    r = subprocess.run([sys.executable, "-m", "sim.cli", "check", ALLREDUCE], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout


def test_the_command_ends_without_teardown_but_with_its_output_and_exit_code():
    """`python -m sim.cli` (and the `dcsim` script) end through `console`: output flushed, then the
    process exits at once with main's code (os._exit: no teardown of the run's objects)."""
    ok = subprocess.run([sys.executable, "-m", "sim.cli", "run", ALLREDUCE, "--json"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stderr == ""
    assert json.loads(ok.stdout)["metrics"]["time_s"] > 0  # the whole JSON line arrived
    bad = subprocess.run([sys.executable, "-m", "sim.cli", "run", "missing.yaml"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("dcsim: error:") and bad.stderr.count("\n") == 1
    usage = subprocess.run([sys.executable, "-m", "sim.cli", "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "usage: dcsim" in usage.stdout
