"""`SpanSkeleton.add` reuses the codes of a (component, track, category) seen before: the same
interned codes, in the same order of first use, as coding each name per call (issue 26)."""

from __future__ import annotations

import numpy as np

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
