"""Failures, checkpoints and restarts of a long training job, simulated event by event.

A job of many GPUs runs iterations of known length (`iteration_s`, from one simulated iteration);
what happens over days is decided by rarer events, so the timeline advances from event to event
(iterations-between-events), never kernel by kernel:

- Failure processes (`FailureCause`): each cause - faulty GPU, HBM, NIC, switch/cable, software bug,
  planned maintenance ... - is an independent Poisson process with a rate given as `count` over a
  `period` (optionally measured on `reference_gpus` GPUs and scaled to this job's GPUs) or as an
  `mtbf` per GPU, per host or per job; `at` gives scripted failure times instead (what-if, tests).
  Each cause draws from its own random substream, so adding a cause does not move the others.
- Checkpoint cycles: `iterations_per_checkpoint` iterations, then a checkpoint. `blocking`: the job
  stalls for the whole write to storage; `async`: it stalls only for the snapshot into host memory,
  the write proceeds in the background, and the checkpoint only counts once the write has landed
  (a failure before that falls back to the previous one; the next snapshot waits for the write).
- An unexpected failure stops the job: the work since the last durable checkpoint is lost; the job
  is down for `detection + restart + restore` (restore = reading the checkpoint back). A failure
  during that downtime starts the recovery over. A planned interruption drains first: it writes a
  checkpoint (no work lost, the write counted as checkpoint time), then restarts and restores;
  planned events that fall into a downtime are absorbed.

Each `Replica` is one history (one job process + its failure processes) on the shared clock; many
replicas in one simulation give the spread over seeds. Time accounting per replica, exact:
compute_s + checkpoint_s + recovery_s = horizon; useful_s = compute_s - lost_work_s;
effective_training_time_fraction = useful_s / horizon (work at the horizon that is not yet
checkpointed counts as useful: the job goes on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import simpy
from pydantic import Field, model_validator

from hardware_models.strict import StrictModel
from hardware_models.units import Bytes, Seconds


class FailureCause(StrictModel):
    cause: str = Field(min_length=1, description="label, e.g. 'faulty GPU'")
    count: float | None = Field(None, ge=0, description="failures observed over `period`")
    period: Seconds | None = Field(None, gt=0, description="observation period of `count`")
    reference_gpus: int | None = Field(None, ge=1, description="GPUs `count` was observed on (scales to this job)")
    mtbf: Seconds | None = Field(None, gt=0, description="mean time between failures of one unit (`per`)")
    per: Literal["gpu", "host", "job"] = Field("job", description="the unit an `mtbf` applies to")
    at: list[Seconds] | None = Field(None, description="scripted failure times instead of a random process")
    planned: bool = Field(False, description="planned maintenance: drain to a checkpoint, lose no work")
    restart: Seconds | None = Field(None, ge=0, description="restart time after this cause (default: restart.restart)")

    @model_validator(mode="after")
    def _one_rate(self) -> FailureCause:
        given = [self.count is not None, self.mtbf is not None, self.at is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of count (with period), mtbf (with per) or at (times)")
        if self.count is not None and self.period is None:
            raise ValueError("count needs period, e.g. count: 148, period: '54 d'")
        if self.count is None and (self.period is not None or self.reference_gpus is not None):
            raise ValueError("period and reference_gpus go with count")
        return self

    def rate_per_s(self, gpus: int, gpus_per_node: int) -> float:
        """Failures per second of a job on `gpus` GPUs (0 for scripted causes)."""
        if self.count is not None:
            scale = gpus / self.reference_gpus if self.reference_gpus else 1.0
            return self.count / self.period * scale
        if self.mtbf is not None:
            units = {"gpu": gpus, "host": gpus / gpus_per_node, "job": 1.0}[self.per]
            return units / self.mtbf
        return 0.0


class Checkpoint(StrictModel):
    interval: Seconds | Literal["young-daly"] = Field(
        "young-daly",
        description="training time between checkpoints (rounded up to whole iterations), "
        "or young-daly: sqrt(2 x checkpoint cost x job MTBF)",
    )
    bytes: Bytes | None = Field(None, gt=0, description="whole checkpoint (model + optimizer state)")
    bytes_per_gpu: Bytes | None = Field(None, gt=0, description="or: each GPU's shard")
    mode: Literal["blocking", "async"] = "blocking"
    compare_intervals: list[Seconds] = Field(
        default_factory=list, description="also run these intervals on the same failure histories"
    )

    @model_validator(mode="after")
    def _size(self) -> Checkpoint:
        if (self.bytes is None) == (self.bytes_per_gpu is None):
            raise ValueError("give either bytes (the whole checkpoint) or bytes_per_gpu")
        if any(i <= 0 for i in self.compare_intervals):
            raise ValueError("compare_intervals must be > 0")
        if isinstance(self.interval, float) and self.interval <= 0:
            raise ValueError("interval must be > 0")
        return self

    def total_bytes(self, gpus: int) -> float:
        return self.bytes if self.bytes is not None else self.bytes_per_gpu * gpus


class Restart(StrictModel):
    detection: Seconds = Field(ge=0, description="failure -> the job is known to be down (timeouts, health checks)")
    restart: Seconds = Field(
        ge=0, description="reschedule, relaunch, rendezvous and NCCL init (the checkpoint read is simulated on top)"
    )


@dataclass(frozen=True)
class CyclePlan:
    """The deterministic schedule between events, in seconds."""

    iteration_s: float
    iterations_per_checkpoint: int
    stall_s: float  # job stalled per checkpoint: the write (blocking) or the snapshot (async)
    write_s: float  # checkpoint write to storage
    restore_s: float  # checkpoint read back on restart
    detection_s: float
    restart_s: float
    mode: str

    @property
    def compute_s(self) -> float:
        return self.iterations_per_checkpoint * self.iteration_s

    def recovery_s(self, restart_s: float | None, planned: bool) -> float:
        return (
            (0.0 if planned else self.detection_s)
            + (self.restart_s if restart_s is None else restart_s)
            + self.restore_s
        )


def iterations_for(interval_s: float, iteration_s: float) -> int:
    return max(1, math.ceil(interval_s / iteration_s - 1e-9))


@dataclass
class Tally:
    compute_s: float = 0.0
    checkpoint_s: float = 0.0
    recovery_s: float = 0.0
    lost_work_s: float = 0.0
    checkpoints: int = 0
    unexpected: int = 0
    planned: int = 0
    absorbed_planned: int = 0
    by_cause: dict[str, int] = field(default_factory=dict)


class Replica:
    """One job history: a job process interrupted by its failure processes."""

    def __init__(self, env: simpy.Environment, plan: CyclePlan, horizon_s: float, trace=None) -> None:
        self.env, self.plan, self.horizon_s = env, plan, horizon_s
        self.trace = trace  # None, or trace(name, start_s, end_s, category): the phases as spans
        self.down_cause = ""
        self.tally = Tally()
        self.uncommitted_s = 0.0  # compute since the last durable checkpoint
        self.pending: tuple[float, float] | None = None  # async: (compute it covers, durable at)
        self.phase, self.phase_start = "cycle", float(env.now)
        self.down_s, self.drain_s = 0.0, 0.0  # next downtime and its drain (checkpoint) part
        self.proc = env.process(self._job())

    # ---- failure processes -----------------------------------------------------------------
    def add_cause(self, cause: FailureCause, times) -> None:
        """Failures of `cause` at these times (seconds from the start, sorted)."""
        if len(times):
            self.env.process(self._failures(cause, times))

    def _failures(self, cause: FailureCause, times):
        t_prev = 0.0
        for t in times:
            if t >= self.horizon_s:
                return
            yield self.env.timeout(t - t_prev)
            t_prev = t
            if cause.planned and self.phase == "down":
                self.tally.absorbed_planned += 1  # maintenance done while the job is down anyway
            else:
                self.proc.interrupt(cause)

    # ---- the job ------------------------------------------------------------------------------
    def _job(self):
        plan, env = self.plan, self.env
        while True:
            try:
                if self.down_s > 0:
                    self.phase, self.phase_start = "down", env.now
                    yield env.timeout(self.down_s)
                    self._account_down(self.down_s)
                    self.down_s = self.drain_s = 0.0
                self.phase, self.phase_start = "cycle", env.now
                wait_s = 0.0
                if self.pending is not None:  # async: the snapshot waits for the previous write
                    wait_s = max(0.0, self.pending[1] - (env.now + plan.compute_s))
                yield env.timeout(plan.compute_s + wait_s + plan.stall_s)
                self._end_cycle()
            except simpy.Interrupt as intr:
                self._on_failure(intr.cause)

    def _end_cycle(self) -> None:
        plan, tally, now = self.plan, self.tally, self.env.now
        self._account_cycle(now - self.phase_start)
        tally.checkpoints += 1
        self.uncommitted_s += plan.compute_s
        if plan.mode == "blocking":
            self.uncommitted_s = 0.0
        else:
            self._durable_check(now)
            self.pending = (self.uncommitted_s, now + plan.write_s)

    def _durable_check(self, now: float) -> None:
        if self.pending is not None and self.pending[1] <= now:
            self.uncommitted_s -= self.pending[0]
            self.pending = None

    def _account_down(self, elapsed: float) -> None:
        drained = min(elapsed, self.drain_s)
        self.tally.checkpoint_s += drained
        self.tally.recovery_s += elapsed - drained
        self._mark(
            self.phase_start,
            drained,
            elapsed,
            ("drain checkpoint", "checkpoint"),
            (f"down: {self.down_cause}", f"fault:{self.down_cause}"),
        )

    def _account_cycle(self, elapsed: float) -> float:
        computed = min(elapsed, self.plan.compute_s)
        self.tally.compute_s += computed
        self.tally.checkpoint_s += elapsed - computed
        self._mark(self.phase_start, computed, elapsed, ("iterations", "useful"), ("checkpoint", "checkpoint"))
        return computed

    def _mark(self, start: float, split: float, elapsed: float, first: tuple, second: tuple) -> None:
        """Spans of a phase: (name, category) `first` over [start, start + split], `second` after it."""
        if self.trace is not None:
            if split > 0:
                self.trace(first[0], start, start + split, first[1])
            if elapsed > split:
                self.trace(second[0], start + split, start + elapsed, second[1])

    def _partial(self, now: float) -> None:
        """Account the phase in progress up to `now` (a failure or the horizon cut it)."""
        elapsed = now - self.phase_start
        if self.phase == "down":
            self._account_down(elapsed)
            return
        self.uncommitted_s += self._account_cycle(elapsed)

    def _on_failure(self, cause: FailureCause) -> None:
        """Stop: account what ran, lose the uncheckpointed work (unless planned), set the downtime."""
        now, tally, plan = self.env.now, self.tally, self.plan
        self._partial(now)
        self._durable_check(now)
        tally.by_cause[cause.cause] = tally.by_cause.get(cause.cause, 0) + 1
        self.down_cause = cause.cause
        if cause.planned:  # drain: write a checkpoint first, nothing lost
            tally.planned += 1
            self.drain_s = plan.write_s + (plan.stall_s if plan.mode == "async" else 0.0)
        else:
            tally.unexpected += 1
            tally.lost_work_s += self.uncommitted_s
            self.drain_s = 0.0
        self.uncommitted_s, self.pending = 0.0, None
        self.down_s = self.drain_s + plan.recovery_s(cause.restart, planned=cause.planned)

    def finish(self) -> Tally:
        """Account the phase running at the horizon (call once, at the horizon)."""
        self._partial(self.env.now)
        return self.tally


def failure_times(cause: FailureCause, rate_per_s: float, horizon_s: float, rng) -> np.ndarray:
    """The failure times of one cause within the horizon: scripted, or a Poisson process."""
    if cause.at is not None:
        return np.sort(np.array([t for t in cause.at if t < horizon_s], dtype=float))
    if rate_per_s <= 0:
        return np.zeros(0)
    chunk = max(16, int(rate_per_s * horizon_s * 1.5) + 16)
    times = np.cumsum(rng.exponential(1.0 / rate_per_s, chunk))
    while times[-1] < horizon_s:
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1.0 / rate_per_s, chunk))])
    return times[times < horizon_s]


def young_daly_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's (1974) first-order optimum interval: sqrt(2 C M)."""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's (2006) higher-order optimum: sqrt(2CM)[1 + sqrt(C/2M)/3 + C/(18M)] - C (C < 2M; else M)."""
    c, m = checkpoint_s, mtbf_s
    if c >= 2 * m:
        return m
    return math.sqrt(2 * c * m) * (1 + math.sqrt(c / (2 * m)) / 3 + c / (18 * m)) - c
