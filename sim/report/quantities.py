"""How a metric's value is written for people: its unit and a sensible number of digits.

Units come from the metric's name (the naming contract in README.md, "Contracts": `_s`, `_bytes`,
`_bytes_per_s`, `_j`, `_w`, `_w_per_s`, `_usd`, `_fraction`, `_flop`, `_flop_per_s`, `_tflop_per_s`,
`<things>_per_s`), then from the kind's documentation (`Workload.metrics`: "name -> meaning, unit",
the unit after the last comma). Units are short symbols:

| unit      | meaning                | written as                         |
|-----------|------------------------|------------------------------------|
| `s`       | seconds                | 8.158 ms, 10.71 s, 11,135 s (3.09 h) |
| `B`       | bytes                  | 65.2 GiB (binary prefixes)         |
| `B/s`     | bytes per second       | 132 GB/s (decimal, as NICs are sold) |
| `J` `W` `W/s` `FLOP` `FLOP/s` | SI  | 3.24 kJ, 8.47 kW, 1.89 PFLOP     |
| `TFLOP/s` | already in TFLOP/s     | 386.4 TFLOP/s                      |
| `%`       | a fraction in [0, 1]   | 33.5 %, 0.61 %                     |
| `x`       | a ratio                | 3.67x                              |
| `USD`     | money                  | 0.000151 USD, 67,609,544 USD       |
| `<thing>/s`, `<thing>` | counted things | 2.51 M tokens/s, 10.5 T tokens |
| `count`, `` | plain numbers, names | 16,384; 463.8; 2.11 G              |

Every function here is pure (value in, text out) so the table layout (sim/report/table.py) and its
tests share one definition.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from hardware_models.units import format_bytes

# (pattern on the last dotted part of a metric name, unit); first match wins
_NAME_UNITS: tuple[tuple[str, str], ...] = (
    (r"(^|_)bytes_per_s$", "B/s"),
    (r"(^|_)(ratio|imbalance|slowdown_vs_alone|relative_to_[a-z_]+)$", "x"),
    (r"(^|_)tflop_per_s($|_)", "TFLOP/s"),
    (r"(^|_)flop_per_s($|_)", "FLOP/s"),
    (r"(^|_)flop($|_)", "FLOP"),
    (r"(^|_)w_per_s$", "W/s"),
    (r"(^|_)bytes($|_)", "B"),
    (r"(^|_)j($|_)", "J"),
    (r"(^|_)w($|_)", "W"),
    (r"(^|_)usd$", "USD"),
    (r"(^|_)(fraction|mfu|hfu|utilisation|utilization|miss_rate|miss_rate_threshold)($|_)", "%"),
    (r"(^|_)s_per_[a-z_]+$", "s"),
    (r"([a-z]+)_per_s$", r"\1/s"),
    (r"(^|_)s($|_)", "s"),
    (r"(^|_)(params|stage|step|shards|ranks|replicas|gpus|hosts|tables|requests|workers)($|_)", "count"),
)
# the unit word at the end of a documented meaning -> unit symbol
_DOC_UNITS = {
    "s": "s",
    "list of s": "s",
    "bytes": "B",
    "list of bytes": "B",
    "bytes/s": "B/s",
    "fraction": "%",
    "list of fractions": "%",
    "ratio": "x",
    "ratios": "x",
    "count": "count",
    "counts": "count",
    "dict of counts": "count",
    "list of counts": "count",
    "tokens": "tokens",
    "flop": "FLOP",
    "tflop/s": "TFLOP/s",
}
_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"))
SI_UNITS = ("J", "W", "W/s", "FLOP", "FLOP/s")


def unit_of(name: str, doc: str | None = None) -> str:
    """The unit symbol of a metric: 'busbw_bytes_per_s' -> 'B/s', 'energy_j_by_class' -> 'J',
    'samples_per_s' -> 'samples/s'; '' when neither the name nor `doc` ("meaning, unit") says."""
    last = str(name).split(".")[-1].lower()
    for pattern, unit in _NAME_UNITS:
        match = re.search(pattern, last)
        if match:
            return match.expand(unit)
    if doc and "," in doc:
        word = doc.rsplit(",", 1)[1].strip().rstrip(";").lower()
        if word in _DOC_UNITS:
            return _DOC_UNITS[word]
        if re.fullmatch(r"[a-z]+/s", word):
            return word
    return ""


def si(value: float, unit: str, digits: int = 3) -> str:
    """SI-prefixed quantity: si(3240, 'J') -> '3.24 kJ'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".rstrip()
    for scale, prefix in _SI:
        if abs(value) >= scale * 0.9995:
            return f"{value / scale:.{digits}g} {prefix}{unit}".rstrip()
    return f"{value:.{digits}g} {unit}".rstrip()


def format_time(seconds: float) -> str:
    """4 significant digits in s, ms, µs or ns; long times also in hours or days."""
    s = float(seconds)
    if s == 0 or not math.isfinite(s):
        return f"{s:g} s"
    if abs(s) >= 1000:
        days = abs(s) / 86400
        human = f"{days:.3g} d" if days >= 2 else f"{abs(s) / 3600:.3g} h"
        return f"{s:,.0f} s ({human})"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(s) >= scale * 0.99995:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_rate(bytes_per_s: float) -> str:
    """Decimal bytes per second, 3 significant digits: 132 GB/s."""
    return si(float(bytes_per_s), "B/s").replace("kB/s", "KB/s")


