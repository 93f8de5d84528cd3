"""The flow network: max-min fair rates, latency, per-link accounting, ECMP, contention.

Every assertion is a closed form: a single flow runs at its bottleneck's rate, N flows on one link
get 1/N each, the textbook two-bottleneck example gives the textbook rates, bytes are conserved.
"""

import numpy as np
import pandas as pd
import pytest

from sim.network.max_min import max_min_rates
from tests.conftest import make_cluster


def run_flows(cluster, flows):
    """Start all flows at t=0, run to completion, return each flow's finish time."""
    sim, net = cluster.sim, cluster.network
    finish = {}

    def one(i, s, d, b):
        yield net.transfer(s, d, b)
        finish[i] = sim.now

    procs = [sim.process(one(i, *f)) for i, f in enumerate(flows)]
    sim.env.run(until=sim.all_of(procs))
    return [finish[i] for i in range(len(flows))]


def path_latency(cluster, src, dst):
    topo = cluster.topology
    return topo.path_latency_s(topo.routes(src, dst)[0])


def test_single_flow_runs_at_bottleneck_rate_plus_latency():
    c = make_cluster(nodes=2)
    src, dst = c.devices[0].node, c.devices[1].node
    nbytes = 1e9
    (t,) = run_flows(c, [(src, dst, nbytes)])
    nic_rate = c.hardware.nic.achieved_bytes_per_s
    assert t == pytest.approx(path_latency(c, src, dst) + nbytes / nic_rate, rel=1e-9)


def test_n_flows_on_one_link_get_one_nth_each():
    c = make_cluster(nodes=5)
    dst = c.devices[0].node
    n, nbytes = 4, 1e9
    times = run_flows(c, [(c.devices[i].node, dst, nbytes) for i in range(1, n + 1)])
    rate = c.hardware.nic.achieved_bytes_per_s
    expected = path_latency(c, c.devices[1].node, dst) + n * nbytes / rate  # each at rate/n
    assert times == pytest.approx([expected] * n, rel=1e-9)


def test_textbook_max_min_with_two_bottlenecks():
    # links: A cap 10 (flows 0,1,2), B cap 4 (flows 2,3). B's fair share 2 freezes flows 2,3;
    # A's remaining 8 goes to flows 0 and 1: rates 4, 4, 2, 2.
    capacity = np.array([10.0, 4.0])
    paths = [np.array([0]), np.array([0]), np.array([0, 1]), np.array([1])]
    assert max_min_rates(paths, capacity) == pytest.approx([4, 4, 2, 2])
    # chain: flow 0 crosses links 0,1,2 (cap 1 each), flows 1,2,3 one link each -> all 0.5
    paths = [np.array([0, 1, 2]), np.array([0]), np.array([1]), np.array([2])]
    assert max_min_rates(paths, np.ones(3)) == pytest.approx([0.5] * 4)
    # unequal: link0 cap 1 (f0, f1), link1 cap 2 (f0, f2) -> f0=f1=0.5, f2=1.5
    paths = [np.array([0, 1]), np.array([0]), np.array([1])]
    assert max_min_rates(paths, np.array([1.0, 2.0])) == pytest.approx([0.5, 0.5, 1.5])


def test_rates_never_exceed_capacity_and_every_flow_has_a_saturated_bottleneck():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n_links, n_flows = rng.integers(2, 12), rng.integers(1, 30)
        capacity = rng.uniform(1, 10, n_links)
        paths = [rng.choice(n_links, size=rng.integers(1, n_links + 1), replace=False) for _ in range(n_flows)]
        rates = max_min_rates(paths, capacity)
        load = np.zeros(n_links)
        for p, r in zip(paths, rates):
            load[p] += r
        assert (load <= capacity * (1 + 1e-9)).all()
        for p, r in zip(paths, rates):  # max-min: some link of the flow is full and r is its max rate
            full = [l for l in p if load[l] >= capacity[l] * (1 - 1e-9)]
            assert any(r >= max(rates[i] for i, q in enumerate(paths) if l in q) * (1 - 1e-9) for l in full)


