"""The parts of an ingestion pipeline that are not workers: plans, storage, master, trainers.

- `Stage`, `BatchPlan`, `SplitPlan`: what a data model (tabular DPP rows, videos) tells the
  machinery about one split: the bytes and random accesses to read, the worker memory it holds, and
  its batches, each a sample-id range with a nominal busy time per stage (core-seconds on `cpu`
  stages, GPU-seconds on `gpu` stages), the host-memory bytes its CPU stages move and the bytes
  sent to a trainer. `counters` carry
  model-specific tallies (e.g. bytes before and after RecD dedup) that the pipeline sums.
- `Storage`: storage hosts, each with one medium node `{pool}{k}/{medium}` on the network. A read
  is two max-min fair flows: first the random accesses, charged as `accesses x bytes_per_access`
  on the medium's link alone (one access occupies the medium as long as moving bandwidth/iops
  bytes: seeks and transfers share the disk's time; a read's access time varies by a gamma factor
  of mean 1 and cv `access_cv`), then the data over medium -> storage NIC -> fabric -> reader.
  Partition p lives on nodes p, p+1, ... (`replication` copies); a read goes to the live replica
  with the fewest reads in progress (ties rotate with the attempt number). A read from a node that
  failed while it ran is discarded (its bytes count as wasted) and retried on a live replica; the
  failed node's flows still run to their end (the model does not cancel flows).
- `Credits`: free trainer-buffer slots, granted fairly across workers.
- `Occupancy`, `WindowedLinkBytes`: time integrals (cores, memory) and link bytes in the window.
- `Master`: hands out splits (requeued remainders first, then fresh partitions in order), records
  which batches of each split were delivered, and on a crash requeues each outstanding split's
  undelivered ranges as new splits.
- `Trainer`: a cluster host that takes batches from a buffer and trains for samples / demand
  seconds, or longer if the step's flows (`step_flows`: host-to-device copies of an on-trainer
  batch, the job's own traffic), which overlap its compute, take longer; data stall is the time it
  waits on an empty buffer plus the time such flows extend a step beyond its compute. Buffer slots are credits: a worker
  takes a credit (a free slot of some trainer) before sending, so buffers never overflow and full
  buffers throttle the workers.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import simpy

from sim.engine.link_traffic import SubflowBuffer
from sim.workloads.ingestion.ledger import SampleLedger, subtract
from sim.workloads.ingestion.levels import LeanStore


@dataclass(frozen=True)
class Stage:
    name: str
    resource: str  # "cpu" (worker cores) or "gpu" (worker GPUs)


@dataclass(frozen=True)
class BatchPlan:
    start: int  # sample ids [start, end)
    end: int
    stage_s: tuple[float, ...]  # nominal busy seconds per stage
    bytes_out: float  # bytes sent to the trainer
    counters: dict = field(default_factory=dict)
    memory_bytes: float = 0.0  # host-memory bytes its CPU stages move (on_trainer with a DRAM tier)

    @property
    def samples(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class SplitPlan:
    partition: int
    start: int
    end: int
    read_bytes: float
    read_accesses: float
    memory_bytes: float
    batches: tuple[BatchPlan, ...]
    counters: dict = field(default_factory=dict)


def batch_ranges(start: int, end: int, size: int) -> list[tuple[int, int]]:
    """[start, end) cut into consecutive ranges of `size` samples (the last one may be shorter)."""
    return [(a, min(a + size, end)) for a in range(start, end, size)]


@dataclass(frozen=True)
class Window:
    """The measurement window [start_s, end_s] (after warm-up)."""

    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    def overlap(self, a: float, b: float) -> float:
        return max(0.0, min(b, self.end_s) - max(a, self.start_s))


class WindowedLinkBytes:
    """A network traffic observer: bytes each link carried inside the window (the network reports
    bytes moved per interval of constant rates; an interval straddling a window edge counts pro rata;
    bytes moved after the network's last rate change before the run ends are not yet reported).
    Sub-flow reports are buffered and counted together when `bytes` is read or `batch` of them wait
    (memory stays bounded over long runs)."""

    def __init__(self, num_links: int, window: Window, batch: int = 4096) -> None:
        self.window = window
        self._bytes = np.zeros(num_links)
        self._subflows = SubflowBuffer()
        self._batch = batch

    @property
    def bytes(self) -> np.ndarray:
        self._fold()
        return self._bytes

    def _fold(self) -> None:
        """Count the buffered sub-flow reports."""
        taken = self._subflows.take()
        if taken is not None:
            t0, t1, nbytes, flat, lengths = taken
            inside = np.clip(np.minimum(t1, self.window.end_s) - np.maximum(t0, self.window.start_s), 0.0, None)
            span = t1 - t0
            frac = np.where(
                span > 0,
                inside / np.where(span > 0, span, 1.0),
                (t0 >= self.window.start_s) & (t0 <= self.window.end_s),
            )
            np.add.at(self._bytes, flat, np.repeat(nbytes * frac, lengths))

    def on_links(self, t0: float, t1: float, links: np.ndarray, delta: np.ndarray) -> None:
        if t1 > t0:
            self._bytes[links] += delta * (self.window.overlap(t0, t1) / (t1 - t0))

    def on_subflows(self, t0, t1, flat, lengths, nbytes) -> None:
        self._subflows.add(t0, t1, flat, lengths, nbytes)
        if self._subflows.calls >= self._batch:
            self._fold()

    def on_subflow(self, t0: float, t1: float, links: tuple[int, ...], nbytes: float) -> None:
        """`on_subflows` of one sub-flow."""
        self._subflows.add_one(t0, t1, links, nbytes)
        if self._subflows.calls >= self._batch:
            self._fold()


class Occupancy:
    """A level over time (cores in use, bytes reserved) and its integral, whole run and in the window."""

    def __init__(self, sim, window: Window) -> None:
        self.sim, self.window = sim, window
        self._env = sim.env
        self.level = 0.0
        self._area = self._window_area = 0.0
        self._t = sim.now

    def change(self, delta: float) -> None:
        now, t, level, window = self._env.now, self._t, self.level, self.window  # `_advance`, inline
        self._area += level * (now - t)
        self._window_area += level * max(0.0, min(now, window.end_s) - max(t, window.start_s))
        self._t = now
        self.level = level + delta

    def area(self) -> float:
        self._advance()
        return self._area

    def window_area(self) -> float:
        self._advance()
        return self._window_area

    def _advance(self) -> None:
        now, t, level, window = self._env.now, self._t, self.level, self.window
        self._area += level * (now - t)
        self._window_area += level * max(0.0, min(now, window.end_s) - max(t, window.start_s))  # Window.overlap
        self._t = now


class Storage:
    def __init__(
        self,
        sim,
        network,
        hosts: list[str],
        medium: str,
        replication: int,
        bytes_per_access: float,
        access_cv: float = 0.0,
    ) -> None:
        self.sim, self.network = sim, network
        self.access_cv = access_cv
        self._rng = sim.rng("service/storage")
        self.hosts = hosts
        self.media = [f"{h}/{medium}" for h in hosts]
        self.replication = replication
        self.bytes_per_access = bytes_per_access
        self.down: set[int] = set()
        self.active = [0] * len(hosts)  # reads in progress per node
        self.last_failure_s: dict[int, float] = {}
        self._changed = sim.env.event()
        self.bytes_read = 0.0  # data bytes moved off the media (wasted reads included)
        self.bytes_wasted = 0.0
        self.reads = 0
        self.retries = 0
        self.degraded_reads = 0  # reads of a partition with a replica down (served by the others)

    def replicas(self, partition: int) -> list[int]:
        n = len(self.hosts)
        return [(partition + i) % n for i in range(self.replication)]

    def fail(self, node: int) -> None:
        self.down.add(node)
        self.last_failure_s[node] = self.sim.now

    def recover(self, node: int) -> None:
        self.down.discard(node)
        event, self._changed = self._changed, self.sim.env.event()
        event.succeed()

    @property
    def changed(self) -> simpy.Event:
        """An event that succeeds when a failed node recovers (a read with no live replica waits on it)."""
        return self._changed

    def start_read(self, plan: SplitPlan, attempt: int) -> int | None:
        """Start a read of `plan` (attempt number `attempt`): the live replica with the fewest reads in
        progress (ties rotate with the attempt), counted as reading; None: no replica is live (wait
        for `changed`, then start again). The read is then an access flow (`access_flow`, where the
        split has random accesses), the data flow (`data_flow`), and `finish_read`."""
        live = [k for k in self.replicas(plan.partition) if k not in self.down]
        if not live:
            return None
        node = min(live, key=lambda k: (self.active[k], (k - attempt) % len(self.hosts)))
        self.degraded_reads += len(live) < self.replication
        self.active[node] += 1
        return node

    def access_flow(self, plan: SplitPlan, node: int) -> tuple[str, str, float]:
        """The flow charging the read's random accesses on the medium of `node` (its time varies by a
        gamma factor of mean 1 and cv `access_cv`)."""
        cv = self.access_cv
        factor = 1.0 if cv == 0 else float(self._rng.gamma(1.0 / cv**2, cv**2))
        return (self.media[node], self.hosts[node], plan.read_accesses * self.bytes_per_access * factor)

    def data_flow(self, plan: SplitPlan, node: int, dst: str) -> tuple[str, str, float]:
        """The flow moving the read's data from the medium of `node` to `dst`."""
        return (self.media[node], dst, plan.read_bytes)

    def finish_read(self, plan: SplitPlan, node: int, start_s: float) -> bool:
        """The read started at `start_s` from `node` landed: counted; False where the node failed
        while it ran (its bytes are wasted: read again, with the next attempt number)."""
        self.active[node] -= 1
        self.reads += 1
        self.bytes_read += plan.read_bytes
        if node in self.down or self.last_failure_s.get(node, -1.0) >= start_s:
            self.bytes_wasted += plan.read_bytes
            self.retries += 1
            return False
        return True