def format_percent(fraction: float) -> str:
    """A fraction as a percentage: 0.335 -> '33.5 %', 0.0061 -> '0.61 %'."""
    p = 100.0 * float(fraction)
    if p == 0:
        return "0 %"
    return f"{p:.1f} %" if abs(p) >= 10 else f"{p:.2g} %"


def format_count(value: float, what: str = "") -> str:
    """Integers with thousands separators, fractional counts to 4 digits, millions and up SI-prefixed."""
    v = float(value)
    tail = f" {what}" if what else ""
    if abs(v) >= 1e6:
        return si(v, "", 3) + tail
    if v == int(v):
        return f"{int(v):,}{tail}"
    return (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}") + tail


def format_usd(value: float) -> str:
    v = float(value)
    if abs(v) >= 1000:
        return f"{v:,.0f} USD"
    return f"{v:.2f} USD" if abs(v) >= 1 else f"{v:.3g} USD"


def format_quantity(value, unit: str) -> str:
    """`value` written in `unit` (a symbol from unit_of); None -> '-', text as is."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value}"
    if unit == "s":
        return format_time(value)
    if unit == "B":
        return format_bytes(float(value)) if abs(value) >= 1024 or isinstance(value, float) else f"{value} B"
    if unit == "B/s":
        return format_rate(value)
    if unit in SI_UNITS:
        return si(float(value), unit)
    if unit == "TFLOP/s":
        return f"{value:.4g} TFLOP/s"
    if unit == "%":
        return format_percent(value)
    if unit == "x":
        return f"{value:.3g}x"
    if unit == "USD":
        return format_usd(value)
    return format_count(value, "" if unit == "count" else unit)


def format_metric(name: str, value, doc: str | None = None) -> str:
    """A metric's value with the unit its name or documentation gives."""
    return format_quantity(value, unit_of(name, doc))


def is_scalar(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def compact_list(values: list, unit: str, limit: int = 8) -> str | None:
    """Short lists written out, runs of equal values as 'v x n' ('3, 4 x 30, 3'); None when longer
    than `limit` items after that."""
    runs: list[list] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    if len(runs) > limit:
        return None
    return ", ".join(format_quantity(v, unit) + (f" x {n}" if n > 1 else "") for v, n in runs)


def list_summary(values: list, unit: str) -> str:
    """'16 values: min 3, median 4, max 4' for a long list of numbers (its items otherwise)."""
    numbers = sorted(float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    if len(numbers) != len(values) or not numbers:
        return f"{len(values)} items"
    mid = numbers[len(numbers) // 2]
    q = lambda v: format_quantity(v, unit)  # noqa: E731
    return f"{len(values)} values: min {q(numbers[0])}, median {q(mid)}, max {q(numbers[-1])}"


def column_scale(values: list, unit: str) -> tuple[float, str]:
    """(divisor, unit shown in the header) that writes a whole column in one unit chosen by its
    largest magnitude, e.g. times in µs, bandwidths in GB/s (nccl-tests style)."""
    finite = [abs(float(v)) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    top = max(finite, default=0.0)
    if unit == "s":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if top >= scale:
                return scale, name
        return 1e-9, "ns"
    if unit == "B":
        for k, name in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
            if top >= 1024**k:
                return float(1024**k), name
        return 1.0, "B"
    if unit in ("B/s", *SI_UNITS):
        for scale, prefix in _SI[:7]:
            if top >= scale:
                return scale, ("K" if prefix == "k" and unit == "B/s" else prefix) + unit
        return 1.0, unit
    if unit == "%":
        return 0.01, "%"
    return 1.0, unit


def scaled(value, scale: float) -> str:
    """A number already scaled to its column's unit, 4 significant digits (no exponent below 1e4)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    v = float(value) / scale
    if v == 0:
        return "0"
    return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.4g}"


def shares(parts: Mapping[str, float], total: float | None = None) -> dict[str, float]:
    """Each part over `total` (default: the sum of the parts); empty when the total is 0."""
    whole = float(sum(parts.values())) if total is None else float(total)
    return {k: float(v) / whole for k, v in parts.items()} if whole else {}


def sums_to(total: float, candidates: Mapping[str, object], rel: float = 0.005) -> str | None:
    """The name of the scalar in `candidates` equal to `total` within `rel` (a breakdown's whole)."""
    for name, value in candidates.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            if abs(float(value) - total) <= rel * abs(float(value)):
                return name
    return None


def bound_note(name: str, value, doc: str | None, results: Mapping[str, object]) -> str | None:
    """What a `*bound*` metric bounds, and which printed results of its unit are smaller than it
    (so a reader never takes it for a bound on them); None for other metrics."""
    if "bound" not in name or not isinstance(value, (int, float)):
        return None
    unit = unit_of(name, doc)
    meaning = doc.rsplit(",", 1)[0] if doc and "," in doc else (doc or "see the kind's documentation")
    smaller = [
        k
        for k, v in results.items()
        if k != name
        and "bound" not in k
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
        and unit_of(k) == unit
        and 0 < v < value
    ]
    note = meaning if "bound" in meaning else f"bounds: {meaning}"
    if smaller:
        named = sorted(smaller, key=len)[:2]  # the headline results (iteration_s ...) have the short names
        note += f"; not a bound on {' or '.join(named)}, which {'is' if len(named) == 1 else 'are'} smaller"
    return note
