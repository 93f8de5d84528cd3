"""The analytical network's plain-Python path for one-flow calls (`AnalyticalNetwork._transfer_one`,
issue 26) has exactly the effects of the general path (`TransferGroup`, arrays, `Recorder.spans`):
the same completion times, link totals, counters, spans and skeletons (ids and causes included),
span-observer data (`SpanActivity.observe_one` vs `observe_many`) and traffic-observer calls."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.activity import SpanActivity
from sim.network.analytical import AnalyticalNetwork
from tests.conftest import make_cluster


class Calls:
    """A traffic observer that keeps every call (arrays as lists with their dtypes; the one-flow
    path hands over fresh Python lists, kept as the arrays observers make of them)."""

    def __init__(self) -> None:
        self.calls: list = []

    @staticmethod
    def _plain(value, dtype=float):
        if isinstance(value, list):
            value = np.asarray(value, dtype=dtype)
        if isinstance(value, np.ndarray):
            return (value.dtype.str, value.tolist())
        return value

    def on_subflows(self, t0, t1, flat, lengths, nbytes) -> None:
        dtypes = (float, float, np.int64, np.int64, float)
        self.calls.append(("subflows", *(self._plain(v, d) for v, d in zip((t0, t1, flat, lengths, nbytes), dtypes))))

    def on_subflow(self, t0, t1, links, nbytes) -> None:
        """One sub-flow (the one-path transfer's call), kept as `on_subflows` of it."""
        self.on_subflows([t0], [t1], list(links), [len(links)], [nbytes])

    def on_flows(self, srcs, dsts, start_s, finish_s, key=None) -> None:
        self.calls.append(("flows", list(srcs), list(dsts), start_s, self._plain(finish_s), key))


class LastEnds:
    """A traffic observer that takes a transfer's last end (`on_flows_until`), which the general
    path gives as every flow's end (`on_flows`): either way, (srcs, dsts, start, last end)."""

    def __init__(self) -> None:
        self.calls: list = []

    def on_subflows(self, t0, t1, flat, lengths, nbytes) -> None:
        pass

    def on_flows(self, srcs, dsts, start_s, finish_s, key=None) -> None:
        self.calls.append((list(srcs), list(dsts), start_s, float(np.max(finish_s)), key))

    def on_flows_until(self, srcs, dsts, start_s, end_s, key) -> None:
        self.calls.append((list(srcs), list(dsts), start_s, end_s, key))


def _run(fast: bool, seed: int, limit: int, monkeypatch):
    used = []
    if fast:
        one = AnalyticalNetwork._transfer_one

        def spy(self, *args):
            event = one(self, *args)
            used.append(event is not None)
            return event

        monkeypatch.setattr(AnalyticalNetwork, "_transfer_one", spy)
    else:
        monkeypatch.setattr(AnalyticalNetwork, "_transfer_one", lambda self, *args: None)
    c = make_cluster(
        "analytical", nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2}
    )
    sim, net = c.sim, c.network
    sim.recorder.limit = limit
    activity = SpanActivity(batch=7)  # merges often: the chunk order matters for the unit sums
    sim.recorder.observers.append(activity)
    calls, last_ends = Calls(), LastEnds()
    net.traffic_observers += [calls, last_ends]
    nodes = [d.node for d in c.devices]
    rng = np.random.default_rng(seed)
    seen: list = []

    def sender(k: int):
        for j in range(12):
            yield sim.timeout(float(rng.choice([0.0, 1e-6, 3.3e-5])))
            s, d = nodes[int(rng.integers(len(nodes)))], nodes[int(rng.integers(len(nodes)))]
            nbytes = float(rng.choice([0.0, 1e3, 3.7e6, 2e8]))
            track = "custom" if j % 5 == 0 else None
            if j % 7 == 3:  # a call of several flows in between (the general path either way)
                flows = [(s, d, nbytes), (d, s, nbytes / 3), (nodes[0], nodes[-1], 1e6)]
                event = net.transfer_many(flows, name=f"multi{k}")
            elif j % 4 == 1:
                event = net.transfer(s, d, nbytes, name=f"one{k}", track=track)
            else:
                event = net.transfer_many([(s, d, nbytes)], name=f"one{k}", track=track)
            value = yield event
            seen.append((k, j, sim.now, sim.cause, None if value is None else str(value)))
            sim.span(f"proc{k}", "work", f"after {j}", sim.now, sim.now + 1e-6)

    for k in range(4):
        sim.process(sender(k))
    sim.env.run()
    assert any(used) == fast  # the fast path ran (or was switched off)
    rec = sim.recorder
    key, start, end = activity.intervals()
    return {
        "seen": seen,
        "now": sim.now,
        "events": sim.env.events_processed,
        "link_bytes": net.link_bytes.tolist(),
        "link_busy_s": net.link_busy_s.tolist(),
        "counters": (net.flows_started, net.bytes_sent, net.bytes_delivered),
        "rows": list(rec.rows),
        "ids": (rec.next_id, rec.dropped),
        "skeleton": rec.skeleton.frame(),
        "interned": rec.skeleton.interned,  # the skeletons' codes for component, track and category
        "activity": (
            activity.keys,
            activity.spans,
            key.tolist(),
            start.tolist(),
            end.tolist(),
            activity.unit_s.tolist(),
        ),
        "calls": calls.calls,
        "last ends": last_ends.calls,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("limit", [None, 25])
def test_one_flow_fast_path_equals_the_general_path(seed, limit, monkeypatch):
    fast = _run(True, seed, limit, monkeypatch)
    with monkeypatch.context() as m:
        general = _run(False, seed, limit, m)
    skeleton_fast, skeleton_general = fast.pop("skeleton"), general.pop("skeleton")
    for name in fast:
        assert fast[name] == general[name], name
    assert skeleton_fast.equals(skeleton_general)
    assert sum(fast["link_bytes"]) > 0 and fast["calls"]
    if limit is not None:
        assert len(skeleton_fast) > 0 and len(fast["rows"]) == limit


def test_observe_one_equals_observe_many_of_one_span():
    """`SpanActivity.observe_one` keeps the same data as `observe_many` with one span, in the same
    order relative to other chunks (merge points and unit sums included)."""
    rng = np.random.default_rng(3)
    a, b = SpanActivity(batch=5), SpanActivity(batch=5)
    for i in range(200):
        c, t = f"n{int(rng.integers(4))}", ("nic", "cpu")[int(rng.integers(2))]
        s = float(rng.random())
        e = s + float(rng.choice([0.0, rng.random() / 3]))
        kind = i % 3
        if kind == 0:
            a.observe_one(c, t, "comm", s, e)
            b.observe_many([c], [t], "comm", np.array([s]), np.array([e]))
        elif kind == 1:
            for x in (a, b):
                x.add_many(np.array([x.key_id((c, t, "x"))]), s, e)
        else:
            for x in (a, b):
                x(c, t, "compute", s, e, 3.0)
    for x, y in zip(a.intervals(), b.intervals()):
        assert x.tolist() == y.tolist()
    assert a.unit_s.tolist() == b.unit_s.tolist() and a.spans == b.spans and a.keys == b.keys
