"""Sources stay inside the repository.

- No file outside tests/ cites the design notes or reference tables that live outside this repository
  (their figures and contracts are in docs/references.md and README.md).
- Every repository path cited in a text file (code, docs, catalog, scenarios, scripts, config) exists,
  so a reader can follow each citation. Glob patterns must match at least one file; paths with
  placeholders (`<device>`, `{name}`) are checked up to the placeholder.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh", ".toml")
OUTSIDE = re.compile(r"REFERENCE\.md|DESIGN\.md|\.\./shared")
# `.ci/run` runs an optional outside contract checker when the checkout sits beside it (guarded by `-f`).
OUTSIDE_ALLOWED = {".ci/run"}
# A repository path starts a token: sim/....py, scenarios/....yaml, or anything under the other folders.
CITED = re.compile(
    r"(?<![\w./-])("
    r"sim/[\w./*<>{}-]*\.py"
    r"|scenarios/[\w./*<>{}-]*\.yaml"
    r"|(?:hardware_models|validation|docs|benchmarks|notebooks|tests)/[\w./*<>{}-]*"
    r")"
)
SKIPPED = {"tests/golden/metrics.json", "tests/test_sources.py"}


def _repository_files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return sorted({f for f in out.splitlines() if (ROOT / f).is_file()})


def _text(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8", errors="replace")


def _cited_paths(text: str) -> set[str]:
    return {m.rstrip(".,:;)") for m in CITED.findall(text)}


def _exists(cited: str) -> bool:
    cut = min((cited.index(c) for c in "<{" if c in cited), default=None)
    if cut is not None:  # a placeholder: check the folder before it
        return (ROOT / cited[:cut].rsplit("/", 1)[0]).exists()
    if "*" in cited:
        return any(ROOT.glob(cited))
    return (ROOT / cited).exists()


def test_no_file_outside_tests_cites_files_outside_the_repository():
    offenders = [
        f"{f}:{n}: {line.strip()}"
        for f in _repository_files()
        if not f.startswith("tests/") and f not in OUTSIDE_ALLOWED
        for n, line in enumerate(_text(f).splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not offenders, "cite docs/references.md or README.md instead:\n" + "\n".join(offenders)


def test_every_cited_repository_path_exists():
    missing = [
        f"{f}: {cited}"
        for f in _repository_files()
        if f.endswith(TEXT_SUFFIXES) and f not in SKIPPED and not f.startswith("validation/records/")
        for cited in sorted(_cited_paths(_text(f)))
        if not _exists(cited)
    ]
    assert not missing, "cited paths that are not in the repository:\n" + "\n".join(missing)


def test_the_path_pattern_finds_citations_and_skips_lookalikes():
    text = (
        "see sim/engine/simulation.py, `validation/profiles/<device>.yaml` and (docs/references.md#models); "
        "not sim.engine, pytorch/benchmark, nccl-tests/doc/x.md, runs/sim/x.py or scenarios/cp-*"
    )
    assert _cited_paths(text) == {"sim/engine/simulation.py", "validation/profiles/<device>.yaml", "docs/references.md"}
    assert _exists("validation/profiles/<device>.yaml") and _exists("scenarios/cp-*.yaml")
    assert not _exists("sim/no_such_module.py")
