"""A device stream as a SimPy resource, made without SimPy's generic resource machinery.

`Stream` is a `simpy.Resource`: requests (`Stream.request`, usable in a `with` block) are granted
first come first served up to its capacity, and a release (`Stream.release`, or leaving the `with`
block) lets the next waiting request in. It does what `simpy.Resource` does, event for event: the
same `Request` and `Release` events (subclasses, so `isinstance` holds) with the same callbacks,
granted, released, scheduled and processed in the same order at the same points, so a run gives
the same results to the last bit. Only the generic steps are cut: SimPy's resources scan their
queues in loops that, for a `Resource`, only ever try the first queued request or release (its
`_do_put` and `_do_get` return None, which ends the scan), through several method calls and
properties per step. A 1,024-GPU embedding iteration requests and releases streams ~80K times.

tests/engine/test_stream.py runs the same random requests, releases, cancellations and
interrupts against `simpy.Resource` and `Stream` and compares what happens, step by step.
"""

from __future__ import annotations

from collections.abc import MutableSequence

import simpy
from simpy.events import PENDING
from simpy.resources.resource import Release, Request


def _queued(event: simpy.Event, resource: Stream, callback, queue: MutableSequence) -> None:
    """`Put.__init__` / `Get.__init__` up to their trigger call: the event of `resource` with its
    one callback, made by the active process, at the end of `queue`."""
    env = resource._env
    event.env = env
    event.callbacks = [callback]
    event.resource = resource  # type: ignore[attr-defined]
    event.proc = env._active_proc  # type: ignore[attr-defined]
    queue.append(event)


def _succeed(event: simpy.Event, env) -> None:
    """`Event.succeed()`: triggered now, without a value."""
    if event._value is not PENDING:  # type: ignore[attr-defined]
        raise RuntimeError(f"{event} has already been triggered")
    event._ok = True  # type: ignore[attr-defined]
    event._value = None  # type: ignore[attr-defined]
    env.schedule(event)


class StreamRequest(Request):
    """`simpy.resources.resource.Request` of a `Stream` (the same state, made directly)."""

    def __init__(self, resource: Stream) -> None:  # noqa: D107 - Put.__init__, inlined
        _queued(self, resource, resource._trigger_get, resource.put_queue)
        resource._trigger_put(None)


class StreamRelease(Release):
    """`simpy.resources.resource.Release` of a `Stream` (the same state, made directly)."""

    def __init__(self, resource: Stream, request: Request) -> None:  # noqa: D107 - Get.__init__, inlined
        self.request = request
        _queued(self, resource, resource._trigger_put, resource.get_queue)
        resource._trigger_get(None)


class Stream(simpy.Resource):
    """`simpy.Resource` with the same behaviour, event for event (module docstring)."""

    def request(self) -> StreamRequest:  # type: ignore[override]
        return StreamRequest(self)

    def release(self, request: Request) -> StreamRelease:  # type: ignore[override]
        return StreamRelease(self, request)

    def _trigger_put(self, get_event: Release | None) -> None:
        """`BaseResource._trigger_put` of a `Resource`: the first queued request is granted if a
        slot is free (the scan stops there: `Resource._do_put` returns None)."""
        queue = self.put_queue
        if queue and len(self.users) < self._capacity:
            request = queue[0]
            self.users.append(request)  # `Resource._do_put`
            env = self._env
            request.usage_since = env._now  # type: ignore[attr-defined]
            _succeed(request, env)
            queue.pop(0)

    def _trigger_get(self, put_event: Request | None) -> None:
        """`BaseResource._trigger_get` of a `Resource`: the first queued release takes its request
        off the users and succeeds (the scan stops there: `Resource._do_get` returns None)."""
        queue = self.get_queue
        if queue:
            release = queue[0]
            try:  # `Resource._do_get`
                self.users.remove(release.request)  # type: ignore[attr-defined]
            except ValueError:
                pass
            _succeed(release, self._env)
            queue.pop(0)
