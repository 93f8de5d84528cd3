"""Saving an event's trip through the queue where that changes nothing
(sim/engine/simulation.py `CountingEnvironment.may_continue` and `succeed_last`): a process may go
on past a request granted now, and an event triggered as the last thing a callback does may be
processed in place, only when that event would be the next one processed and would run the same
callbacks first. These tests pin when each holds, and that a run keeps the same order either way."""

from __future__ import annotations

import numpy as np

from sim.engine.simulation import CountingEnvironment


def test_a_process_alone_at_its_instant_may_go_on():
    env = CountingEnvironment()
    seen = []

    def proc():
        seen.append(("start", env.may_continue()))  # resumed by its start, nothing else due now
        yield env.timeout(1.0)
        seen.append(("after timeout", env.may_continue()))

    env.process(proc())
    env.run()
    assert seen == [("start", True), ("after timeout", True)]


def test_a_process_may_not_go_on_while_another_event_is_due_at_its_instant():
    env = CountingEnvironment()
    seen = []

    def proc(name: str):
        seen.append((name, env.now, env.may_continue()))
        yield env.timeout(1.0)

    env.process(proc("first"))  # the second one's start is due at the same instant
    env.process(proc("second"))
    env.timeout(2.0)
    env.run()
    assert seen == [("first", 0.0, False), ("second", 0.0, True)]


def test_a_process_may_not_go_on_when_its_resume_is_not_the_last_callback():
    """Another callback of the event that resumed it runs after it: going on first would reorder."""
    env = CountingEnvironment()
    seen = []
    gate = env.event()

    def proc():
        yield gate
        seen.append(env.may_continue())

    env.process(proc())

    def opener():
        yield env.timeout(1.0)
        gate.succeed()
        gate.callbacks.append(lambda _e: seen.append("other callback"))

    env.process(opener())
    env.run()
    assert seen == [False, "other callback"]


def test_outside_a_process_nothing_may_go_on():
    env = CountingEnvironment()
    seen = []
    env.timeout(1.0).callbacks.append(lambda _e: seen.append(env.may_continue()))
    env.run()
    assert seen == [False]
    assert not CountingEnvironment().may_continue()  # before the run: no process running


def _waiter_and_trigger(extra_due_now: bool):
    """A process waits on `done`; a timeout's only callback triggers it with `succeed_last`.
    Returns (what happened in order, events counted)."""
    env = CountingEnvironment()
    order: list = []
    done = env.event()

    def waiter():
        value = yield done
        order.append(("waiter resumed", env.now, value))

    def trigger(_event):
        if extra_due_now:
            env.timeout(0.0).callbacks.append(lambda _e: order.append(("other event", env.now)))
        env.succeed_last(done, "v")
        order.append(("trigger returned", env.now))

    env.process(waiter())
    env.timeout(2.0).callbacks.append(trigger)
    env.run()
    return order, env.events_processed


def test_succeed_last_processes_the_event_in_place_when_it_would_be_next():
    order, events = _waiter_and_trigger(extra_due_now=False)
    assert order == [("waiter resumed", 2.0, "v"), ("trigger returned", 2.0)]  # during the call
    assert events == 4  # the waiter's start and end, the timeout and `done` (processed in place): all counted


def test_succeed_last_leaves_the_event_to_the_queue_when_another_is_due_first():
    order, events = _waiter_and_trigger(extra_due_now=True)
    assert order == [("trigger returned", 2.0), ("other event", 2.0), ("waiter resumed", 2.0, "v")]
    assert events == 5  # the same and the other event


def test_outside_a_run_succeed_last_only_triggers():
    env = CountingEnvironment()
    env.timeout(1.0)
    env.run()
    done, seen = env.event(), []
    done.callbacks.append(lambda _e: seen.append("processed"))
    env.succeed_last(done)  # after the run: queued for the next one, as `succeed`
    assert done.triggered and not done.processed and seen == []
    env.run()
    assert seen == ["processed"]


def _pipeline_log(inline: bool, seed: int, in_place: list) -> list:
    """Workers that hand items to each other through events triggered by timeouts' callbacks (with
    `succeed_last`, or `succeed`): the log of who did what when, in order. `in_place` gets one
    entry per event processed during `succeed_last`."""
    env = CountingEnvironment()
    rng = np.random.default_rng(seed)
    log: list = []
    delays = rng.choice([0.0, 0.5, 1.0], size=(5, 30))

    def hand_over(event, value):
        def callback(_e):
            log.append(("handed", env.now, value))
            if inline:
                env.succeed_last(event, value)
                if event.processed:
                    in_place.append(value)
            else:
                event.succeed(value)

        return callback

    def worker(k: int):
        for j in range(30):
            event = env.event()
            env.timeout(float(delays[k, j])).callbacks.append(hand_over(event, (k, j)))
            value = yield event
            log.append(("got", env.now, k, value))

    for k in range(5):
        env.process(worker(k))
    env.run()
    return log


def test_a_run_keeps_its_order_whether_events_are_processed_in_place_or_queued():
    for seed in range(4):
        in_place: list = []
        assert _pipeline_log(True, seed, in_place) == _pipeline_log(False, seed, [])
        assert 0 < len(in_place) < 150  # some hand-overs in place, others queued behind one due first
