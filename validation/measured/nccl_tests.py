"""Cases from nccl-tests output (github.com/NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf, ...).

The tools print one table row per message size:

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
         1048576        262144     float     sum      -1    45.31   23.14   40.50      0    44.87   23.37   40.90      0

(out-of-place time/algbw/busbw/#wrong, then in-place; `#wrong` is `N/A` without validation).
The number of ranks is the count of `#  Rank  N Group ...` device lines (else `nGpus` x `nThread`
of the header). The collective is not in the table: it is taken from a `*_perf` command or a
collective name in the text (a saved command line) or in the file name, else guessed from the
columns (redop `sum` and root -1: all_reduce; root >= 0 with redop: reduce; root >= 0 without:
broadcast) - the guess is noted. Measured: the out-of-place time (in-place shown in the name only
when the two differ by more than 10%). Predicted: the collective of that size on the first `ranks`
devices of the target (mapping.py), NCCL's protocol model. Sizes follow nccl-tests (`size` is the
total buffer for all_gather / reduce_scatter), as dcsim's collectives do.
"""

from __future__ import annotations

import re
from pathlib import Path

from sim.errors import ScenarioError
from validation.measured.mapping import Measured, MeasuredCase, Target

PERF_NAMES = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather", "allgather": "all_gather",
    "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter", "alltoall": "all_to_all",
    "all_to_all": "all_to_all", "sendrecv": "send_recv", "send_recv": "send_recv", "broadcast": "broadcast",
    "reduce": "reduce", "gather": "gather", "scatter": "scatter", "hypercube": "hypercube",
}  # fmt: skip
ROW_RE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)(.*)$")
RANK_LINE_RE = re.compile(r"^#\s+Rank\s+\d+\s+Group", re.MULTILINE)
HEADER_RE = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")


def looks_like(text: str) -> bool:
    return "out-of-place" in text or ("busbw" in text and "algbw" in text)


def _op(text: str, path: Path, rows: list[tuple]) -> tuple[str, str]:
    for source in (text, path.name):
        for m in re.finditer(r"([a-z_]+)_perf", source.lower()):
            if m.group(1) in PERF_NAMES:
                return PERF_NAMES[m.group(1)], f"{m.group(0)} named in the {'text' if source is text else 'file name'}"
    for key in sorted(PERF_NAMES, key=len, reverse=True):
        if key in path.name.lower():
            return PERF_NAMES[key], "collective from the file name"
    redop, root = rows[0][3], int(rows[0][4])
    if root >= 0:
        return ("reduce" if redop not in ("none", "-") else "broadcast"), "guessed from redop/root columns"
    return "all_reduce", "guessed from redop/root columns (all_reduce; name the *_perf tool in the file to be sure)"


def parse(text: str, path: Path) -> tuple[str, str, int, list[tuple]]:
    rows = [m.groups() for m in (ROW_RE.match(line) for line in text.splitlines() if not line.startswith("#")) if m]
    if not rows:
        raise ScenarioError(
            "no nccl-tests result rows (size count type redop root time ...)", path="--measured", value=str(path)
        )
    ranks = len(RANK_LINE_RE.findall(text))
    if ranks == 0:
        m = HEADER_RE.search(text)
        ranks = int(m.group(1)) * int(m.group(2)) if m else 0
    op, how = _op(text, path, rows)
    return op, how, ranks, rows


def read(path: str | Path, target: Target) -> Measured:
    path = Path(path)
    text = path.read_text(errors="replace")
    op, how, ranks, rows = parse(text, path)
    out = Measured(source=str(path), notes=[f"collective: {op} ({how}); ranks: {ranks or 'unknown'}"])
    if ranks < 2:
        out.notes.append("fewer than 2 ranks found (no '#  Rank N Group' lines or nGpus header): no predictions")
    for size, _count, dtype, _redop, _root, t_oop, *_rest in rows:
        nbytes, measured = float(size), float(t_oop) * 1e-6
        tail = _rest[-1].split()
        in_place = float(tail[0]) * 1e-6 if tail and re.fullmatch(r"[\d.]+", tail[0]) else None
        name = f"{op} {int(nbytes)} B {dtype}"
        if in_place is not None and abs(in_place - measured) > 0.1 * measured:
            name += f" (in-place {in_place * 1e6:.1f} us)"
        predicted = target.collective_s(op, nbytes, ranks) if ranks >= 2 and nbytes > 0 else None
        method = f"network collective on {ranks} ranks" if predicted is not None else "no prediction"
        out.cases.append(MeasuredCase(name, "collective", measured, predicted, 1, method))
    return out
