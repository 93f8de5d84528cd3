"""Cases from a plain CSV: `name, seconds` or `name, size, seconds` rows (an optional header row;
`#` comments). `seconds` is a number of seconds or a time with its unit (`"12 ms"`); `size` is
bytes or a size with its unit (`"1 MiB"`). A name maps to a prediction as follows (anything else is
listed as unmatched):

- a collective (`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send_recv`, optionally
  prefixed `nccl:` / `gloo:` / `c10d::`) with a size: that collective of `size` bytes on all the
  target's devices (2 on the default CPU target); `ranks=N` in the name (`all_reduce ranks=8`) picks N;
- a GEMM written `gemm MxNxK [dtype]` (`gemm 4096x4096x4096 bf16`; dtype default fp32): the device model;
- the name of a metric of the `--scenario` (`iteration_s`, `ttft_s`, `time_s`, ...): the scenario's run.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from hardware_models.units import parse_quantity
from sim.errors import ScenarioError
from sim.workloads.trace_replay.ops import COLLECTIVE_OPS, OpRecord, base_name
from validation.measured.mapping import Measured, MeasuredCase, Target, Unmatched

GEMM_RE = re.compile(r"^gemm\s+(\d+)x(\d+)x(\d+)(?:\s+(\w+))?$", re.IGNORECASE)
RANKS_RE = re.compile(r"\s+ranks=(\d+)\s*$")
DTYPE_NAMES = {"fp32": "float", "bf16": "c10::BFloat16", "fp16": "c10::Half"}


def _number(value: str, dimension: str, where: str) -> float:
    try:
        return float(value)
    except ValueError:
        try:
            return parse_quantity(value, dimension)
        except (ValueError, TypeError) as exc:
            raise ScenarioError(str(exc), path=where, value=value) from None


def rows(path: Path) -> list[tuple[str, float | None, float]]:
    out = []
    with open(path, newline="") as f:
        for i, raw in enumerate(csv.reader(f)):
            cells = [c.strip() for c in raw]
            if not cells or not cells[0] or cells[0].startswith("#"):
                continue
            where = f"{path.name}:{i + 1}"
            if len(cells) not in (2, 3):
                raise ScenarioError("a row is `name, seconds` or `name, size, seconds`", path=where, value=raw)
            if i == 0 and not re.match(r"^[\d.eE+-]+", cells[-1]):
                continue  # header
            size = _number(cells[1], "bytes", where) if len(cells) == 3 and cells[1] else None
            out.append((cells[0], size, _number(cells[-1], "seconds", where)))
    if not out:
        raise ScenarioError("no rows (name, seconds) or (name, size, seconds)", path="--measured", value=str(path))
    return out


def read(path: str | Path, target: Target) -> Measured:
    path = Path(path)
    out = Measured(source=str(path))
    default_ranks = target.hardware(2).num_gpus
    for name, size, seconds in rows(path):
        m = RANKS_RE.search(name)
        ranks = int(m.group(1)) if m else default_ranks
        bare = RANKS_RE.sub("", name)
        op = COLLECTIVE_OPS.get(base_name(bare).lower())
        gemm = GEMM_RE.match(bare)
        if op is not None and size is not None:
            predicted = target.collective_s(op, size, ranks, None if bare.startswith("gloo:") else "auto")
            out.cases.append(
                MeasuredCase(name, "collective", seconds, predicted, 1, f"network collective on {ranks} ranks")
            )
        elif gemm:
            m_, n_, k_ = (int(x) for x in gemm.groups()[:3])
            dtype = DTYPE_NAMES.get((gemm.group(4) or "fp32").lower(), "float")
            record = OpRecord("aten::mm", ([m_, k_], [k_, n_]), (dtype, dtype))
            out.cases.append(MeasuredCase(name, "gemm", seconds, target.kernel_s(record, "gemm"), 1, "device model"))
        elif target.scenario is not None and target.scenario_metric(bare) is not None:
            predicted = target.scenario_metric(bare)
            out.cases.append(MeasuredCase(name, "metric", seconds, predicted, 1, f"metric of {target.label}"))
        else:
            why = (
                "collective without a size column"
                if op is not None
                else "no collective, gemm or scenario metric of this name"
            )
            out.unmatched.append(Unmatched(name, 1, seconds, why))
    return out