def test_bytes_delivered_equal_bytes_sent_per_link_and_in_total():
    c = make_cluster(nodes=4, gpus_per_node=2)
    flows = [(c.devices[i].node, c.devices[j].node, 1e8 * (1 + i + j)) for i in range(8) for j in range(8) if i != j]
    run_flows(c, flows)
    net, topo = c.network, c.topology
    assert net.bytes_delivered == pytest.approx(net.bytes_sent)
    expected = np.zeros(topo.num_links)
    for s, d, b in flows:
        paths = topo.routes(s, d)
        for p in paths:
            expected[list(p)] += b / len(paths)
    assert net.link_bytes == pytest.approx(expected, rel=1e-6)
    # utilisation never above 1: bytes <= capacity x busy time
    assert (net.link_bytes <= topo.capacity * net.link_busy_s * (1 + 1e-9) + 1).all()


def test_flows_starting_later_share_fairly_from_then_on():
    c = make_cluster(nodes=3)
    net, sim = c.network, c.sim
    a, b, dst = c.devices[0].node, c.devices[1].node, c.devices[2].node
    rate = c.hardware.nic.achieved_bytes_per_s
    lat = path_latency(c, a, dst)
    done = {}

    def first():
        yield net.transfer(a, dst, 2e9)
        done["a"] = sim.now

    def second():
        yield sim.timeout(0.01)
        yield net.transfer(b, dst, 1e9)
        done["b"] = sim.now

    sim.env.run(until=sim.all_of([sim.process(first()), sim.process(second())]))
    t_join = 0.01 + lat  # b starts sending here; a has sent rate*(t_join - lat)
    a_left = 2e9 - rate * (t_join - lat)
    # both at rate/2 until b's 1e9 is done, then a alone
    t_b = t_join + 1e9 / (rate / 2)
    assert done["b"] == pytest.approx(t_b, rel=1e-9)
    assert done["a"] == pytest.approx(t_b + (a_left - 1e9) / rate, rel=1e-9)


def test_ecmp_even_split_uses_all_spines_and_hash_uses_one():
    even = make_cluster(
        nodes=4, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 4, "aggregate_spines": False}
    )
    src, dst = even.devices[0].node, even.devices[3].node
    run_flows(even, [(src, dst, 4e9)])
    topo = even.topology
    up = [topo.link_id("leaf0", f"spine{s}") for s in range(4)]
    assert even.network.link_bytes[up] == pytest.approx([1e9] * 4)
    hashed = make_cluster(nodes=4, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 4, "ecmp": "hash"})
    run_flows(hashed, [(src, dst, 4e9)])
    used = hashed.network.link_bytes[up]
    assert sorted(used) == pytest.approx([0, 0, 0, 4e9])


@pytest.mark.parametrize("kind", ["fat-tree", "rail-optimized"])
def test_aggregated_spines_give_identical_results_to_explicit_spines(kind):
    flows_spec = [(i, j, 1e7 * (1 + (5 * i + j) % 7)) for i in range(16) for j in range(16) if i != j]

    def finish_times(aggregate):
        topo = {"kind": kind, "spines": 4, "oversubscription": 2, "aggregate_spines": aggregate}
        if kind == "fat-tree":
            topo["hosts_per_leaf"] = 2
        c = make_cluster(nodes=8, gpus_per_node=2, topology=topo)
        return run_flows(c, [(c.devices[i].node, c.devices[j].node, b) for i, j, b in flows_spec])

    assert finish_times(True) == pytest.approx(finish_times(False), rel=1e-9)


