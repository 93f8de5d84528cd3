"""Cases from a PyTorch profiler trace (torch.profiler Chrome/Kineto JSON; a file, a merged file of
several ranks, or a directory of per-rank files - sim/workloads/trace_replay/pytorch_trace.py reads them).

The trace is cut into the same graph `kind: trace_replay` replays (graph.py), and every node becomes
a measurement:
- each compute op of a modelled category (GEMM: aten::mm/addmm/bmm/matmul/linear; attention:
  scaled_dot_product_attention and its flash/efficient kernels; embedding: embedding_bag/embedding;
  elementwise) - on a GPU trace, the kernels it launched - grouped by name, input dims and dtypes:
  one case per group, measured = median over its occurrences (all ranks), predicted by the device model;
- each collective (gloo:/nccl: record names, NCCL kernels) grouped by op and bytes: measured = median
  duration on its rank (it includes waiting for the slower peer), predicted on the target's network
  for the trace's ranks;
- each ProfilerStep#N: measured = the slowest rank's step, predicted = the step replayed by
  `kind: trace_replay` on the target.
Unmatched: every operation outside those classes (aten views and allocation, autograd bookkeeping,
optimizer glue, kernels without a launching op) summarised by name with its count and own time
(less the ops inside it); modelled ops whose shapes were not recorded are cases without a prediction.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from sim.workloads.trace_replay.graph import from_pytorch
from sim.workloads.trace_replay.ops import MODELLED, category
from sim.workloads.trace_replay.pytorch_trace import load_ranks, trace_files
from validation.measured.mapping import Measured, MeasuredCase, Target, Unmatched


def _shape_label(op) -> str:
    dims = [d for d in op.dims if isinstance(d, list) and d]
    types = sorted({t for t in op.types if t and t not in ("Scalar", "ScalarList")})
    return "x".join("[" + ",".join(str(x) for x in d) + "]" for d in dims) + (f" {'/'.join(types)}" if types else "")


def read(path: str | Path, target: Target) -> Measured:
    files = trace_files(str(path))
    ranks = load_ranks(files)
    graphs = [from_pytorch(r) for r in ranks]
    out = Measured(source=str(path))
    _kernels(graphs, target, out)
    _collectives(graphs, target, out)
    _steps(graphs, [str(f) for f in files], target, out)
    _unmatched(ranks, out)
    return out


def _kernels(graphs, target: Target, out: Measured) -> None:
    per_op: dict[int, list] = {}  # one recorded op (its kernels summed on a GPU trace)
    for g in graphs:
        for n in g.nodes:
            if n.kind == "op" and n.category in MODELLED:
                entry = per_op.setdefault(id(n.op), [n.op, n.category, n.name, 0.0])
                entry[3] += n.measured_s
    groups: dict[tuple, list] = defaultdict(list)
    for op, cat, _, seconds in per_op.values():
        groups[(cat, op.name, _shape_label(op))].append((op, seconds))
    for (cat, name, shape), items in sorted(groups.items()):
        predicted = target.kernel_s(items[0][0], cat)
        measured = statistics.median(s for _, s in items)
        method = (
            "device model" if predicted is not None else "no tensor shapes or dtype (a scalar, or record_shapes=False)"
        )
        out.cases.append(MeasuredCase(f"{name} {shape}".strip(), cat, measured, predicted, len(items), method))


def _collectives(graphs, target: Target, out: Measured) -> None:
    groups: dict[tuple, list[float]] = defaultdict(list)
    calls = {}
    for g in graphs:
        for n in g.nodes:
            if n.kind == "collective":
                if n.call is None:
                    out.unmatched.append(Unmatched(n.name, 1, n.measured_s, "collective without op/size"))
                    continue
                key = (n.name, n.call.op, n.call.nbytes)
                groups[key].append(n.measured_s)
                calls[key] = n.call
    world = len(graphs)
    for (name, op, nbytes), samples in sorted(groups.items()):
        protocol = None if name.startswith("gloo:") else "auto"
        predicted = target.collective_s(op, nbytes, world, protocol)
        method = f"network collective on {world} ranks" + (" (lock-step, gloo)" if protocol is None else "")
        if predicted is None:
            method = f"no prediction ({op} on {world} ranks: one rank, unknown op, or a cluster too small)"
        out.cases.append(
            MeasuredCase(
                f"{name} {nbytes:.0f} B", "collective", statistics.median(samples), predicted, len(samples), method
            )
        )


def _steps(graphs, files: list[str], target: Target, out: Measured) -> None:
    numbers = sorted({s for g in graphs for s in g.measured_steps_s})
    if not numbers:
        out.notes.append("no ProfilerStep#N in the trace (profile with a schedule and prof.step()): no step cases")
        return
    trace = files if len(files) > 1 else files[0]
    replayed = target.replay_steps(trace, len(graphs))
    for i, s in enumerate(numbers):
        measured = max(g.measured_steps_s.get(s, 0.0) for g in graphs)
        out.cases.append(
            MeasuredCase(f"ProfilerStep#{s}", "step", measured, replayed.get(i), len(graphs), "trace_replay")
        )


def _unmatched(ranks, out: Measured) -> None:
    """Operations no model covers, by name: their count and own time (duration less the ops inside
    them; ops inside a modelled op or a collective are part of it)."""
    found: dict[str, list[float]] = defaultdict(list)

    def visit(ev, covered: bool) -> None:
        cat = category(ev.record)
        if not covered and ev.cat == "cpu_op" and cat == "other":
            found[ev.name].append(max(ev.dur_s - sum(c.dur_s for c in ev.children), 0.0))
        inside = covered or cat in MODELLED or cat == "collective"
        for c in ev.children:
            visit(c, inside)

    for r in ranks:
        for roots in r.threads.values():
            for root in roots:
                visit(root, False)
        for kernels in r.streams.values():
            for k in kernels:
                if k.args.get("correlation") is None:
                    found[k.name].append(k.dur_s)
    for name, durs in sorted(found.items(), key=lambda kv: -sum(kv[1])):
        out.unmatched.append(Unmatched(name, len(durs), sum(durs)))
