"""Human quantities -> SI floats, in one place.

Scenario and catalog YAML may write sizes, rates and times as strings with units
("400 Gbit/s", "96 GiB", "2 us", "800 TFLOP/s", "700 W"); inside the code every quantity is a
plain float in SI base units with the unit in its name (`_bytes`, `_bytes_per_s`, `_s`,
`_flop_per_s`, `_w`). Parsing is done by pint, with one extra dimension, `flop`.

pint is the one source of unit definitions, but importing it and building its registry takes a
third of a second, more than a small scenario's run. So the registry is built on first need
(`_registry`), and "NUMBER UNIT" strings take a short path: the factor of UNIT to the dimension's
base unit, asked of pint once and remembered in a small JSON memo in the user's cache directory
(`$DCSIM_CACHE_DIR`, else `$XDG_CACHE_HOME/dcsim`, else `~/.cache/dcsim`; one file per pint
version), times NUMBER. That is the product pint itself computes (its conversion multiplies the
magnitude by the same factor), so both paths give the same float (tests/hardware_models/test_unit_memo.py
compares them on every unit string the repository's YAML uses). Anything else — other shapes,
unknown units, errors — goes to pint.

A bare number is taken to already be in the base unit (bytes, bytes/s, seconds, FLOP/s, watts).
The pydantic annotated types at the bottom (`Bytes`, `BytesPerS`, `Seconds`, `FlopPerS`, `Watts`)
are what config models use, so a bad unit becomes a validation error with its key path.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import BeforeValidator

if TYPE_CHECKING:
    import pint

_FLOP_DEFINITION = "flop = [computation] = FLOP = flops = FLOPS"

# dimension name -> (pint target unit, example shown in error messages)
_DIMENSIONS: dict[str, tuple[str, str]] = {
    "bytes": ("byte", "'96 GiB' or a number of bytes"),
    "bytes_per_s": ("byte / second", "'400 Gbit/s', '2.4 TB/s' or a number of bytes/s"),
    "seconds": ("second", "'2 us', '5 ms' or a number of seconds"),
    "flop_per_s": ("flop / second", "'800 TFLOP/s' or a number of FLOP/s"),
    "watts": ("watt", "'700 W' or a number of watts"),
}

# "NUMBER UNIT": a plain decimal number (pint reads it the same way) and a unit made of names, '/'
# and '*'. Anything else (expressions, underscores, exponents of units) is left to pint.
_NUMBER_UNIT = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z][A-Za-z/* ]*?)\s*")


@lru_cache(maxsize=1)
def _registry() -> pint.UnitRegistry:
    """The process's one registry, built on first need; read-only after construction."""
    import pint

    registry: pint.UnitRegistry = pint.UnitRegistry()
    registry.define(_FLOP_DEFINITION)
    return registry


def _pint_parse(text: str, unit: str) -> float:
    quantity: pint.Quantity = _registry().Quantity(text.strip())
    if quantity.unitless:
        raise ValueError("no unit")
    return float(quantity.to(unit).magnitude)


def _memo_path() -> Path:
    root = os.environ.get("DCSIM_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "dcsim"
    )
    return Path(root, f"unit-factors-pint{version('pint')}.json")


@lru_cache(maxsize=1)
def _memo() -> dict[str, float]:
    """`dimension|unit` -> factor, as read from the memo file at first use ({} if none or unreadable)."""
    try:
        memo = json.loads(_memo_path().read_text())
    except (OSError, ValueError):
        return {}
    ok = isinstance(memo, dict) and memo.get("flop") == _FLOP_DEFINITION
    return {k: float(v) for k, v in memo.get("factors", {}).items()} if ok else {}


def _remember(key: str, factor: float) -> None:
    """Add a factor to the memo file (atomically replaced; a cache: failures are ignored)."""
    memo = _memo()
    memo[key] = factor
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            json.dump({"flop": _FLOP_DEFINITION, "factors": memo}, out, indent=0, sort_keys=True)
        os.replace(out.name, path)
    except OSError:
        pass


