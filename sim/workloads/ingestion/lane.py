"""A worker's output slot as a `Lane`: a long-lived state machine that carries the worker's waiting
batches to delivery, one at a time, in the order they were queued (sim/workloads/ingestion/pipeline.py
step 4-5: take the next waiting batch, run its stages, take a trainer credit, send it, deliver it).

A lane does what a SimPy process running that loop would, event for event: where the process would
yield an event, the lane appends its next step to the event's callbacks, as the process appends its
resume, so every event is created, scheduled and processed in the same order, and every step runs
at the same point of the same event's callbacks (the same results to the last bit). It only saves
the process machinery (a generator and its resume per event: an ingestion hour resumes lanes
millions of times). Requests granted at once go on without an event where that changes nothing, as
the process would (`LeanContainer.take_now` / `LeanStore.take_now` with the lane as the owner:
`CountingEnvironment.may_continue`). A lane stops at its next step once its worker's incarnation is
gone (crashed), leaving what it held undelivered, as the process would return.
"""

from __future__ import annotations

import simpy


class Lane:
    """One output slot of a worker's incarnation `inc` in `pipeline` (module docstring)."""

    __slots__ = (
        "pipeline", "worker", "inc", "env", "sim", "credits", "factor", "cores", "split", "index", "batch",
        "group", "durations", "member", "t", "busy", "target",
    )  # fmt: skip

    def __init__(self, pipeline, worker, inc: int) -> None:
        self.pipeline, self.worker, self.inc = pipeline, worker, inc
        self.sim, self.env = pipeline.sim, pipeline.sim.env
        self.credits = pipeline.credits_of(worker)
        self.factor = pipeline._service[worker.index].next  # the worker's next service-time factor
        self.cores = pipeline._cores_per_batch(worker)  # a batch's cores on `cpu` stages
        self.split = self.batch = None
        self.index = self.group = self.member = self.target = 0
        self.durations: list[float] = []
        self.t = 0.0  # when the batch's cores were granted (or its send started)
        self.busy = 0.0  # its `cpu` stages' combined busy time on those cores

    def start(self) -> None:
        """Take the first batch once the events due now are processed (as a process starts: an urgent
        event whose callback is the lane's first step)."""
        self.env.start_machine(self._next)

    # ---- the loop: the next waiting batch -----------------------------------------------------
    def _next(self, _event: simpy.Event | None = None) -> None:
        waiting = self.worker.waiting
        item = waiting.take_now(self)
        if item is None:
            waiting.get().callbacks.append(self._took)
            return
        self._take(item)

    def _took(self, event: simpy.Event) -> None:
        self._take(event._value)  # type: ignore[attr-defined]

    def _take(self, item: tuple) -> None:
        w = self.worker
        if not (w.alive and w.incarnation == self.inc):
            return
        split, index = self.split, self.index = item
        self.batch = split.plan.batches[index]
        self.group = 0
        self._stages()

    # ---- its stages: groups of consecutive stages on one resource -----------------------------
    def _stages(self) -> None:
        """Run the batch's stage groups from `group` on (then take a credit)."""
        pipeline = self.pipeline
        groups = pipeline.groups
        if self.group == len(groups):  # a credit next
            self.credits.get(self.worker.index).callbacks.append(self._credited)
            return
        resource, members = groups[self.group]
        stage_s, factor = self.batch.stage_s, self.factor
        self.durations = [stage_s[i] * factor() for i in members]
        if resource == "cpu":
            w, k = self.worker, self.cores
            if not w.cores.take_now(k, self):
                w.cores.get(k).callbacks.append(self._got_cores)
                return
            self._got_cores(None)
        else:
            self.member = 0
            self._gpu_stage()

    def _got_cores(self, _event: simpy.Event | None) -> None:
        w, k, env = self.worker, self.cores, self.env
        if not (w.alive and w.incarnation == self.inc):
            return
        w.cores_busy.change(k)
        self.t = env.now
        busy = self.busy = sum(self.durations) / k
        if w.memory_flow is None or self.batch.memory_bytes <= 0:
            env.timeout(busy).callbacks.append(self._cpu_done)
        else:  # cores and memory traffic overlap: whichever ends last
            flow = [(*w.memory_flow, self.batch.memory_bytes)]
            sim = self.sim
            done = sim.all_of([sim.timeout(busy), self.pipeline.network.transfer_many(flow, name="host memory")])
            done.callbacks.append(self._cpu_done)

    def _cpu_done(self, _event: simpy.Event) -> None:
        w, k, env, pipeline = self.worker, self.cores, self.env, self.pipeline
        if not (w.alive and w.incarnation == self.inc):
            return
        t, durations, busy = self.t, self.durations, self.busy
        stretch = 1.0
        if not (w.memory_flow is None or self.batch.memory_bytes <= 0) and busy > 0 and env.now > t + busy:
            stretch = (env.now - t) / busy  # memory-bound: the stages' spans stretch
        w.cores.give_back(k)
        w.cores_busy.change(-k)
        span, overlap = self.sim.recorder.span, pipeline.window.overlap
        stages, stage_busy_s = pipeline.data.stages, pipeline.stage_busy_s
        for i, d in zip(pipeline.groups[self.group][1], durations):
            d *= stretch
            name = stages[i].name
            span(w.name, "cpu", name, t, t + d / k, 0.0, 0.0, "compute", k)  # sim.span with its end
            stage_busy_s[name] += overlap(t, t + d / k) * k
            t += d / k
        self.group += 1
        self._stages()

    def _gpu_stage(self) -> None:
        members = self.pipeline.groups[self.group][1]
        if self.member == len(members):
            self.group += 1
            self._stages()
            return
        gpu = self.worker.pick_gpu()
        name = self.pipeline.data.stages[members[self.member]].name
        gpu.run(name, self.durations[self.member], stream="compute", category="compute").callbacks.append(
            self._gpu_done
        )

    def _gpu_done(self, _event: simpy.Event) -> None:
        w = self.worker
        if not (w.alive and w.incarnation == self.inc):
            return
        pipeline, now = self.pipeline, self.env.now
        d = self.durations[self.member]
        pipeline.stage_busy_s[pipeline.data.stages[pipeline.groups[self.group][1][self.member]].name] += (
            pipeline.window.overlap(now - d, now)
        )
        self.member += 1
        self._gpu_stage()

    # ---- a credit, the send and the delivery --------------------------------------------------
    def _credited(self, event: simpy.Event) -> None:
        target = self.target = event._value  # type: ignore[attr-defined]
        w = self.worker
        if not (w.alive and w.incarnation == self.inc):
            self.credits.release(w.index)
            self.credits.put(target)
            return
        if w.local_trainer != target:
            self.t = self.env.now
            trainer = self.pipeline.trainers[target]
            flow = [(w.node(), trainer.next_node(), self.batch.bytes_out)]
            self.pipeline.network.transfer_many(flow, name="batch").callbacks.append(self._sent)
            return
        self._deliver()

    def _sent(self, _event: simpy.Event) -> None:
        pipeline, w, bytes_out = self.pipeline, self.worker, self.batch.bytes_out
        pipeline.bytes_sent += bytes_out
        if not (w.alive and w.incarnation == self.inc):
            pipeline.bytes_sent_wasted += bytes_out
            self.credits.release(w.index)
            self.credits.put(self.target)
            return
        trainer = pipeline.trainers[self.target]
        # `sim.span`, ending now
        self.sim.recorder.span(w.name, "send", trainer.batch_name, self.t, self.env.now, bytes_out, 0.0, "comm")
        self._deliver()

    def _deliver(self) -> None:
        pipeline, batch, w = self.pipeline, self.batch, self.worker
        pipeline.batches_sent += 1
        counters = pipeline.counters
        for key, value in batch.counters.items():
            counters[key] = counters.get(key, 0.0) + value
        self.credits.release(w.index)
        pipeline.trainers[self.target].deliver(batch)
        pipeline.master.delivered(self.split, self.index)
        if not (w.alive and w.incarnation == self.inc):
            return
        split = self.split
        split.left -= 1
        if not split.left:
            split.processed.succeed()
        self._next()