@dataclass
class Split:
    id: int
    partition: int
    start: int
    end: int
    plan: SplitPlan
    owner: tuple = ()  # (worker index, incarnation)
    delivered: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    left: int = 0  # batches not yet delivered by the worker processing it
    processed: simpy.Event | None = None  # succeeds when the last of them is delivered


class Master:
    def __init__(self, sim, data, ledger: SampleLedger) -> None:
        self.sim, self.data, self.ledger = sim, data, ledger
        self.queue: deque[tuple[int, int, int]] = deque()  # requeued (partition, start, end)
        self.next_partition = 0
        self.outstanding: dict[int, Split] = {}
        self._wakeup = sim.env.event()

    def take(self, owner: tuple) -> Split | simpy.Event | None:
        """The next split for `owner`; None when all work is done; or, while no split is left but
        some are outstanding (they may be requeued), the event to wait for before asking again."""
        if self.queue:
            partition, start, end = self.queue.popleft()
        elif self.next_partition < self.data.partitions:
            partition = self.next_partition
            self.next_partition += 1
            start, end = self.data.partition_range(partition)
            self.ledger.issue(start, end)
        elif not self.outstanding:
            return None
        else:
            return self._wakeup
        plan = self.data.plan(partition, start, end)
        split = Split(
            self.sim.next_id("split"), partition, start, end, plan, owner, np.zeros(len(plan.batches), dtype=bool)
        )
        self.outstanding[split.id] = split
        return split

    def give_back(self, split: Split) -> None:
        """A split taken by a worker that died before starting it goes back untouched."""
        if self.outstanding.pop(split.id, None) is not None:
            self.queue.appendleft((split.partition, split.start, split.end))
            self._notify()

    def delivered(self, split: Split, index: int) -> None:
        batch = split.plan.batches[index]
        split.delivered[index] = True
        self.ledger.deliver(batch.start, batch.end)

    def completed(self, split: Split) -> None:
        self.outstanding.pop(split.id, None)
        self._notify()

    def undelivered(self, split: Split) -> list[tuple[int, int]]:
        done = [(b.start, b.end) for b, d in zip(split.plan.batches, split.delivered) if d]
        return subtract(split.start, split.end, done)

    def requeue_owner(self, owner: tuple) -> int:
        """Requeue the undelivered ranges of every split `owner` holds; returns the samples requeued."""
        samples = 0
        for split in [s for s in self.outstanding.values() if s.owner == owner]:
            del self.outstanding[split.id]
            for a, b in self.undelivered(split):
                self.queue.append((split.partition, a, b))
                samples += b - a
        self.ledger.requeue(samples)
        self._notify()
        return samples

    def pending_ranges(self) -> list[tuple[int, int]]:
        ranges = [(a, b) for _, a, b in self.queue]
        for split in self.outstanding.values():
            ranges.extend(self.undelivered(split))
        return ranges

    def _notify(self) -> None:
        """Wake the split loops waiting for work (nothing to do where none waits: an event without
        callbacks changes nothing when processed)."""
        event = self._wakeup
        if event.callbacks:
            self._wakeup = self.sim.env.event()
            event.succeed()


