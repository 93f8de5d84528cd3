"""Bulk span recording (Recorder.spans) is what recording each span with Simulation.span does:
the same rows, the same dropped count past the limit, and the same activity for the energy meter's
SpanActivity (sim/engine/activity.py), which takes the spans in bulk."""

import numpy as np
import pytest

from sim.engine.activity import SpanActivity
from sim.engine.simulation import Simulation


def _record(bulk: bool, limit):
    sim = Simulation(span_limit=limit)
    activity = SpanActivity(batch=4)  # small batches: merges happen in between
    seen: list[tuple] = []
    sim.recorder.observers += [activity, lambda *span: seen.append(span)]  # a plain per-span observer too
    rng = np.random.default_rng(0)
    for step in range(6):
        n = int(rng.integers(1, 9))
        comps = [f"h{int(i)}/g0" for i in rng.integers(0, 3, n)]
        tracks = [["nic", "scale_up"][int(i)] for i in rng.integers(0, 2, n)]
        names = [f"step{step} ->{i}" for i in range(n)]
        start = float(step)
        ends = start + rng.random(n)
        sizes = rng.random(n) * 1e6
        if bulk:
            sim.recorder.spans(comps, tracks, names, start, ends, sizes, category="comm")
        else:
            for c, t, name, e, b in zip(comps, tracks, names, ends, sizes):
                sim.span(c, t, name, start, float(e), nbytes=float(b), category="comm")
    keys, starts, ends = activity.intervals()
    return (
        sim.recorder.rows,
        sim.recorder.dropped,
        activity.keys,
        keys,
        starts,
        ends,
        activity.unit_s,
        activity.spans,
        seen,
    )


@pytest.mark.parametrize("limit", [None, 10])
def test_bulk_spans_record_and_observe_what_one_call_per_span_does(limit):
    one_by_one, bulk = _record(False, limit), _record(True, limit)
    rows, dropped, key_names, *arrays, spans_seen, seen = bulk
    # the same rows and ids; the causes differ by design: spans recorded one by one each end by the one
    # recorded before (the current cause), spans of one bulk call all start and end by the cause given
    assert [r[:9] for r in rows] == [r[:9] for r in one_by_one[0]]
    assert dropped == one_by_one[1] and key_names == one_by_one[2]
    assert all(r[9] == r[10] == -1 for r in rows)
    for a, b in zip(arrays, one_by_one[3:7]):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)
    assert spans_seen == one_by_one[7] == len(rows) + dropped
    assert seen == one_by_one[8]
    if limit is not None:
        assert len(rows) == limit and dropped > 0
