"""Defects a new user hit (issue 22, item 5), each pinned by the behaviour a user now sees:
words that YAML 1.1 reads as booleans, `--out` checked before a run, a sweep's exit code, units in
`dcsim hw show`, the model presets command, the scenario reference's sections, the notebooks extra,
`dcsim check`'s estimate against the events a run processes, key paths without validation-library
internals, a directory given as a scenario, the README, and scenario descriptions that say what runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import cli, write  # the CLI run in-process, a scenario file (tests/end_to_end/test_cli.py)

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


# ---- --out is checked before the run ------------------------------------------------------------


def _unwritable_places(tmp_path) -> list[tuple[str, str]]:
    """(an --out that cannot be written, what the error says): an existing file, a path under a
    file, and (when the file system refuses this user) a read-only directory."""
    afile = tmp_path / "results.txt"
    afile.write_text("not a directory")
    places = [(str(afile), "is not a directory"), (str(afile / "run1"), "is not a directory")]
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        (locked / "probe").touch()  # root writes anyway: then this case says nothing
    except PermissionError:
        places.append((str(locked / "run1"), "cannot write"))
    return places


def test_run_out_to_a_file_or_an_unwritable_place_is_one_line_before_the_run(tmp_path, monkeypatch):
    import sim.runner

    def no_run(*args, **kwargs):
        raise AssertionError("the run started before --out was checked")

    monkeypatch.setattr(sim.runner, "run", no_run)
    for out, says in _unwritable_places(tmp_path):
        code, stdout, err = cli("run", ALLREDUCE, "--out", out)
        line = one_line_error(err)
        assert code == 2 and stdout == "" and "--out" in line and says in line


def test_sweep_out_to_a_file_or_an_unwritable_place_is_one_line_before_any_point(tmp_path, monkeypatch):
    import sim.studies.sweep

    def no_point(task):
        raise AssertionError("a point ran before --out was checked")

    monkeypatch.setattr(sim.studies.sweep, "run_point", no_point)
    for out, says in _unwritable_places(tmp_path):
        code, _, err = cli("sweep", ALLREDUCE, "--grid", "workload.bytes=1MiB", "--workers", "1", "--out", out)
        line = one_line_error(err)
        assert code == 2 and "--out" in line and says in line


def test_run_out_to_a_new_nested_directory_still_works(tmp_path):
    code, out, _ = cli("run", ALLREDUCE, "--out", str(tmp_path / "a" / "b"))
    assert code == 0 and (tmp_path / "a" / "b" / "summary.json").is_file()


# ---- a sweep with failed points exits non-zero ----------------------------------------------------


def test_sweep_exits_non_zero_when_a_point_failed_after_writing_the_table(tmp_path):
    import pandas as pd

    out = tmp_path / "sweep"
    code, stdout, err = cli("sweep", ALLREDUCE, "--grid", "workload.bytes=1MiB,-5", "--workers", "1", "--out", str(out))
    assert code == 1
    assert "2 points: 1 ok, 1 failed" in stdout
    assert "1 of 2 points failed" in err and "Traceback" not in err
    table = pd.read_csv(out / "results.csv")
    assert sorted(table["status"]) == ["error", "ok"]
    code, _, _ = cli(
        "sweep", ALLREDUCE, "--grid", "workload.bytes=1MiB", "--workers", "1", "--out", str(tmp_path / "b")
    )
    assert code == 0


# ---- dcsim check: the estimate of events is within 10x of the events a run processes ---------------

CHEAP_SCENARIOS = [  # a fraction of a second each; every kind's estimator is covered by the slow test
    "allreduce-2x8-h100.yaml",
    "cp-405b-rdma-128k.yaml",  # exact layer replay: one layer of 126 simulated
    "cp-8b-h200-4hosts-1m.yaml",
    "train-moviegen-30b-video-dit-1024-gpus.yaml",
]


def _estimate_vs_run(path: Path) -> tuple[float, int]:
    from sim.runner import run
    from sim.scenario.estimate import estimate

    scenario = load_scenario(path)
    return estimate(scenario).events, run(scenario, limits=None).events


def _within_10x(estimated: float, events: int) -> bool:
    return events > 0 and 0.1 <= estimated / events <= 10.0


@pytest.mark.parametrize("name", CHEAP_SCENARIOS)
def test_estimated_events_are_within_10x_of_a_run_on_small_scenarios(name):
    estimated, events = _estimate_vs_run(ROOT / "scenarios" / name)
    assert _within_10x(estimated, events), f"estimated {estimated:.3g} events, the run processed {events}"


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_estimated_events_are_within_10x_of_a_run_on_every_shipped_scenario(path):
    estimated, events = _estimate_vs_run(path)
    assert _within_10x(estimated, events), f"estimated {estimated:.3g} events, the run processed {events}"


def test_check_prints_a_wall_time_beside_events_and_flows():
    code, out, _ = cli("check", str(ROOT / "scenarios" / "cp-405b-rdma-128k.yaml"))
    line = next(x for x in out.splitlines() if x.startswith("estimate:"))
    assert code == 0 and "wall time" in line and " events" in line and " flows" in line
    assert any(f" {unit} wall time" in line for unit in ("ns", "us", "ms", "s", "min", "h", "d"))


def test_wall_time_grows_with_events_and_links():
    from sim.engine.cost import Estimate
    from sim.scenario.estimate import EVENTS_PER_S, wall_time_s

    assert wall_time_s(Estimate(events=EVENTS_PER_S)) == pytest.approx(1.0)
    assert wall_time_s(Estimate(events=EVENTS_PER_S, links=1e5)) > 1.0


def test_a_kind_with_light_events_is_estimated_by_their_cost_and_jobs_add_their_seconds():
    """A kind's events can carry less work than the median run's (`event_cost`); estimates added
    together (jobs, iterations) keep the seconds of each part."""
    from sim.engine.cost import Estimate
    from sim.scenario.estimate import EVENTS_PER_S, wall_time_s

    light, heavy = Estimate(events=EVENTS_PER_S, event_cost=0.25), Estimate(events=EVENTS_PER_S, event_cost=2.0)
    assert wall_time_s(light) == pytest.approx(0.25)
    both = Estimate()
    both.add(light, times=2)
    both.add(heavy)
    assert both.events == 3 * EVENTS_PER_S and wall_time_s(both) == pytest.approx(2 * 0.25 + 2.0)


def test_the_ingestion_hour_is_estimated_at_its_events_and_minutes():
    """benchmarks/scenarios/ingestion-1h-400workers.yaml makes 24.8M events in ~380 s on a 2-core VM
    whose engine probe reads 0.42x the reference (issue 26): the estimate counts its batches and
    splits at their events and their light cost per event."""
    from sim.scenario.estimate import estimate, wall_time_s
    from sim.scenario.model import load_scenario

    est = estimate(load_scenario(str(ROOT / "benchmarks" / "scenarios" / "ingestion-1h-400workers.yaml")))
    assert 0.7 * 24.8e6 < est.events < 1.3 * 24.8e6
    assert 120 < wall_time_s(est) < 900


# ---- dcsim hw show: quantities with units ---------------------------------------------------------


def test_hw_show_prints_quantities_with_units_not_raw_floats():
    code, out, _ = cli("hw", "show", "nvme-ssd")
    assert code == 0 and "e-0" not in out and "8.999999999999999e-05" not in out
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "90 us" in rows["latency"]  # 9e-05 s
    assert "7 GB/s" in rows["bandwidth"] and "56 Gbit/s" in rows["bandwidth"]
    assert "7.68 TB" in rows["capacity"] and "4 KiB" in rows["granularity"]
    assert "20 W" in rows["max"]
    code, out, _ = cli("hw", "show", "h100-sxm")
    assert "989 TFLOP/s" in out and "80 GB (74.5 GiB)" in out and "3.35 TB/s" in out


def test_hw_show_json_keeps_the_raw_spec():
    code, out, _ = cli("hw", "show", "nvme-ssd", "--json")
    spec = json.loads(out)
    assert code == 0 and spec["section"] == "tier" and spec["latency"] == pytest.approx(90e-6)


def test_hw_show_of_every_catalog_entry_has_no_bare_long_floats():
    import re

    from hardware_models import catalog

    for section in ("device", "link", "tier"):
        for name in catalog.names(section):
            code, out, _ = cli("hw", "show", name)
            values = [line[24:].split("   (")[0] for line in out.splitlines()[1:] if "source" not in line]
            assert code == 0 and not [v for v in values if re.search(r"\d\.\d{5,}|e[-+]\d", v)], (name, out)


# ---- dcsim models: the presets, and docs/models.md ----------------------------------------------


def test_models_lists_every_preset_with_its_size_shape_and_source():
    from sim.models import dit, transformer

    code, out, _ = cli("models")
    assert code == 0
    for name in [*transformer.PRESETS, *dit.PRESETS, "dcn", "wukong", "dhen"]:
        assert f"\n{name}  " in out
    block = out.split("\nllama3-8b  ")[1].split("\n\n")[0]
    assert "8.03 billion parameters" in block and "16.1 GB" in block and "32 layers" in block
    assert "arXiv 2407.21783" in block
    code, out, _ = cli("models", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["llama3-405b"]["params"] == transformer.PRESETS["llama3-405b"].params
    assert rows["moviegen-30b"]["workloads"] == "training"


def test_models_page_in_the_docs_is_up_to_date():
    from sim.models.presets import models_markdown

    page = (ROOT / "docs" / "models.md").read_text()
    assert page == models_markdown(), "regenerate: dcsim models --markdown > docs/models.md"
    assert "docs/models.md" in (ROOT / "README.md").read_text()


# ---- scenario descriptions say what the scenario does ---------------------------------------------

SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))


def _description_overrides(text: str) -> list[tuple[str, str]]:
    """The `--set k=v` and `--grid k=v1,v2` a description tells the reader to try, as (key, --set
    text) pairs, one per value (`a|b|c` alternatives and grid values one by one; `N` is a
    placeholder; prose punctuation after an argument is not part of it)."""
    import re
    import shlex

    from sim.studies.sweep import parse_axis

    tries = []
    for match in re.finditer(r"(--set|--grid)\s+", text):
        lexer = shlex.shlex(text[match.end() :], posix=True)
        lexer.whitespace_split = True
        arg = lexer.get_token() or ""
        while arg and arg[-1] in ",.;:)" and not (arg[-1] == ")" and arg.count("(") >= arg.count(")")):
            arg = arg[:-1]
        key, _, value = arg.partition("=")
        if re.fullmatch(r"[A-Z]", value):
            continue
        if match.group(1) == "--grid":
            tries += [(key, f"{key}={json.dumps(v)}") for v in parse_axis(arg)[1]]
        else:
            tries += [(key, f"{key}={v.strip()}") for v in value.split("|")]
    return tries


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_what_a_description_tells_the_reader_to_try_is_valid(path):
    """Every key and value a description suggests is one the scenario takes (the result may still be
    refused for a reason the description gives, e.g. a stage that no longer fits in memory)."""
    import re

    from sim.errors import ScenarioError

    description = load_scenario(path).description
    assert description.strip(), "every shipped scenario says what it does"
    for key, override in _description_overrides(description):
        try:
            load_scenario(path, [override])
        except ScenarioError as err:
            assert err.path != key, f"{path.name}: the description suggests {override}, which fails: {err}"
    for mentioned in re.findall(r"[\w-]+\.yaml", description):
        assert (ROOT / "scenarios" / mentioned).is_file(), mentioned


def test_a_collective_description_that_compares_algorithms_runs_them_or_says_how():
    """'ring vs hierarchical' in a description that runs only hierarchical must say how to run the
    ring (allreduce-2x8-h100 did not)."""
    import re

    for path in SHIPPED:
        scenario = load_scenario(path)
        if scenario.kind != "collective":
            continue
        text = scenario.description.lower()
        for name in ("ring", "tree", "hierarchical", "direct"):
            compared = re.search(rf"\b{name}\s+(vs|versus)\b|\b(vs\.?|versus)\s+{name}\b", text)
            if compared and name != scenario.workload.algorithm:
                assert re.search(rf"workload\.algorithm=[\w,]*\b{name}\b", text), (
                    f"{path.name} compares with {name} but runs {scenario.workload.algorithm}"
                )


# ---- the notebooks extra, the README ---------------------------------------------------------------


def test_notebooks_extra_installs_what_opening_and_executing_the_notebooks_needs():
    import re
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", req)[0].lower() for req in extras["notebooks"]}
    assert {"jupyterlab", "nbconvert", "nbclient", "nbformat", "ipykernel"} <= names
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[notebooks]" && jupyter lab notebooks/' in readme


def test_readme_speaks_to_any_reader_and_says_how_to_get_either_torch_build():
    import re

    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"\b(these|this) (machines?|vm|cpu)\b|development vm", readme, re.IGNORECASE)
    setup = readme.split("## Set-up")[1].split("\n## ")[0]
    assert "pip install -e . && dcsim run scenarios/allreduce-2x8-h100.yaml" in setup
    assert 'pip install torch==2.13.0 && pip install -e ".[test,validate]" && python -m pytest' in setup
    assert "CUDA" in setup and "CPU-only" in setup and "--index-url https://download.pytorch.org/whl/cpu" in setup


# ---- key paths name what the user wrote ------------------------------------------------------------

LEAK_BASE = """
name: t
hardware: {nodes: 2}
workload: {kind: collective, bytes: "1 MiB"}
"""


@pytest.mark.parametrize(
    "override, path",
    [
        ("workload.bytes=fast", "workload.bytes"),
        ("workload.bytes=[1 MiB, fast]", "workload.bytes.1"),  # the list member says which item
        ("workload.group=[a]", "workload.group.0"),
        ("workload.group=x", "workload.group"),
        ("workload.background=[{src: 0, dst: 1, bytes: x}]", "workload.background.0.bytes"),
        ("hardware.gpu={base: h100-sxm, power_cap: x}", "hardware.gpu.power_cap"),
        ("workload={kind: collective}", "workload.bytes"),
    ],
)
def test_error_key_paths_never_carry_validation_library_internals(tmp_path, override, path):
    code, _, err = cli("check", write(tmp_path, LEAK_BASE), "--set", override)
    line = one_line_error(err)
    assert code == 2 and f": {path}: " in line, line
    for internal in ("function-", "literal[", "list[", "[<lambda>", "float]", "is-instance"):
        assert internal not in line


# ---- a directory given as a scenario ----------------------------------------------------------------


@pytest.mark.parametrize("command", [["run"], ["check"], ["plan"], ["sweep", "--grid", "seed=1", "--out", "OUT"]])
def test_a_directory_given_as_a_scenario_says_it_is_a_directory(tmp_path, command):
    args = [str(tmp_path / "o") if a == "OUT" else a for a in command]
    code, _, err = cli(args[0], str(ROOT / "scenarios"), *args[1:])
    line = one_line_error(err)
    assert code == 2 and "is a directory" in line and "not found" not in line


# ---- the scenario reference is sectioned per workload kind ------------------------------------------


def test_scenario_reference_has_one_section_per_heading_and_each_kinds_mappings_under_it():
    import collections

    from sim.scenario.schema_doc import scenario_reference_markdown
    from sim.workloads import kinds

    page = scenario_reference_markdown()
    headings = [line for line in page.splitlines() if line.startswith("#")]
    assert [h for h, n in collections.Counter(headings).items() if n > 1] == []
    sections = page.split("\n### kind: ")
    by_kind = {s.split("`")[1]: s for s in sections[1:]}
    assert set(by_kind) == set(kinds())
    assert "#### training: `workload.parallelism` (TrainingParallelism)" in by_kind["training"]
    assert "#### cp_inference: `workload.parallelism` (CpInferenceParallelism)" in by_kind["cp_inference"]
    assert "workloads[].parallelism" not in page  # jobs use the kinds' sections: workloads[].KEY = workload.KEY
    assert "## Several jobs (`workloads:`)" in page