class Credits:
    """Free trainer-buffer slots. A freed slot goes to the waiting request of the worker holding the
    fewest slots for batches in flight (first come among equals), as trainers pull from all
    workers in turn rather than letting one worker's queue take every slot. Requests queue per
    worker; a heap of (slots held, sequence, worker) holds each worker's oldest, re-pushed when
    either changes (stale entries are skipped): the order of a scan of every waiting request."""

    def __init__(self, env) -> None:
        self.env = env
        self.free: deque[int] = deque()
        self.queues: dict[object, deque] = {}  # worker key -> deque of (sequence, event)
        self.held: dict[object, int] = {}
        self._heap: list[tuple[int, int, object]] = []
        self._seq = 0

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def put(self, trainer: int, last: bool = False) -> None:
        """A slot of `trainer`'s buffer is free. `last`: the put is the last thing the running
        callback does, so a grant is its last thing too (`CountingEnvironment.succeed_last`)."""
        self.free.append(trainer)
        self._grant(last)

    def get(self, key):
        event = self.env.event()
        self._seq += 1
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = deque()
        queue.append((self._seq, event))
        if len(queue) == 1:
            heapq.heappush(self._heap, (self.held.get(key, 0), self._seq, key))
        self._grant()
        return event

    def release(self, key) -> None:
        """The worker's batch in flight landed (or was dropped)."""
        held = self.held[key] = self.held[key] - 1
        queue = self.queues.get(key)
        if queue:
            heapq.heappush(self._heap, (held, queue[0][0], key))
            if len(self._heap) > 4 * len(self.queues) + 64:
                self._prune()

    def _prune(self) -> None:
        """Drop stale heap entries (bounded memory): one entry per waiting worker, as it is now."""
        self._heap = [(self.held.get(k, 0), q[0][0], k) for k, q in self.queues.items() if q]
        heapq.heapify(self._heap)

    def _grant(self, last: bool = False) -> None:
        heap, free = self._heap, self.free
        while free and heap:
            held, seq, key = heapq.heappop(heap)
            queue = self.queues[key]
            if not queue or queue[0][0] != seq or self.held.get(key, 0) != held:
                continue  # stale candidate
            _, event = queue.popleft()
            self.held[key] = held + 1
            if queue:
                heapq.heappush(heap, (held + 1, queue[0][0], key))
            trainer = free.popleft()
            if last and not free:  # the loop ends here: the grant is the caller's last thing
                self.env.succeed_last(event, trainer)
            else:
                event.succeed(trainer)


