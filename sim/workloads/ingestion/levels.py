"""`LeanContainer` and `LeanStore`: simpy.Container's and simpy.Store's behaviour for a worker's
cores and memory, the batches waiting for its lanes (output slots) and a trainer's buffer, at a
fraction of their cost (issue 26: a 400-worker hour makes millions of these requests).

SimPy's container builds a `ContainerPut`/`ContainerGet` event per request through its generic
resource machinery (bound classes, queue scans through `_do_put`/`_do_get` calls). This class keeps
exactly its semantics and event order: a request is a plain `simpy.Event` appended to its queue;
a put is tried at once and, when processed, retries the waiting gets; a get is tried at once and,
when processed, retries the waiting puts; a queue is scanned from its head and the scan stops at
the first request that cannot proceed (FIFO, no overtaking); the store tries only the head of a
queue per trigger, as SimPy's does. tests/workloads/ingestion/test_levels.py compares both with
SimPy's step by step.

Two requests leave SimPy's order on purpose: `LeanContainer.give_back` (return what was taken) and
`LeanStore.add` (into an unbounded store) never wait, so they need no event: they serve the waiting
gets during the call instead of when a put event would be processed, later in the same instant.
Every shipped ingestion scenario gives the same metrics either way (tests/golden).

`take_now` is `get` without an event, where that changes nothing: a request granted at once whose
event would be the next one processed and would resume the requesting process first
(`CountingEnvironment.may_continue`) lets the process go on at once, after what the event's own
callback would do (retry the waiting puts). Everything happens in the same order; only the event
is saved (an ingestion hour makes millions of such requests).
"""

from __future__ import annotations

import simpy


def _never(_owner: object = None) -> bool:
    return False


class LeanContainer:
    """A level between 0 and `capacity` that processes take from (`get`) and give back (`put`)."""

    def __init__(self, env: simpy.Environment, capacity: float, init: float) -> None:
        if capacity <= 0 or not 0 <= init <= capacity:
            raise ValueError(f"capacity {capacity} must be > 0 and init {init} within [0, capacity]")
        self._env = env
        self._may_continue = getattr(env, "may_continue", _never)  # a plain SimPy environment: never
        self.capacity = capacity
        self._level = init
        self.put_queue: list[simpy.Event] = []
        self.get_queue: list[simpy.Event] = []

    @property
    def level(self) -> float:
        return self._level

    def put(self, amount: float) -> simpy.Event:
        """An event that succeeds once `amount` fits (as `simpy.Container.put`)."""
        if amount <= 0:
            raise ValueError(f"amount(={amount}) must be > 0.")
        event = simpy.Event(self._env)
        event.amount = amount  # type: ignore[attr-defined]
        event.callbacks.append(self._trigger_get)  # type: ignore[union-attr]
        self.put_queue.append(event)
        self._trigger_put(None)
        return event

    def give_back(self, amount: float) -> None:
        """Return `amount` taken earlier (a put that cannot wait: cores or memory released)
        without an event of its own: the level rises and the waiting gets are retried now, where
        `put` retries them when its event is processed, later in the same instant. The pipeline's
        releases use this (a quarter of an ingestion run's events were these puts)."""
        if amount <= 0 or self._level + amount > self.capacity:
            raise ValueError(f"give_back({amount}) at level {self._level} of {self.capacity}")
        self._level += amount
        self._trigger_get(None)

    def get(self, amount: float) -> simpy.Event:
        """An event that succeeds once `amount` is available (as `simpy.Container.get`)."""
        if amount <= 0:
            raise ValueError(f"amount(={amount}) must be > 0.")
        event = simpy.Event(self._env)
        event.amount = amount  # type: ignore[attr-defined]
        event.callbacks.append(self._trigger_put)  # type: ignore[union-attr]
        self.get_queue.append(event)
        self._trigger_get(None)
        return event

    def take_now(self, amount: float, owner: object = None) -> bool:
        """`get(amount)` granted at once without its event, where the running process (or `owner`,
        a state machine whose step is running: sim/workloads/ingestion/lane.py) may go on at once
        (module docstring); False: nothing was taken (yield `get` instead)."""
        if self.get_queue or self._level < amount or not self._may_continue(owner):
            return False
        if amount <= 0:
            raise ValueError(f"amount(={amount}) must be > 0.")
        self._level -= amount
        self._trigger_put(None)  # what the get's event does first when processed
        return True

    def _trigger_put(self, _event: simpy.Event | None) -> None:
        queue = self.put_queue
        while queue:
            event = queue[0]
            amount = event.amount  # type: ignore[attr-defined]
            if self.capacity - self._level < amount:
                break  # the head cannot proceed: no overtaking
            self._level += amount
            event.succeed()
            queue.pop(0)

    def _trigger_get(self, _event: simpy.Event | None) -> None:
        queue = self.get_queue
        while queue:
            event = queue[0]
            amount = event.amount  # type: ignore[attr-defined]
            if self._level < amount:
                break
            self._level -= amount
            event.succeed()
            queue.pop(0)


class LeanStore:
    """simpy.Store's behaviour (a FIFO of items, `capacity` at most) for a trainer's buffer and the
    batches waiting for a worker's lanes, with its event order: as SimPy's store, each trigger tries
    only the head of the queue (its `_do_put`/`_do_get` never ask the scan to go on)."""

    def __init__(self, env: simpy.Environment, capacity: float = float("inf")) -> None:
        if capacity <= 0:
            raise ValueError('"capacity" must be > 0.')
        self._env = env
        self._may_continue = getattr(env, "may_continue", _never)
        self.capacity = capacity
        self.items: list = []
        self.put_queue: list[simpy.Event] = []
        self.get_queue: list[simpy.Event] = []

    def put(self, item) -> simpy.Event:
        event = simpy.Event(self._env)
        event.item = item  # type: ignore[attr-defined]
        event.callbacks.append(self._trigger_get)  # type: ignore[union-attr]
        self.put_queue.append(event)
        self._trigger_put(None)
        return event

    def add(self, item) -> None:
        """Put `item` into a store without a capacity, without an event of its own: the waiting get
        at the head is served now (`put`: when its event is processed, later in the same instant)."""
        if self.capacity != float("inf"):
            raise ValueError("add() is for stores without a capacity (a put there never waits)")
        self.items.append(item)
        self._trigger_get(None)

    def get(self) -> simpy.Event:
        event = simpy.Event(self._env)
        event.callbacks.append(self._trigger_put)  # type: ignore[union-attr]
        self.get_queue.append(event)
        self._trigger_get(None)
        return event

    def take_now(self, owner: object = None) -> object | None:
        """The head item, taken at once without `get`'s event where the running process (or `owner`,
        as `LeanContainer.take_now`'s) may go on at once (module docstring); None: nothing was taken
        (yield `get` instead)."""
        if self.get_queue or not self.items or not self._may_continue(owner):
            return None
        item = self.items.pop(0)
        self._trigger_put(None)  # what the get's event does first when processed
        return item

    def _trigger_put(self, _event: simpy.Event | None) -> None:
        if self.put_queue and len(self.items) < self.capacity:
            event = self.put_queue.pop(0)
            self.items.append(event.item)  # type: ignore[attr-defined]
            event.succeed()

    def _trigger_get(self, _event: simpy.Event | None) -> None:
        if self.get_queue and self.items:
            self.get_queue.pop(0).succeed(self.items.pop(0))
