"""`LeanContainer` (sim/workloads/ingestion/levels.py) behaves as simpy.Container step by step: the
same requests succeed at the same instants, in the same order, with the same levels."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from sim.engine.simulation import CountingEnvironment
from sim.workloads.ingestion.levels import LeanContainer, LeanStore


def _plans(seed: int) -> list[list[tuple[str, int, float]]]:
    """Per process: (op, amount, delay before it); gets and puts of the same amounts, as users of cores."""
    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(6):
        plan = []
        for _ in range(20):
            amount = int(rng.integers(1, 5))
            plan += [
                ("get", amount, float(rng.choice([0.0, 0.5, 1.0]))),
                ("put", amount, float(rng.choice([0.0, 0.5]))),
            ]
        plans.append(plan)
    return plans


def _trace(make, seed: int, take_now: bool = False) -> list:
    """`take_now`: the waited-for gets first try `take_now` (the pipeline's way)."""
    env = CountingEnvironment()
    box = make(env)
    log: list = []
    plans = _plans(seed)

    def proc(k: int, plan):
        for j, (op, amount, delay) in enumerate(plan):
            if delay:
                yield env.timeout(delay)
            if j % 3 == 0:  # not waited for: several requests of one process in flight
                event = getattr(box, op)(amount)
                event.callbacks.append(lambda e, k=k, j=j, op=op: log.append((env.now, k, j, op, "late", box.level)))
            elif not (take_now and op == "get" and box.take_now(amount)):
                yield getattr(box, op)(amount)
            log.append((env.now, k, j, op, box.level))

    for k, plan in enumerate(plans):
        env.process(proc(k, plan))
    env.run(until=200)
    log.append(("end", env.now, env.events_processed, box.level, len(box.get_queue), len(box.put_queue)))
    return log


@pytest.mark.parametrize("seed", range(6))
def test_lean_container_equals_simpy_container(seed):
    lean = _trace(lambda env: LeanContainer(env, capacity=10, init=5), seed)
    reference = _trace(lambda env: simpy.Container(env, capacity=10, init=5), seed)
    assert lean == reference
    assert len(lean) > 200


@pytest.mark.parametrize("seed", range(6))
def test_a_get_taken_at_once_without_its_event_changes_nothing_but_the_event_count(seed):
    """`take_now` succeeds only where the get's event would resume the process next anyway: the
    same requests succeed at the same instants in the same order as with simpy.Container."""
    lean = _trace(lambda env: LeanContainer(env, capacity=10, init=5), seed, take_now=True)
    reference = _trace(lambda env: simpy.Container(env, capacity=10, init=5), seed)
    assert lean[:-1] == reference[:-1]
    (_, now, events, *rest), (_, ref_now, ref_events, *ref_rest) = lean[-1], reference[-1]
    assert (now, rest) == (ref_now, ref_rest)
    assert events < ref_events  # some gets went on at once


class _Machine:
    """`_trace`'s process as a state machine (the way sim/workloads/ingestion/lane.py's lanes run): each
    step appends the next to the event it waits for, where the process would yield it."""

    def __init__(self, env, box, log, k: int, plan) -> None:
        self.env, self.box, self.log, self.k, self.plan, self.j = env, box, log, k, plan, 0

    def start(self) -> None:
        from simpy.core import URGENT

        event = self.env.event()
        event._ok, event._value = True, None
        event.callbacks.append(self._step)
        self.env.schedule(event, URGENT)  # as a process's start

    def _step(self, _event=None) -> None:
        if self.j == len(self.plan):
            return
        op, amount, delay = self.plan[self.j]
        if delay:
            self.env.timeout(delay).callbacks.append(self._request)
            return
        self._request()

    def _request(self, _event=None) -> None:
        env, box, k, j = self.env, self.box, self.k, self.j
        op, amount, _ = self.plan[j]
        if j % 3 == 0:
            event = getattr(box, op)(amount)
            event.callbacks.append(lambda e, op=op: self.log.append((env.now, k, j, op, "late", box.level)))
        elif not (op == "get" and box.take_now(amount, self)):
            getattr(box, op)(amount).callbacks.append(self._done)
            return
        self._done()

    def _done(self, _event=None) -> None:
        op = self.plan[self.j][0]
        self.log.append((self.env.now, self.k, self.j, op, self.box.level))
        self.j += 1
        self._step()


@pytest.mark.parametrize("seed", range(6))
def test_a_state_machine_taking_at_once_runs_as_the_process_would(seed):
    """A state machine that owns its requests (`take_now(amount, owner)`) goes on at once exactly
    where the process would: the same trace, event count included."""
    process = _trace(lambda env: LeanContainer(env, capacity=10, init=5), seed, take_now=True)
    env = CountingEnvironment()
    box = LeanContainer(env, capacity=10, init=5)
    log: list = []
    reference_plans = _plans(seed)
    for k, plan in enumerate(reference_plans):
        _Machine(env, box, log, k, plan).start()
    env.run(until=200)
    log.append(("end", env.now, env.events_processed, box.level, len(box.get_queue), len(box.put_queue)))
    assert log[:-1] == process[:-1]
    (_, now, events, *rest), (_, ref_now, ref_events, *ref_rest) = log[-1], process[-1]
    assert (now, rest) == (ref_now, ref_rest)
    assert events <= ref_events  # no process ends to process


def test_lean_container_rejects_what_simpy_rejects():
    env = CountingEnvironment()
    box = LeanContainer(env, capacity=4, init=4)
    with pytest.raises(ValueError):
        box.get(0)
    with pytest.raises(ValueError):
        box.put(-1)
    with pytest.raises(ValueError):
        LeanContainer(env, capacity=4, init=5)


def _store_trace(make, seed: int, take_now: bool = False) -> list:
    env = CountingEnvironment()
    store = make(env)
    rng = np.random.default_rng(seed)
    log: list = []

    def producer(k: int):
        for j in range(30):
            delay = float(rng.choice([0.0, 0.3, 1.0]))
            if delay:
                yield env.timeout(delay)
            event = store.put((k, j))
            if j % 2:
                yield event
            log.append((env.now, "put", k, j, len(store.items)))

    def consumer(k: int):
        for j in range(40):
            item = store.take_now() if take_now else None
            if item is None:
                item = yield store.get()
            log.append((env.now, "got", k, j, item, len(store.items)))
            delay = float(rng.choice([0.0, 0.5]))
            if delay:
                yield env.timeout(delay)

    for k in range(3):
        env.process(producer(k))
        env.process(consumer(k))
    env.run(until=100)
    log.append(("end", env.now, env.events_processed, list(store.items), len(store.get_queue), len(store.put_queue)))
    return log


@pytest.mark.parametrize("capacity", [float("inf"), 2])
@pytest.mark.parametrize("seed", range(3))
def test_lean_store_equals_simpy_store(seed, capacity):
    lean = _store_trace(lambda env: LeanStore(env, capacity), seed)
    assert lean == _store_trace(lambda env: simpy.Store(env, capacity), seed)
    assert len(lean) > 100


@pytest.mark.parametrize("capacity", [float("inf"), 2])
@pytest.mark.parametrize("seed", range(3))
def test_an_item_taken_at_once_without_its_event_changes_nothing_but_the_event_count(seed, capacity):
    lean = _store_trace(lambda env: LeanStore(env, capacity), seed, take_now=True)
    reference = _store_trace(lambda env: simpy.Store(env, capacity), seed)
    assert lean[:-1] == reference[:-1]
    assert lean[-1][:2] + lean[-1][3:] == reference[-1][:2] + reference[-1][3:]
    assert lean[-1][2] < reference[-1][2]  # some items were taken at once


def test_take_now_takes_nothing_where_a_request_waits_or_another_event_is_due():
    env = CountingEnvironment()
    box, store = LeanContainer(env, capacity=4, init=2), LeanStore(env)
    seen = []

    def proc():
        seen.append(box.take_now(1))  # alone at its instant: taken
        env.timeout(0.0)  # now another event is due at this instant
        seen.append(box.take_now(1))
        yield env.timeout(1.0)
        waiting = box.get(3)  # more than is there: queued
        seen.append(box.take_now(1))  # no overtaking of a waiting request
        store.add("item")
        seen.append(store.take_now())
        yield waiting

    env.process(proc())
    env.run(until=5)
    assert seen == [True, False, False, "item"]
    assert box.level == 1  # one taken at once; the queued get still waits


def test_give_back_serves_waiting_gets_at_once_in_fifo_order_without_an_event():
    """`give_back` is `put` for what was taken (it cannot wait): the waiting gets it satisfies
    succeed during the call, head first, and no event of its own is scheduled."""
    env = CountingEnvironment()
    box = LeanContainer(env, capacity=4, init=0)
    first, second, third = box.get(3), box.get(1), box.get(2)
    queued = len(env._queue)
    box.give_back(3)
    assert first.triggered and not second.triggered  # FIFO: no overtaking of the head
    assert box.level == 0 and len(env._queue) == queued + 1  # only the get's own event
    box.give_back(1)
    assert second.triggered and not third.triggered and box.level == 0
    with pytest.raises(ValueError):
        box.give_back(5)  # more than the capacity: never taken


def test_store_add_serves_the_waiting_get_at_once():
    env = CountingEnvironment()
    store = LeanStore(env)
    waiting = store.get()
    store.add("batch")
    assert waiting.triggered and waiting.value == "batch" and not store.items
    store.add("next")
    assert store.items == ["next"]
    with pytest.raises(ValueError):
        LeanStore(env, capacity=2).add("x")  # a bounded store's put may wait: use put()
