"""`SpanSkeleton.add` reuses the codes of a (component, track, category) seen before: the same
interned codes, in the same order of first use, as coding each name per call (issue 26)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.engine.span_skeleton import SpanSkeleton


class _Forgetful(dict):
    """A cache that never keeps anything: every add codes its names again."""

    def __setitem__(self, key, value) -> None:
        pass


def test_cached_codes_equal_coding_every_call():
    rng = np.random.default_rng(0)
    cached, plain = SpanSkeleton(), SpanSkeleton()
    plain._triples = _Forgetful()
    for i in range(300):
        c, t, cat = f"n{int(rng.integers(6))}", ("cpu", "nic", "send")[int(rng.integers(3))], ("comm", "compute")[i % 2]
        if i % 17 == 0:  # a bulk chunk in between (codes category first)
            for s in (cached, plain):
                where = np.array([[s.code(c), s.code(t), s.code(cat)]], dtype=np.int32)
                s.add_many(where, np.array([0.5]), np.array([1.5]), 10_000 + i, -1)
        else:
            for s in (cached, plain):
                s.add(c, t, cat, float(i), float(i) + 0.25, i, i - 1, i - 2)
    assert cached.frame().equals(plain.frame())
    assert list(cached._names) == list(plain._names) and len(cached._triples) > 0


def test_past_its_capacity_the_skeleton_keeps_the_newest_spans():
    """The walk starts at the end of the run, so the oldest skeletons go first (a quarter of the
    capacity at a time); positions (`added`, `rows`) count every skeleton ever added."""
    skeleton = SpanSkeleton(capacity=8)
    for i in range(20):
        skeleton.add("g0", "compute", "compute", float(i), float(i) + 1, i, i - 1, i - 1)
    assert len(skeleton) <= 8 and skeleton.added == 20 and skeleton.lost == 20 - len(skeleton)
    kept = skeleton.frame()["id"].tolist()
    assert kept == list(range(20 - len(skeleton), 20))  # the newest, in order
    assert [r[5] for r in skeleton.rows(18, 20)] == [18, 19]  # positions, not indices
    assert skeleton.rows(0, 5) == []  # evicted
    where = np.zeros((30, 3), dtype=np.int32)
    skeleton.add_many(where, np.arange(30.0), np.arange(30.0) + 1, 100, 19)  # more than fit at all
    assert skeleton.frame()["id"].tolist() == list(range(122, 130)) and skeleton.added == 50


@pytest.mark.parametrize("capacity", [64, 100, 1000])
def test_single_spans_go_into_chunks_that_evictions_drop_whole(capacity):
    """Spans added one by one move into chunks of capacity / 16 as they come; past the capacity the
    eviction keeps 3/4 of it, the newest, exactly as without chunks (whole chunks go, and at most
    part of one is copied)."""
    skeleton = SpanSkeleton(capacity=capacity)
    for i in range(5 * capacity + 7):
        skeleton.add("g0", "compute", "compute", float(i), float(i) + 1, i, i - 1, i - 1)
        assert len(skeleton) <= capacity
        assert skeleton.singles <= capacity // 16  # the single spans not yet in a chunk
    n = 5 * capacity + 7
    held = len(skeleton)
    assert skeleton.added == n and skeleton.lost == n - held
    # each eviction leaves 3/4 of the capacity; the spans since then are added on top
    assert held == capacity * 3 // 4 + (n - capacity) % (capacity - capacity * 3 // 4)
    frame = skeleton.frame()
    assert frame["id"].tolist() == list(range(n - held, n))
    assert frame["start_s"].tolist() == [float(i) for i in range(n - held, n)]


def test_a_run_past_the_skeleton_capacity_reports_a_partial_path_with_an_exact_end(monkeypatch):
    from sim.engine import span_skeleton
    from sim.runner import run
    from sim.scenario.model import load_scenario

    scenario = load_scenario("tests/report/data/train-llama3-8b-tp8-dp8.yaml", ["trace_limit=50"])
    whole = run(scenario).bottleneck
    monkeypatch.setattr(span_skeleton.SpanSkeleton.__init__, "__defaults__", (300,))
    cut = run(scenario)
    assert cut.sim.recorder.skeleton.lost > 0
    report = cut.bottleneck
    assert whole["exact"] and not report["exact"] and "oldest of the last" in report["partial"]
    path = report["critical_path"]
    assert path["unrecorded"] > 0 and "idle" not in path  # never time after the kept spans called idle
    assert sum(path.values()) == pytest.approx(sum(whole["critical_path"].values()), rel=1e-9)


@pytest.mark.parametrize("counted", [False, True])
@pytest.mark.parametrize("capacity", [10_000, 40, 9])
def test_steps_added_together_equal_adding_each_transfer(capacity, counted):
    """`add_steps` keeps a replayed schedule's steps as one lazy chunk, each flow's end an offset from
    its step's start: the same rows, ids, causes and evictions as `add_many` per step, whatever the
    capacity (9: the skeleton evicts in the middle of a schedule), with or without the caller's count
    of their flows (`counted`: the list kept as it is where they all fit)."""
    rng = np.random.default_rng(1)
    together, one_by_one = SpanSkeleton(capacity=capacity), SpanSkeleton(capacity=capacity)
    for skeleton in (together, one_by_one):
        [skeleton.code(f"name{k}") for k in range(4)]  # codes 0..3
    next_id = 0
    for schedule in range(12):
        steps = []
        for k in range(int(rng.integers(1, 5))):
            n = int(rng.integers(1, 6))
            where = np.full((n, 3), k, dtype=np.int32)
            start, offsets = float(schedule) + 0.1 * k, rng.uniform(0.01, 0.09, n)
            steps.append((where, start, offsets, next_id, next_id - 1))
            next_id += n
        together.add_steps(steps, sum(len(step[0]) for step in steps) if counted else None)
        for where, start, offsets, first, after in steps:
            one_by_one.add_many(where, start, start + offsets, first, after)
        together.add("g0", "compute", "compute", 99.0, 99.5, next_id, -1, -1)  # single spans between
        one_by_one.add("g0", "compute", "compute", 99.0, 99.5, next_id, -1, -1)
        next_id += 1
    assert together.added == one_by_one.added and together.lost == one_by_one.lost
    assert together.rows(0, together.added) == one_by_one.rows(0, one_by_one.added)
    pd.testing.assert_frame_equal(together.frame(), one_by_one.frame())


@pytest.mark.parametrize("capacity", [10_000, 40, 9])
def test_columns_added_together_equal_adding_each_span(capacity):
    """`add_columns` (spans already laid out: a replayed layer's skeletons for every copy at once)
    keeps what `add` of each span in turn keeps: the same rows and evictions, whatever the capacity
    (9: the skeleton evicts in the middle of the columns)."""
    rng = np.random.default_rng(2)
    together, one_by_one = SpanSkeleton(capacity=capacity), SpanSkeleton(capacity=capacity)
    names = [("g0", "compute", "compute"), ("g1", "nic", "comm"), ("g0", "nvlink", "comm")]
    next_id = 0
    for _ in range(10):
        n = int(rng.integers(1, 25))
        which = rng.integers(0, len(names), n)
        starts = rng.uniform(0, 1, n)
        rows = [
            (*names[w], float(s), float(s) + 0.5, next_id + k, next_id - 1, next_id - 2)
            for k, (w, s) in enumerate(zip(which, starts))
        ]
        next_id += n
        for row in rows:
            one_by_one.add(*row)
        where = np.array([together.codes(*row[:3]) for row in rows], dtype=np.int32)
        times = np.array([row[3:5] for row in rows], dtype=float)
        causes = np.array([row[5:] for row in rows], dtype=np.int64)
        together.add_columns(where, times, causes)
        for skeleton in (together, one_by_one):  # a single span between
            skeleton.add("g2", "compute", "compute", 5.0, 5.5, next_id, -1, -1)
        next_id += 1
    assert together.added == one_by_one.added and together.lost == one_by_one.lost
    assert together.rows(0, together.added) == one_by_one.rows(0, one_by_one.added)
    pd.testing.assert_frame_equal(together.frame(), one_by_one.frame())


@pytest.mark.parametrize("capacity", [40, 1000])
def test_single_spans_between_bulk_chunks_read_back_as_added(capacity):
    """A bulk chunk moves the single spans gathered before it into a chunk of their own, kept as
    gathered and laid out only when read (or when an eviction cuts through it): read back, every
    span is the one added, in order, with its ids and times to the last bit (ids past 2**40, times of
    a full mantissa: kept as packed doubles), whatever the flush pattern; past the capacity the newest
    are kept."""
    rng = np.random.default_rng(1)
    skeleton, added = SpanSkeleton(capacity=capacity), []
    sid = 2**40 + 1
    for i in range(300):
        if rng.random() < 0.3:  # a bulk chunk of a few flows
            n = int(rng.integers(1, 4))
            code = [skeleton.code(x) for x in ("nic0", "nic", "comm")]
            skeleton.add_many(
                np.array([code] * n, dtype=np.int32), np.full(n, float(i)), i + np.arange(1.0, n + 1), sid, sid - 1
            )
            added += [("nic0", "nic", "comm", float(i), float(i + k + 1), sid + k, sid - 1, sid - 1) for k in range(n)]
            sid += n
        else:
            component = f"g{int(rng.integers(3))}"
            start = i + float(rng.random())
            skeleton.add(component, "compute", "compute", start, start / 3 + i, sid, sid - 1, sid - 2)
            added.append((component, "compute", "compute", start, start / 3 + i, sid, sid - 1, sid - 2))
            sid += 1
    assert skeleton.added == len(added) and skeleton.lost == len(added) - len(skeleton)
    assert skeleton.rows(0, skeleton.added) == added[skeleton.lost :]
