"""Defects a new user hit (issue 22, item 5), each pinned by the behaviour a user now sees:
words that YAML 1.1 reads as booleans, `--out` checked before a run, a sweep's exit code, units in
`dcsim hw show`, the model presets command, the scenario reference's sections, the notebooks extra,
`dcsim check`'s estimate against the events a run processes, key paths without validation-library
internals, a directory given as a scenario, the README, and scenario descriptions that say what runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.cli import main
from sim.scenario.model import load_scenario

ROOT = Path(__file__).resolve().parents[2]
ALLREDUCE = str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml")

TINY_TRAINING = """
name: tiny-training
hardware: {gpus_per_node: 2, nodes: 2, topology: {kind: single-switch}}
workload:
  kind: training
  model: {name: tiny, layers: 4, hidden: 1024, ffn: 4096, heads: 16, kv_heads: 4, vocab: 32000}
  sequence_length: 1024
  parallelism: {tp: 2, dp: 2}
  global_batch_size: 4
  iterations: 1
  simulate: {replay: REPLAY}
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


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dcsim: error:") and "Traceback" not in err, err
    return lines[0]


# ---- on / off are words, not booleans ------------------------------------------------------------


@pytest.mark.parametrize("word", ["on", "off", "auto"])
def test_on_off_auto_in_yaml_reach_the_field_as_words(tmp_path, word):
    scenario = load_scenario(write(tmp_path, TINY_TRAINING.replace("REPLAY", word)))
    assert scenario.workload.simulate.replay == word


@pytest.mark.parametrize("word", ["on", "off"])
def test_on_off_in_set_and_sweep_grid_reach_the_field_as_words(tmp_path, word):
    from sim.studies.sweep import parse_axis

    path = write(tmp_path, TINY_TRAINING.replace("REPLAY", "auto"))
    assert load_scenario(path, [f"workload.simulate.replay={word}"]).workload.simulate.replay == word
    assert parse_axis("workload.simulate.replay=on,off") == ("workload.simulate.replay", ["on", "off"])
    code, _, err = cli("check", path, "--set", f"workload.simulate.replay={word}")
    assert code == 0, err


def test_true_and_false_stay_booleans_and_other_words_are_refused_with_the_allowed_values(tmp_path):
    from sim.scenario.yaml_text import load_yaml

    assert load_yaml("a: true\nb: False\nc: off\nd: yes") == {"a": True, "b": False, "c": "off", "d": "yes"}
    code, _, err = cli("check", write(tmp_path, TINY_TRAINING.replace("REPLAY", "yes")))
    line = one_line_error(err)
    assert code == 2 and "workload.simulate.replay" in line and "'on'" in line and "'off'" in line