class Trainer:
    def __init__(
        self,
        sim,
        index: int,
        nodes: list[str],
        demand_samples_per_s: float,
        buffer_batches: int,
        credits: Credits,
        window: Window,
        network=None,
        step_flows=None,
    ) -> None:
        self.sim, self.index, self.nodes = sim, index, nodes
        self.batch_name = f"batch ->h{index}"  # the name of a batch sent to it (a span's)
        self.network = network
        self.step_flows = step_flows  # batch -> the (src, dst, bytes) flows its step moves, or None
        self.demand_samples_per_s = demand_samples_per_s
        self.capacity = buffer_batches
        self.buffer = LeanStore(sim.env)
        self.credits = credits
        self.window = window
        self.stall_s = 0.0  # inside the window
        self.stall_total_s = 0.0  # whole run
        self.samples = 0  # trained inside the window
        self.bytes_received = 0.0
        self.waiting_since: float | None = None
        self._node = 0
        self._level_area = 0.0
        self._level_t = 0.0
        self._name = f"h{index}"  # its spans' component
        self._step_start = self._computed = 0.0  # the step in progress: its start, its compute's end
        self._samples = 0

    def next_node(self) -> str:
        self._node = (self._node + 1) % len(self.nodes)
        return self.nodes[self._node]

    def deliver(self, batch: BatchPlan) -> None:
        self._account_level()
        self.bytes_received += batch.bytes_out
        self.buffer.add(batch)

    def level_area(self) -> float:
        """Integral of buffered batches over time so far (for time-averaged fill levels)."""
        self._account_level()
        return self._level_area

    def stall_so_far_s(self) -> float:
        ongoing = self.sim.now - self.waiting_since if self.waiting_since is not None else 0.0
        return self.stall_total_s + ongoing

    def _account_level(self) -> None:
        now = self.sim.env.now
        self._level_area += len(self.buffer.items) * (now - self._level_t)
        self._level_t = now

    def start(self) -> None:
        """Train on batches from the buffer, one after another: a state machine that does event for
        event what a process running that loop would (sim/workloads/ingestion/lane.py)."""
        self.sim.env.start_machine(self._wait)

    def _wait(self, _event: simpy.Event | None = None) -> None:
        """Take the next batch, waiting (a data stall) while the buffer is empty."""
        self.waiting_since = self.sim.env.now
        self._account_level()
        batch = self.buffer.take_now(self)
        if batch is None:
            self.buffer.get().callbacks.append(self._got)
            return
        self._train(batch)

    def _got(self, event: simpy.Event) -> None:
        self._account_level()  # (taken at once: no time passed, nothing to add)
        self._train(event._value)  # type: ignore[attr-defined]

    def _train(self, batch: BatchPlan) -> None:
        env, window = self.sim.env, self.window
        now = env.now
        start, self.waiting_since = self.waiting_since, None
        if now > start:  # type: ignore[operator]
            self.stall_total_s += now - start
            self.stall_s += window.overlap(start, now)
            self.sim.recorder.span(self._name, "trainer", "data stall", start, now, 0.0, 0.0, "stall")  # `sim.span`
        self._step_start = env.now
        self._samples = batch.end - batch.start
        compute_s = self._samples / self.demand_samples_per_s
        flows = self.step_flows(batch) if self.step_flows is not None else None
        if not flows:
            # the step's end first, then the freed slot, as the last thing (a grant processed in
            # place where it would be the next event: `Credits.put`); the same order of events as
            # the freed slot first, as the step ends later (compute_s > 0: a batch has samples)
            env.timeout(compute_s).callbacks.append(self._trained)
            self.credits.put(self.index, last=True)
        else:  # the step also waits for its copies / own traffic (overlapped with its compute)
            self.credits.put(self.index)
            self._computed = self._step_start + compute_s
            done = self.sim.all_of([env.timeout(compute_s), self.network.transfer_many(flows, name="trainer step")])
            done.callbacks.append(self._trained_after_flows)

    def _trained_after_flows(self, event: simpy.Event) -> None:
        now, computed = self.sim.env.now, self._computed
        if now > computed:  # the GPUs waited for the step's data: stall too
            self.stall_total_s += now - computed
            self.stall_s += self.window.overlap(computed, now)
        self._trained(event)

    def _trained(self, _event: simpy.Event) -> None:
        now, window = self.sim.env.now, self.window
        if window.start_s <= now <= window.end_s:
            self.samples += self._samples
        self.sim.recorder.span(self._name, "trainer", "train step", self._step_start, now, 0.0, 0.0, "compute")
        self._wait()

    def close(self) -> None:
        """Count a stall still in progress when the run ends."""
        if self.waiting_since is not None:
            self.stall_s += self.window.overlap(self.waiting_since, self.sim.now)
            self.stall_total_s += self.sim.now - self.waiting_since
            self.waiting_since = self.sim.now
