"""The stage/worker machinery every ingestion pipeline shares: storage -> master -> workers ->
trainers, parameterised by a data model's stages (tabular DPP rows, videos, ...).

A `Worker` is a host with CPU cores and memory (SimPy containers), optional GPUs (`Device`s with
compute streams) and network nodes. It runs `splits_in_flight` split loops
(sim/workloads/ingestion/split_loop.py: long-lived state machines, event for event what a process
would do); each loop reads its next split while it processes the previous one (double buffering).
Per split:
1. takes a split from the master (`Master.take`),
2. reserves the split's memory (waits while the worker's memory is full; a request granted at once
   goes on without an event where that changes nothing: `LeanContainer.take_now`),
3. reads it from storage (`Storage.read`: flows through media, storage NIC, fabric, worker NIC),
4. processes the split's batches, each once it holds one of the worker's output slots (which bounds
   how far a worker runs ahead of its trainers, like a bounded prefetch queue). A slot is a lane
   (sim/workloads/ingestion/lane.py: a long-lived state machine, event for event what a process
   would do) that takes the worker's next waiting batch (first come, first served across its
   splits: `Worker.waiting`) and carries it to delivery, then takes the next, so a batch costs no
   process of its own; a split's processing ends when its last batch is delivered
   (`Split.left`, `Split.processed`). Consecutive CPU
   stages hold `cores_per_batch` cores for their combined busy time (work split across those
   cores) or, on a trainer host with a DRAM tier, until their host-memory traffic (a flow from the
   DRAM node to the host's CPU node, sharing the DRAM link max-min fairly with the other batches
   and the trainer's host-to-device copies) is done too, whichever ends last; a GPU stage runs as
   a kernel on the least-busy GPU's compute stream,
5. for each processed batch takes a credit (a free slot in a trainer's buffer), sends the batch
   (a flow to one of that trainer's GPU NICs; nothing when the worker is the trainer host itself),
   delivers it, which the master records, and frees its output slot (its lane takes the next batch),
6. releases the memory when all batches are delivered and reports the split complete.
Busy times are nominal x a gamma factor of mean 1 and coefficient of variation `service_cv`, so
supply fluctuates even when its mean equals demand. Each worker draws its factors from its own
seeded stream (`ServiceFactors`: `sim.rng("service/worker{index}")`, kept across restarts), in the
order its batches reach their stages: a worker's draws do not depend on other workers' timing.

A crashed worker (`crash`) stops at its next step: nothing it still holds is delivered, its cores
and memory die with it, and the master requeues its outstanding splits' undelivered ranges
after the master's heartbeat timeout. A retiring worker (scale-down) finishes its current splits
and stops. Workers are reused: a restart starts a new incarnation with fresh resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from sim.workloads.ingestion.lane import Lane
from sim.workloads.ingestion.levels import LeanContainer, LeanStore
from sim.workloads.ingestion.parts import Master, Occupancy, Split, Storage, Trainer, Window
from sim.workloads.ingestion.split_loop import SplitLoop


@dataclass(frozen=True)
class PipelineSettings:
    service_cv: float
    cores_per_batch: int
    splits_in_flight: int
    heartbeat_timeout_s: float
    worker_startup_s: float
    output_batches: int | None  # batches a worker may hold processed or in process; None: 2 x
    # the batches its cores process at once


class ServiceFactors:
    """A worker's service-time factors: gamma draws of mean 1 and cv `cv` from its own stream, in
    order. Drawn in blocks (numpy's array draws are the same numbers as one draw per call)."""

    BLOCK = 256

    def __init__(self, rng, cv: float) -> None:
        self._rng, self._cv = rng, cv
        self._block: list[float] = []
        self._next = 0

    def next(self) -> float:
        if self._cv == 0:
            return 1.0
        if self._next == len(self._block):
            cv = self._cv
            self._block, self._next = self._rng.gamma(1.0 / cv**2, cv**2, size=self.BLOCK).tolist(), 0
        value = self._block[self._next]
        self._next += 1
        return value


class Worker:
    def __init__(
        self,
        index: int,
        name: str,
        read_nodes: list[str],
        cores: int,
        memory_bytes: float,
        gpus: list,
        local_trainer: int | None = None,
    ) -> None:
        self.index, self.name = index, name
        self.read_nodes = read_nodes  # network nodes data arrives at / leaves from
        self.cores_total, self.memory_total = cores, memory_bytes
        self.gpus = gpus
        self.local_trainer = local_trainer  # on-trainer mode: the trainer host it runs on
        self.incarnation = 0
        self.alive = False
        self.retiring = False
        self.starting = False
        self.failed = False  # crashed and not restarted
        self.loops = 0
        self.cores: LeanContainer | None = None
        self.memory: LeanContainer | None = None
        self.waiting: LeanStore | None = None  # (split, batch index) waiting for an output slot (a lane)
        self._node = 0
        self.started_s = 0.0
        self.alive_s = 0.0  # time alive inside the window
        self.cores_busy: Occupancy | None = None  # cores in use over time (set by the Pipeline)
        self.memory_used: Occupancy | None = None  # bytes reserved over time
        self.memory_flow: tuple[str, str] | None = None  # (DRAM node, CPU node) its stages' memory traffic takes

    @property
    def owner(self) -> tuple:
        return (self.index, self.incarnation)

    def live(self, incarnation: int) -> bool:
        return self.alive and self.incarnation == incarnation

    def node(self) -> str:
        self._node = (self._node + 1) % len(self.read_nodes)
        return self.read_nodes[self._node]

    def pick_gpu(self):
        return min(self.gpus, key=lambda d: (d.stream("compute").count + len(d.stream("compute").queue), d.node))


class Pipeline:
    def __init__(
        self,
        sim,
        network,
        data,
        storage: Storage,
        master: Master,
        trainers: list[Trainer],
        workers: list[Worker],
        credits_of,
        settings: PipelineSettings,
        window: Window,
    ) -> None:
        self.sim, self.network, self.data = sim, network, data
        self.storage, self.master, self.trainers, self.workers = storage, master, trainers, workers
        self.credits_of = credits_of  # worker -> the credit store it draws from
        self.settings, self.window = settings, window
        self.groups = [
            (res, [i for i, _ in grp])
            for res, grp in groupby(enumerate(data.stages), key=lambda item: item[1].resource)
        ]
        self._service = {
            w.index: ServiceFactors(sim.rng(f"service/worker{w.index}"), settings.service_cv) for w in workers
        }
        self.counters: dict[str, float] = {}
        self.batches_sent = 0
        self.bytes_sent = 0.0
        self.bytes_sent_wasted = 0.0
        self.stage_busy_s = {s.name: 0.0 for s in data.stages}
        self.crashes = 0
        for w in workers:
            w.cores_busy, w.memory_used = Occupancy(sim, window), Occupancy(sim, window)

    # ---- pool management ------------------------------------------------------------------
    def active(self) -> list[Worker]:
        return [w for w in self.workers if (w.alive or w.starting) and not w.retiring]

    def idle_hosts(self) -> list[Worker]:
        """Hosts a controller may start: not running, not draining, not starting, not crashed."""
        return [w for w in self.workers if not (w.alive or w.starting or w.failed) and w.loops == 0]

    def start(self, worker: Worker, delay_s: float = 0.0) -> None:
        worker.starting = True
        self.sim.process(self._boot(worker, delay_s))

    def _boot(self, worker: Worker, delay_s: float):
        if delay_s > 0:
            yield self.sim.timeout(delay_s)
        worker.starting, worker.retiring, worker.alive, worker.failed = False, False, True, False
        worker.incarnation += 1
        worker.started_s = self.sim.now
        worker.cores = LeanContainer(self.sim.env, capacity=worker.cores_total, init=worker.cores_total)
        worker.memory = LeanContainer(self.sim.env, capacity=worker.memory_total, init=worker.memory_total)
        slots = self.settings.output_batches or 2 * max(1, worker.cores_total // self._cores_per_batch(worker))
        worker.waiting = LeanStore(self.sim.env)
        for _ in range(slots):
            Lane(self, worker, worker.incarnation).start()
        for _ in range(self.settings.splits_in_flight):
            worker.loops += 1
            SplitLoop(self, worker, worker.incarnation).start()

    def retire(self, worker: Worker) -> None:
        worker.retiring = True

    def _stopped(self, worker: Worker) -> None:
        worker.alive_s += self.window.overlap(worker.started_s, self.sim.now)

    def close(self) -> None:
        """End of run: count the alive time of workers still running."""
        for w in self.workers:
            if w.alive:
                self._stopped(w)
                w.started_s = self.sim.now

    def crash(self, worker: Worker) -> None:
        owner = worker.owner
        if worker.alive:
            self._stopped(worker)
        worker.cores_busy.change(-worker.cores_busy.level)
        worker.memory_used.change(-worker.memory_used.level)
        worker.alive, worker.loops, worker.failed = False, 0, True
        worker.incarnation += 1  # every process of the old incarnation stops
        self.crashes += 1
        self.sim.span(worker.name, "worker", "crashed", self.sim.now, self.sim.now, category="fault")
        self.sim.process(self._requeue_after_timeout(owner))

    def _requeue_after_timeout(self, owner: tuple):
        yield self.sim.timeout(self.settings.heartbeat_timeout_s)
        self.master.requeue_owner(owner)

    # ---- a split's processing --------------------------------------------------------------
    def _process(self, w: Worker, inc: int, split: Split):
        """Queue the split's batches for the worker's lanes; once the last is delivered, free its memory
        and report it complete. Returns the event of its end: event for event what a process doing
        this would be (it starts as a process starts, and ends as one returns)."""
        env = self.sim.env
        end = env.event()

        def queue(_event) -> None:
            plan = split.plan
            split.left, split.processed = len(plan.batches), env.event()
            if not split.left:
                split.processed.succeed()
            for i in range(split.left):
                w.waiting.add((split, i))
            split.processed.callbacks.append(processed)

        def processed(_event) -> None:
            if w.live(inc):
                w.memory.give_back(split.plan.memory_bytes)
                w.memory_used.change(-split.plan.memory_bytes)
                self.master.completed(split)
            end.succeed()

        env.start_machine(queue)
        return end

    def _cores_per_batch(self, w: Worker) -> int:
        return min(self.settings.cores_per_batch, w.cores_total)

    # ---- the run ------------------------------------------------------------------------------
    def pending_ranges(self) -> list[tuple[int, int]]:
        return self.master.pending_ranges()