def _unit_factor(unit_text: str, dimension: str) -> float:
    """How many base units of `dimension` one `unit_text` is (pint's conversion factor, memoised)."""
    key = f"{dimension}|{unit_text}"
    factor = _memo().get(key)
    if factor is None:
        factor = _pint_parse(f"1 {unit_text}", _DIMENSIONS[dimension][0])
        _remember(key, factor)
    return factor


@lru_cache(maxsize=4096)
def _parse_text(text: str, dimension: str) -> float:
    unit, example = _DIMENSIONS[dimension]
    try:
        return float(text.replace("_", ""))
    except ValueError:
        pass
    try:
        match = _NUMBER_UNIT.fullmatch(text)
        if match:
            return float(match[1]) * _unit_factor(match[2], dimension)
        return _pint_parse(text, unit)
    except Exception as exc:  # pint raises several error classes; all mean "not this quantity"
        raise ValueError(f"{text!r} is not a valid {dimension.replace('_', ' ')}; expected {example}") from exc


def parse_quantity(value: object, dimension: str) -> float:
    """Parse a number or a string with units into a float in the SI base unit of `dimension`.

    >>> parse_quantity("400 Gbit/s", "bytes_per_s")
    50000000000.0
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a valid {dimension.replace('_', ' ')}")
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        result = _parse_text(value, dimension)
    else:
        raise ValueError(
            f"{value!r} is not a valid {dimension.replace('_', ' ')}; expected {_DIMENSIONS[dimension][1]}"
        )
    if result != result or result in (float("inf"), float("-inf")):
        raise ValueError(f"{value!r} is not a finite {dimension.replace('_', ' ')}")
    return result


def _validator(dimension: str):
    return BeforeValidator(lambda v: parse_quantity(v, dimension))


Bytes = Annotated[float, _validator("bytes")]
BytesPerS = Annotated[float, _validator("bytes_per_s")]
Seconds = Annotated[float, _validator("seconds")]
FlopPerS = Annotated[float, _validator("flop_per_s")]
Watts = Annotated[float, _validator("watts")]


def format_bytes(n: float) -> str:
    """Binary-prefixed size for tables: 1.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"


def format_rate(bytes_per_s: float) -> str:
    """Decimal rate for tables: 48.0 GB/s."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(bytes_per_s) >= scale:
            return f"{bytes_per_s / scale:.3g} {unit}"
    return f"{bytes_per_s:.3g} B/s"


def format_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(s) >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s:.3g} s"


def format_duration(s: float) -> str:
    """A length of time for people: 0.2 s, 12.3 s, 4.5 min, 2.1 h, 3.2 d (below a second: ms, us, ns)."""
    for unit, scale in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(s) >= scale * (2 if unit != "d" else 1):
            return f"{s / scale:.2g} {unit}"
    return format_seconds(float(f"{s:.2g}"))


def format_flop_rate(flop_per_s: float) -> str:
    """Decimal compute rate for tables: 989 TFLOP/s."""
    for unit, scale in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if abs(flop_per_s) >= scale:
            return f"{flop_per_s / scale:.4g} {unit}"
    return f"{flop_per_s:.4g} FLOP/s"


def format_watts(watts: float) -> str:
    """Power for tables: 700 W, 10.2 kW, 8.7 MW."""
    for unit, scale in (("MW", 1e6), ("kW", 1e3)):
        if abs(watts) >= scale:
            return f"{watts / scale:.4g} {unit}"
    return f"{watts:.4g} W"


def format_in(value: float, dimension: str) -> str:
    """A value of one of the dimensions above ('bytes', 'bytes_per_s', 'seconds', 'flop_per_s',
    'watts'), with its unit: sizes in decimal and binary prefixes (80 GB = 74.5 GiB), rates in
    bytes and bits per second (50 GB/s = 400 Gbit/s)."""
    if dimension == "bytes":
        binary = format_bytes(value)
        decimal = _decimal(value, "B")
        return decimal if binary.endswith(" B") or decimal == binary.replace("i", "") else f"{decimal} ({binary})"
    if dimension == "bytes_per_s":
        return f"{format_rate(value)} ({_decimal(8 * value, 'bit/s')})"
    formatter = {"seconds": format_seconds, "flop_per_s": format_flop_rate, "watts": format_watts}[dimension]
    return formatter(value)


def _decimal(value: float, unit: str) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K" if unit == "B" else "k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"