def test_batch_routing_equals_per_pair_routing():
    c = make_cluster(nodes=8, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 3})
    topo = c.topology
    nodes = c.nodes(range(c.num_gpus))
    srcs = [a for a in nodes for b in nodes]
    dsts = [b for a in nodes for b in nodes]
    batch = topo.route_batch(srcs, dsts)
    starts = np.concatenate([[0], np.cumsum(batch.lengths)])
    got = {}
    for k, owner in enumerate(batch.owner):
        got.setdefault(owner, []).append(tuple(batch.flat[starts[k] : starts[k + 1]]))
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        expected = topo.routes(s, d)
        assert sorted(got[i]) == sorted(expected)
        k = np.flatnonzero(batch.owner == i)
        assert batch.share[k] == pytest.approx([1 / len(expected)] * len(expected))
        assert batch.latency[k] == pytest.approx([topo.path_latency_s(p) for p in got[i]])


def test_batch_routing_grows_its_path_table_as_a_whole_rebuild_would():
    """The router keeps every switch path it has met in one padded table, extended as new switch
    pairs are routed (and padded anew when a longer path widens it): routing pairs a few at a time,
    shortest paths first, gives the table and routes of routing them all at once."""
    from hardware_models.routing import BatchRouter

    c = make_cluster(nodes=8, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 3})
    topo = c.topology
    nodes = c.nodes(range(c.num_gpus))
    pairs = [(a, b) for a in nodes for b in nodes]
    pairs.sort(key=lambda p: len(topo.routes(*p)[0]))  # same host, same leaf, then across the spines
    grown, whole = BatchRouter(topo), BatchRouter(topo)
    for k in range(0, len(pairs), 37):
        chunk = pairs[k : k + 37]
        grown.route([a for a, _ in chunk], [b for _, b in chunk])
    widths = {len(p) for p in grown._paths}
    assert len(widths) > 1  # the table was widened on the way
    srcs, dsts = [a for a, _ in pairs], [b for _, b in pairs]
    once, again = whole.route(srcs, dsts), grown.route(srcs, dsts)
    width = max(widths)  # the whole table built at once, as before it grew in place
    padded = np.array([[*p, *[-1] * (width - len(p))] for p in grown._paths], dtype=np.int64)
    latency = np.where(padded >= 0, topo.latency[np.maximum(padded, 0)], 0.0).sum(axis=1)
    table = grown._path_table()
    assert np.array_equal(table[0], padded) and np.array_equal(table[1], latency)
    for field in ("flat", "lengths", "owner", "share", "latency"):
        assert np.array_equal(getattr(once, field), getattr(again, field)), field


def test_bulk_and_single_transfers_give_identical_times_and_link_bytes():
    flows_spec = [(i, j, 1e7 * (1 + (3 * i + j) % 5)) for i in range(8) for j in range(8) if i != j]

    def run(bulk):
        c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2, "spines": 2})
        flows = [(c.devices[i].node, c.devices[j].node, b) for i, j, b in flows_spec]
        if bulk:
            c.sim.env.run(until=c.network.transfer_many(flows))
        else:
            run_flows(c, flows)
        return c.sim.now, c.network.link_bytes.copy()

    (t_bulk, bytes_bulk), (t_single, bytes_single) = run(True), run(False)
    assert t_bulk == pytest.approx(t_single, rel=1e-12)
    assert bytes_bulk == pytest.approx(bytes_single, rel=1e-9)


def _ring_with_background(replay, background_at=None, nodes=6):
    from sim.network.collectives import collective

    c = make_cluster(nodes=nodes, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2})
    c.network.replay = replay
    sim, net = c.sim, c.network
    done = {}

    def background():
        yield sim.timeout(background_at)
        yield net.transfer(c.devices[0].node, c.devices[5].node, 3e8)
        done["background"] = sim.now

    if background_at is not None:
        sim.process(background())
    group = c.nodes(range(c.num_gpus))  # the lock-step ring (protocol=None): its steps are replayed
    proc, _ = collective(net, "all_reduce", group, 256 * 2**20, "ring", protocol=None)
    sim.env.run(until=proc)
    done["ring"] = sim.now
    sim.env.run()
    return done, net.link_bytes.copy(), net.link_busy_s.copy(), net


