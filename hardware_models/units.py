"""Human quantities -> SI floats, in one place.

Scenario and catalog YAML may write sizes, rates and times as strings with units
("400 Gbit/s", "96 GiB", "2 us", "800 TFLOP/s", "700 W"); inside the code every quantity is a
plain float in SI base units with the unit in its name (`_bytes`, `_bytes_per_s`, `_s`,
`_flop_per_s`, `_w`). Parsing is done by pint, with one extra dimension, `flop`.

A bare number is taken to already be in the base unit (bytes, bytes/s, seconds, FLOP/s, watts).
The pydantic annotated types at the bottom (`Bytes`, `BytesPerS`, `Seconds`, `FlopPerS`, `Watts`)
are what config models use, so a bad unit becomes a validation error with its key path.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

import pint
from pydantic import BeforeValidator

# One registry for the process. It is read-only after construction (constant data, not state).
_UREG: pint.UnitRegistry = pint.UnitRegistry()
_UREG.define("flop = [computation] = FLOP = flops = FLOPS")

# dimension name -> (pint target unit, example shown in error messages)
_DIMENSIONS: dict[str, tuple[str, str]] = {
    "bytes": ("byte", "'96 GiB' or a number of bytes"),
    "bytes_per_s": ("byte / second", "'400 Gbit/s', '2.4 TB/s' or a number of bytes/s"),
    "seconds": ("second", "'2 us', '5 ms' or a number of seconds"),
    "flop_per_s": ("flop / second", "'800 TFLOP/s' or a number of FLOP/s"),
    "watts": ("watt", "'700 W' or a number of watts"),
}


@lru_cache(maxsize=4096)
def _parse_text(text: str, dimension: str) -> float:
    unit, example = _DIMENSIONS[dimension]
    try:
        return float(text.replace("_", ""))
    except ValueError:
        pass
    try:
        quantity: pint.Quantity = _UREG.Quantity(text.strip())
        if quantity.unitless:
            raise ValueError("no unit")
        return float(quantity.to(unit).magnitude)
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
