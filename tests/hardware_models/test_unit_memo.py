"""The short path of unit parsing (hardware_models/units.py): "NUMBER UNIT" strings multiply NUMBER
by pint's factor for UNIT, remembered in a memo file so that later processes need not import pint.

pint stays the definition: the short path must give the very float pint gives, for every unit
string the repository's YAML files use, in every dimension, and must fail where pint fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hardware_models import units

ROOT = Path(__file__).resolve().parents[2]
YAML_DIRS = ("scenarios", "hardware_models/catalog", "benchmarks/scenarios", "tests", "docs")


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _repository_unit_strings() -> set[str]:
    found = set()
    for folder in YAML_DIRS:
        for path in (ROOT / folder).rglob("*.yaml"):
            try:
                docs = list(yaml.safe_load_all(path.read_text()))
            except (yaml.YAMLError, UnicodeDecodeError):
                continue
            found |= {s for doc in docs for s in _strings(doc) if units._NUMBER_UNIT.fullmatch(s)}
    return found


@pytest.fixture
def fresh_memo(tmp_path, monkeypatch):
    """An empty memo directory and no parse remembered in this process."""
    monkeypatch.setenv("DCSIM_CACHE_DIR", str(tmp_path))
    for cached in (units._memo, units._parse_text):
        cached.cache_clear()
    yield tmp_path
    for cached in (units._memo, units._parse_text):
        cached.cache_clear()


def _by_pint(text: str, dimension: str) -> float | None:
    try:
        return units._pint_parse(text, units._DIMENSIONS[dimension][0])
    except Exception:
        return None


def _by_short_path(text: str, dimension: str) -> float | None:
    try:
        return units.parse_quantity(text, dimension)
    except ValueError:
        return None


def test_short_path_gives_pints_float_for_every_unit_string_in_the_repository(fresh_memo):
    strings = _repository_unit_strings() | {"2.4 TB/s", "1.5e3 ms", ".5 GiB", "3 GB/ms", "25 Gbit / s", "7 furlong"}
    assert len(strings) > 50  # the scan found the catalog and scenarios
    for text in sorted(strings):
        for dimension in units._DIMENSIONS:
            first = _by_short_path(text, dimension)  # asks pint for the factor, remembers it
            units._memo.cache_clear()
            units._parse_text.cache_clear()
            again = _by_short_path(text, dimension)  # from the memo file
            assert first == again == _by_pint(text, dimension), (text, dimension)


def test_a_later_process_parses_remembered_units_without_pint(fresh_memo):
    assert units.parse_quantity("400 Gbit/s", "bytes_per_s") == 50e9
    memo = json.loads(next(fresh_memo.glob("unit-factors-pint*.json")).read_text())
    assert memo["factors"] == {"bytes_per_s|Gbit/s": 125e6}
    code = (
        "import sys; from hardware_models.units import parse_quantity as p; "
        "assert p('800 Gbit/s', 'bytes_per_s') == 100e9; print('pint' in sys.modules)"
    )
    env = {**os.environ, "DCSIM_CACHE_DIR": str(fresh_memo)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unreadable_or_foreign_memo_is_ignored(fresh_memo):
    path = units._memo_path()
    path.write_text("not json")
    assert units.parse_quantity("2 us", "seconds") == 2e-6
    units._memo.cache_clear()
    units._parse_text.cache_clear()
    path.write_text(json.dumps({"flop": "another definition", "factors": {"seconds|us": 5.0}}))
    assert units.parse_quantity("2 us", "seconds") == 2e-6


def test_bad_units_still_name_what_is_expected(fresh_memo):
    with pytest.raises(ValueError, match="not a valid bytes per s; expected '400 Gbit/s'"):
        units.parse_quantity("400 furlong", "bytes_per_s")
    assert not any(fresh_memo.glob("*.json")) or "furlong" not in units._memo_path().read_text()