@pytest.mark.parametrize("background_at", [None, 0.0, 1.234e-3, 5e-3])
def test_replayed_ring_steps_equal_the_plain_simulation(background_at):
    plain = _ring_with_background(False, background_at)
    fast = _ring_with_background(True, background_at)
    assert fast[0] == pytest.approx(plain[0], rel=1e-9)
    assert fast[1] == pytest.approx(plain[1], rel=1e-7, abs=1e-3)
    assert fast[2] == pytest.approx(plain[2], rel=1e-7, abs=1e-12)
    if background_at is None:
        assert fast[3].replayed_steps == 2 * (12 - 1) - 1  # every step after the first is replayed


def _two_rings(replay, background_at=None):
    """Two ring all-reduces at once on disjoint hosts (each within its own leaf), and optionally a
    transfer into the first ring's hosts: returns (finish times, link bytes, busy, network)."""
    from sim.network.collectives import collective

    c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2})
    c.network.replay = replay
    sim, net = c.sim, c.network
    done = {}

    def background():
        yield sim.timeout(background_at)
        yield net.transfer(c.devices[6].node, c.devices[2].node, 2e8)  # into a NIC ring a receives on
        done["background"] = sim.now

    if background_at is not None:
        sim.process(background())
    rings = {
        name: collective(net, "all_reduce", c.nodes(gpus), 64 * 2**20, "ring", protocol=None)[0]
        for name, gpus in (("a", range(0, 4)), ("b", range(4, 8)))
    }
    for name, proc in rings.items():
        proc.callbacks.append(lambda _e, name=name: done.__setitem__(name, sim.now))
    sim.env.run()
    return done, net.link_bytes.copy(), net.link_busy_s.copy(), net


@pytest.mark.parametrize("background_at", [None, 1.0e-4, 7.7e-4])
def test_steps_that_have_their_links_to_themselves_are_replayed_side_by_side(background_at):
    """Max-min rates are fair per connected set of flows and links: a ring whose links no other flow
    uses runs as on an idle network, so its repeated steps are replayed while another ring runs
    elsewhere; a transfer joining its links puts its step back (materialised), results unchanged."""
    plain = _two_rings(False, background_at)
    fast = _two_rings(True, background_at)
    assert fast[0] == pytest.approx(plain[0], rel=1e-9)
    assert fast[1] == pytest.approx(plain[1], rel=1e-7, abs=1e-3)
    assert fast[2] == pytest.approx(plain[2], rel=1e-7, abs=1e-12)
    assert plain[3].replayed_steps == 0
    if background_at is None:
        assert fast[3].replayed_steps == 2 * (2 * (4 - 1) - 1)  # both rings: every step after the first
    else:
        assert fast[3].replayed_steps > 0


