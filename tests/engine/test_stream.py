"""A `Stream` (sim/engine/stream.py) does what `simpy.Resource` does, event for event.

The same random mix of processes - holding the resource in a `with` block, giving up a request
while waiting (an interrupt), releasing explicitly, and kernel-style requests released from a
callback - runs once on `simpy.Resource` and once on `Stream`; everything observable must match:
when each request is granted, the order in which the environment processes its events (kind and
time of each), and how many there are.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from simpy.events import Initialize
from simpy.resources.resource import Release, Request

from sim.engine.simulation import CountingEnvironment
from sim.engine.stream import Stream


def _kind(event: simpy.Event) -> str:
    for kind in (Request, Release, simpy.Timeout, simpy.Process, Initialize):
        if isinstance(event, kind):
            return kind.__name__
    return type(event).__name__


def _run(resource_type, seed: int, capacity: int) -> tuple[list, list, int]:
    """(what the processes saw, the processed events as (time, kind), events processed)."""
    env = CountingEnvironment()
    rng = np.random.default_rng(seed)
    resources = [resource_type(env, capacity=capacity) for _ in range(3)]
    seen: list[tuple] = []
    processed: list[tuple[float, str]] = []
    step = env.step

    def logged_step() -> None:
        if env._queue:  # type: ignore[attr-defined]
            processed.append((env.peek(), _kind(env._queue[0][3])))  # type: ignore[attr-defined]
        step()

    env.step = logged_step  # type: ignore[method-assign]

    def holder(k: int, r, hold: float):
        with r.request() as req:
            yield req
            seen.append(("granted", k, env.now, r.count, len(r.queue)))
            yield env.timeout(hold)
        seen.append(("left", k, env.now, r.count, len(r.queue)))

    def impatient(k: int, r, patience: float):
        req = r.request()
        result = yield req | env.timeout(patience)
        if req in result:
            seen.append(("got", k, env.now))
            yield env.timeout(0.5)
            r.release(req)
        else:
            req.cancel()
            seen.append(("gave up", k, env.now, len(r.queue)))

    def interrupted(k: int, r):
        try:
            with r.request() as req:
                yield req
                seen.append(("granted", k, env.now))
                yield env.timeout(5.0)
        except simpy.Interrupt:
            seen.append(("interrupted", k, env.now, r.count, len(r.queue)))

    def kernel(k: int, r, duration: float) -> None:  # as `KernelRun`: steps as callbacks
        req = r.request()

        def granted(_event) -> None:
            seen.append(("kernel", k, env.now))
            env.timeout(duration).callbacks.append(lambda _e: req.__exit__(None, None, None))

        req.callbacks.append(granted)

    def driver():
        for k in range(300):
            r = resources[int(rng.integers(len(resources)))]
            what = rng.random()
            if what < 0.35:
                env.process(holder(k, r, float(rng.choice([0.0, 0.5, 1.0, 1.5]))))
            elif what < 0.55:
                env.process(impatient(k, r, float(rng.choice([0.0, 0.5, 2.0]))))
            elif what < 0.65:
                victim = env.process(interrupted(k, r))
                env.process(_interrupt_later(env, victim, float(rng.choice([0.0, 0.5, 3.0]))))
            else:
                kernel(k, r, float(rng.choice([0.0, 0.25, 1.0])))
            if rng.random() < 0.4:
                yield env.timeout(float(rng.choice([0.0, 0.25, 0.5])))

    env.process(driver())
    env.run()
    return seen, processed, env.events_processed


def _interrupt_later(env, victim, delay: float):
    yield env.timeout(delay)
    if victim.is_alive:
        victim.interrupt()


@pytest.mark.parametrize("capacity", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_a_stream_grants_releases_and_schedules_as_simpy_resource(seed, capacity):
    expected = _run(simpy.Resource, seed, capacity)
    got = _run(Stream, seed, capacity)
    assert got[0] == expected[0]  # grants, releases, cancellations: when and in what state
    assert got[1] == expected[1]  # every processed event, in order
    assert got[2] == expected[2]
    assert any(entry[0] == "interrupted" for entry in expected[0]) or seed > 0


def test_a_stream_is_a_simpy_resource_with_its_requests_and_releases():
    env = CountingEnvironment()
    stream = Stream(env, capacity=1)
    first, second = stream.request(), stream.request()
    assert isinstance(stream, simpy.Resource)
    assert isinstance(first, Request) and first.triggered and not second.triggered
    assert stream.count == 1 and stream.queue == [second] and stream.users == [first]
    release = stream.release(first)
    assert isinstance(release, Release) and stream.count == 0
    env.run()
    assert second.processed and stream.users == [second]
