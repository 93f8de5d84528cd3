"""A worker's split loop as a `SplitLoop`: a long-lived state machine that reads splits one after
another and processes each while the next one is read (double buffering; pipeline.py steps 1-3, 6).

Per split it takes a split from the master (`Master.take`, waiting while none is left but some are
outstanding), reserves the split's memory (waiting while the worker's memory is full), reads it from
storage (`Storage.start_read`: a live replica, else wait for one to recover; the access flow, the
data flow, `Storage.finish_read`: again from a live replica where the node failed meanwhile), records
the read, waits for the previous split's processing to end and starts this one's
(`Pipeline._process`). When the master has no work left, or the worker retires, it waits for its last
processing to end and leaves the worker (the last loop to leave stops it). Once the worker's
incarnation is gone (crashed) it stops at its next step; a split taken but not started goes back.

Like a lane (sim/workloads/ingestion/lane.py), it does event for event what a SimPy process running
that loop would: it appends its next step to the event it waits for where the process would yield
it, so every event is created, scheduled and processed in the same order.
"""

from __future__ import annotations

from typing import cast

import simpy

from sim.workloads.ingestion.parts import Split


class SplitLoop:
    """One split loop of a worker's incarnation `inc` in `pipeline` (module docstring)."""

    __slots__ = (
        "pipeline", "worker", "inc", "env", "split", "processing", "read_start", "dst", "node", "attempt", "node_start",
    )  # fmt: skip

    def __init__(self, pipeline, worker, inc: int) -> None:
        self.pipeline, self.worker, self.inc = pipeline, worker, inc
        self.env = pipeline.sim.env
        self.split: Split = cast(Split, None)  # the split in hand (set before any step reads it)
        self.processing: simpy.Event | None = None  # the end of the previous split's processing
        self.read_start = 0.0
        self.dst = ""  # where the split is read to (one of the worker's nodes)
        self.node = self.attempt = 0  # the read in progress: its storage node and attempt number
        self.node_start = 0.0  # when the read from `node` started

    def start(self) -> None:
        self.env.start_machine(self._loop)

    def _loop(self, _event: simpy.Event | None = None) -> None:
        if not self.worker.live(self.inc) or self.worker.retiring:
            self._drain()
            return
        self._take()

    def _take(self, _event: simpy.Event | None = None) -> None:
        pipeline, w = self.pipeline, self.worker
        got = pipeline.master.take((w.index, self.inc))
        if isinstance(got, simpy.Event):  # none left, some outstanding: ask again once one may be
            got.callbacks.append(self._take)
            return
        if got is None:  # all work done
            self._drain()
            return
        self.split = got
        if not self.worker.live(self.inc):
            pipeline.master.give_back(got)
            return
        memory_bytes = got.plan.memory_bytes
        if not w.memory.take_now(memory_bytes, self):
            w.memory.get(memory_bytes).callbacks.append(self._reserved)
            return
        self._reserved()

    def _reserved(self, _event: simpy.Event | None = None) -> None:
        if not self.worker.live(self.inc):
            return
        split = self.split
        self.worker.memory_used.change(split.plan.memory_bytes)
        self.read_start = self.env.now
        self.attempt = split.id  # the first attempt's number: the split's id
        self.dst = self.worker.node()
        self._read()

    # ---- the read -----------------------------------------------------------------------------
    def _read(self, _event: simpy.Event | None = None) -> None:
        storage, plan = self.pipeline.storage, self.split.plan
        node = storage.start_read(plan, self.attempt)
        if node is None:  # no live replica: wait for a node to recover
            storage.changed.callbacks.append(self._read)
            return
        self.node, self.node_start = node, self.env.now
        if plan.read_accesses > 0:
            flow = [storage.access_flow(plan, node)]
            self.pipeline.network.transfer_many(flow, name="access").callbacks.append(self._read_data)
            return
        self._read_data()

    def _read_data(self, _event: simpy.Event | None = None) -> None:
        storage = self.pipeline.storage
        flow = [storage.data_flow(self.split.plan, self.node, self.dst)]
        self.pipeline.network.transfer_many(flow, name="read").callbacks.append(self._read_landed)

    def _read_landed(self, _event: simpy.Event) -> None:
        if not self.pipeline.storage.finish_read(self.split.plan, self.node, self.node_start):
            self.attempt += 1  # the node failed meanwhile: again, from a live replica
            self._read()
            return
        if not self.worker.live(self.inc):
            return
        pipeline, w, split = self.pipeline, self.worker, self.split
        plan = split.plan
        pipeline.sim.span(w.name, "read", f"split {split.id}", self.read_start, nbytes=plan.read_bytes, category="io")
        counters = pipeline.counters
        for key, value in plan.counters.items():
            counters[key] = counters.get(key, 0.0) + value
        processing = self.processing
        if processing is not None and processing.callbacks is not None:  # not processed yet: wait
            processing.callbacks.append(self._process)
            return
        self._process()

    def _process(self, _event: simpy.Event | None = None) -> None:
        self.processing = self.pipeline._process(self.worker, self.inc, self.split)
        self._loop()

    # ---- the end --------------------------------------------------------------------------------
    def _drain(self) -> None:
        processing = self.processing
        if processing is not None and processing.callbacks is not None:
            processing.callbacks.append(self._leave)
            return
        self._leave()

    def _leave(self, _event: simpy.Event | None = None) -> None:
        w = self.worker
        if self.worker.live(self.inc):
            w.loops -= 1
            if w.loops == 0:
                w.alive = False  # drained (retired, or no work left)
                self.pipeline._stopped(w)