def _repeated_ring(
    replay: str,
    background_at: list[float],
    span_limit: int | None = None,
    runs: int = 4,
    keep: bool = True,
    observer: object | None = None,
    distinct: bool = False,
):
    """The same ring all-gather schedule run 4 times back to back on 4 hosts of a fat-tree, with
    transfers into one of its NICs at `background_at`: returns (each run's end, link bytes, busy,
    network). `replay`: "off", "steps" (each step replayed) or "schedules" (a recorded schedule
    replayed as one). `span_limit`: the spans the recorder keeps (past it, skeletons); `runs`: how
    many times it runs; `keep`: whether a replayed schedule's plan keeps its steps' runs; `observer`:
    a traffic observer to add; `distinct`: each step its own (k-th: 1 + k/8 times the bytes) rather
    than one step repeated."""
    from sim.network.collectives import Step, run_schedule, schedule

    c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2})
    c.sim.recorder.limit = span_limit
    c.network.replay = replay != "off"
    c.network.schedule_replay = replay == "schedules"
    c.network.keep_schedule_runs = keep
    if observer is not None:
        c.network.traffic_observers.append(observer)
    sim, net = c.sim, c.network
    ring = c.nodes([0, 2, 4, 6])  # one GPU per host: every step crosses the fabric
    steps = schedule("all_gather", "ring", ring, 64 * 2**20, net.topology.host_of)
    if distinct:
        steps = [Step((src, dst, b * (1 + k / 8)) for src, dst, b in step) for k, step in enumerate(steps)]
    ends = []
    count = runs

    def runs():
        for _ in range(count):
            yield run_schedule(net, steps)
            ends.append(sim.now)

    def background(at):
        yield sim.timeout(at)
        yield net.transfer(c.devices[7].node, c.devices[2].node, 5e7)  # into the ring's second NIC

    for at in background_at:
        sim.process(background(at))
    sim.process(runs())
    sim.env.run()
    return ends, net.link_bytes.copy(), net.link_busy_s.copy(), net


@pytest.mark.parametrize("background_at", [[], [0.0021], [0.0005, 0.0033, 0.0047], [0.00337]])
def test_a_recorded_schedule_replayed_as_one_equals_replaying_each_step(background_at):
    """A collective whose steps were all recorded is replayed as one operation while its links are
    its own; a transfer that joins them finishes the steps done by then, puts the current one back
    and the rest run step by step. Ends and link totals equal step-by-step replay and the plain run."""
    plain = _repeated_ring("off", background_at)
    steps = _repeated_ring("steps", background_at)
    whole = _repeated_ring("schedules", background_at)
    assert whole[0] == steps[0]  # the same instants, to the bit
    assert whole[0] == pytest.approx(plain[0], rel=1e-9)
    for k in (1, 2):
        assert whole[k] == pytest.approx(steps[k], rel=1e-12, abs=1e-9)
        assert whole[k] == pytest.approx(plain[k], rel=1e-7, abs=1e-3)
    assert whole[3].replayed_steps == steps[3].replayed_steps  # the same steps, replayed as schedules
    assert steps[3].replayed_schedules == 0 and whole[3].replayed_schedules >= 1
    if not background_at:
        assert whole[3].replayed_steps == 4 * 3 - 1  # all but the first run's first step
        assert whole[3].replayed_schedules == 3  # the runs after the first, each as one


@pytest.mark.parametrize("background_at", [[], [0.0021], [0.0005, 0.0033, 0.0047]])
def test_a_schedule_replayed_as_one_past_the_trace_limit_leaves_the_skeletons_of_its_steps(background_at):
    """Past the recorder's limit a flow leaves a skeleton (where, when, causes). A schedule replayed
    as one adds its steps' skeletons together: the same rows, ids and causes as replaying each step."""
    steps = _repeated_ring("steps", background_at, span_limit=0)
    whole = _repeated_ring("schedules", background_at, span_limit=0)
    assert whole[3].replayed_schedules >= 1
    rows_steps, rows_whole = (net.sim.recorder.skeleton.frame() for net in (steps[3], whole[3]))
    assert len(rows_whole) == len(rows_steps) > 0
    pd.testing.assert_frame_equal(rows_whole, rows_steps)
    assert whole[3].sim.recorder.next_id == steps[3].sim.recorder.next_id


class _TrafficLog:
    """A traffic observer that logs every call the network makes to it, with its arguments as lists."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def _log(self, name: str, *args) -> None:
        self.calls.append((name, *(np.asarray(a).tolist() if isinstance(a, np.ndarray) else a for a in args)))

    def on_links(self, t0, t1, links, link_bytes) -> None:
        self._log("links", t0, t1, links, link_bytes)

    def on_subflows(self, t0, t1, flat, lengths, nbytes) -> None:
        self._log("subflows", t0, t1, flat, lengths, nbytes)

    def on_step(self, t0, t1, step, times, links, link_bytes) -> None:
        self._log("step", t0, t1, times, links, link_bytes)

    def on_steps_until(self, steps) -> None:
        self._log("steps", [(start, end) for _, _, start, end, _ in steps])


@pytest.mark.parametrize("background_at", [[], [0.0021], [0.0005, 0.0033, 0.0047, 0.0301]])
def test_a_plan_that_keeps_its_steps_runs_accounts_them_as_deferring_each_step(background_at, monkeypatch):
    """Past the trace limit a schedule replayed as one defers its steps' replays; once every step's key
    is deferred, its plan keeps each completion's runs as one entry instead of a run per key, and a
    settle, a transfer on its links or the end of the run hands them back in order. Link totals, every
    traffic observer call and the skeletons equal those of deferring each step's run (to the bit), and
    runs past `_DEFERRED_RUNS_MAX` settle as they would have."""
    import sim.network.flow as flow

    monkeypatch.setattr(flow, "_DEFERRED_RUNS_MAX", 5)  # settles at 5 runs, within the 24 runs
    keepings = []

    class Keeping(flow._KeptRuns):
        __slots__ = ()

        def __init__(self, plan) -> None:
            super().__init__(plan)
            keepings.append(self)

    monkeypatch.setattr(flow, "_KeptRuns", Keeping)
    logs = []
    for keep in (True, False):
        log = _TrafficLog()
        ends, link_bytes, busy, net = _repeated_ring(
            "schedules", background_at, span_limit=0, runs=24, keep=keep, observer=log, distinct=True
        )
        net.flush()
        logs.append((ends, link_bytes.tolist(), busy.tolist(), log.calls, net.sim.recorder.skeleton.frame()))
    kept, each = logs
    assert sum(len(keeping.calls) for keeping in keepings) >= 6  # completions kept as one entry
    assert kept[:4] == each[:4]
    pd.testing.assert_frame_equal(kept[4], each[4])
    assert any(call[0] == "step" for call in each[3])


def test_a_recording_settles_only_the_deferred_replays_on_its_links():
    """Replays are accounted later, in bulk; a step that starts recording on links where deferred
    replays ran settles those (its base totals include them), and the others keep gathering runs.
    The totals equal the plain run's."""
    from sim.network.collectives import run_schedule, schedule

    def run(replay: bool):
        c = make_cluster(nodes=4, gpus_per_node=2, topology={"kind": "fat-tree", "hosts_per_leaf": 2})
        c.network.replay = replay
        sim, net = c.sim, c.network
        host_of = net.topology.host_of
        rings = [schedule("all_gather", "ring", c.nodes(gpus), 2**24, host_of) for gpus in ([0, 2], [1, 3])]
        across = schedule("all_gather", "ring", c.nodes([0, 4]), 2**24, host_of)  # the first ring's GPU 0
        deferred = []

        def body():
            for ring in rings:  # GPU 0, then GPU 1 of hosts 0 and 1: their own NICs
                for _ in range(3):
                    yield run_schedule(net, ring)  # recorded, then replayed: deferred
            deferred.append(set(net._deferred))
            yield run_schedule(net, across)  # records on a NIC of the first ring
            deferred.append(set(net._deferred))
            yield run_schedule(net, rings[0])

        sim.process(body())
        sim.env.run()
        return deferred, net.link_bytes.copy(), net.link_busy_s.copy(), rings

    deferred, link_bytes, busy, rings = run(replay=True)
    _, plain_bytes, plain_busy, _ = run(replay=False)
    first, second = ({step.key for step in ring if step} for ring in rings)
    assert deferred[0] >= first | second - {None}  # both rings' replays wait to be accounted
    assert not deferred[1] & first and deferred[1] == deferred[0] - first  # settled: the first ring's only
    assert link_bytes == pytest.approx(plain_bytes, rel=1e-12)
    assert busy == pytest.approx(plain_busy, rel=1e-12, abs=1e-15)


def test_the_deferral_index_finds_the_deferred_steps_on_links_in_deferral_order():
    """The index behind a recording's settle: the live deferrals whose links meet the given ones,
    oldest first; settled ones leave it."""
    from sim.engine.replay import StepKey
    from sim.network.flow import _DeferralIndex

    index, keys = _DeferralIndex(32), [StepKey(f"k{i}") for i in range(6)]
    numbers = [index.add(key, np.array([i, 10 + i, 20 + i % 2])) for i, key in enumerate(keys)]
    assert index.on(np.array([21])) == [keys[1], keys[3], keys[5]]  # link 21: the odd ones
    index.remove(numbers[3])
    assert index.on(np.array([21, 12])) == [keys[1], keys[2], keys[5]]
    for number in numbers[:3] + numbers[4:5]:
        index.remove(number)
    assert index.on(np.array([20, 21])) == [keys[5]]
    again = index.add(keys[0], np.array([21, 5]))  # a key deferred again: a new, later deferral
    assert again > numbers[-1] and index.on(np.array([21])) == [keys[5], keys[0]]
    assert index.on(np.array([3])) == []


def test_the_deferral_index_answers_as_a_scan_of_every_live_deferrals_links():
    """Deferrals on the same links are grouped (a ring's steps): whatever the order of adds and
    removes, `on` gives the live deferrals meeting the links, oldest first, as a scan would."""
    from sim.engine.replay import StepKey
    from sim.network.flow import _DeferralIndex

    rng = np.random.default_rng(4)
    link_sets = [np.unique(rng.integers(0, 40, int(rng.integers(1, 8)))) for _ in range(12)]
    index, live = _DeferralIndex(40), {}  # number -> (key, links)
    for step in range(3000):
        if live and rng.random() < 0.45:
            number = list(live)[int(rng.integers(len(live)))]
            index.remove(number)
            del live[number]
        else:
            key, links = StepKey(f"k{step}"), link_sets[int(rng.integers(len(link_sets)))]
            live[index.add(key, links.copy() if rng.random() < 0.5 else links)] = (key, links)
        asked = np.unique(rng.integers(0, 40, int(rng.integers(1, 6))))
        expected = [key for number, (key, links) in sorted(live.items()) if np.intersect1d(links, asked).size]
        assert index.on(asked) == expected


def test_deferrals_again_on_one_links_array_are_found_while_live_however_many_arrays_were_seen(monkeypatch):
    """A step deferred again and again (its trajectory's links array each time) is found by any of
    its links while live and not after; past `SETS_KEPT` arrays, the looked-up sets are forgotten
    and the index still answers as before."""
    from sim.engine.replay import StepKey
    from sim.network.flow import _DeferralIndex

    monkeypatch.setattr(_DeferralIndex, "SETS_KEPT", 2)
    index, shared = _DeferralIndex(16), np.array([1, 2, 3])
    a, b = StepKey("a"), StepKey("b")
    first = index.add(a, shared)
    index.remove(first)
    assert index.on(shared) == []
    second, third = index.add(a, shared), index.add(b, shared)
    assert index.on(np.array([2])) == [a, b]
    index.remove(second)
    assert index.on(np.array([3])) == [b]
    others = [np.array([4 + i, 9]) for i in range(3)]  # more arrays than are kept
    keys = [StepKey(f"o{i}") for i in range(3)]
    numbers = [index.add(key, links) for key, links in zip(keys, others)]
    assert len(index._content_of) <= 2
    assert index.on(np.array([9])) == keys
    index.remove(third)
    assert index.on(shared) == []
    index.remove(numbers[1])
    assert index.on(np.array([5, 9])) == [keys[0], keys[2]]
    assert index._using.tolist() == [0] * 4 + [1, 0, 1] + [0, 0, 2] + [0] * 6
