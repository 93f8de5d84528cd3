"""`kind: training_campaign` — a long training job under failures, checkpoints and restarts.

The job occupies the whole cluster (in a multi-job scenario: its hosts). Three things are simulated
on the cluster first, then the long horizon event by event (sim/workloads/campaign/faults.py):
1. the iteration time: one run of `training` (a `kind: training` workload, without the `kind`) on
   this cluster - its `iteration_s`, so hardware stragglers, the topology and the parallelism all
   count - or `iteration_s` as given (e.g. measured);
2. one checkpoint write: every GPU sends its shard (`checkpoint.bytes` / GPUs, or `bytes_per_gpu`)
   to a storage pool (`storage`: `servers` endpoints sharing `bandwidth`, attached to the top of
   the fabric) as flows on the network, so the storage bandwidth, the NICs and the fabric decide
   the write time; with `mode: async` also the snapshot (each GPU's shard over its host link into
   host memory), which is all the job stalls for;
3. one restore: the same shards read back from storage.
Then `replicas` independent histories of the job over `horizon` run on the same clock: failure
processes per cause (`faults`, rates as counts over a period or MTBFs; random substream
`faults/{replica}/{cause}`), checkpoint cycles every `checkpoint.interval` of training (rounded up
to whole iterations, or `young-daly`), detection + restart + restore after each failure.
`checkpoint.compare_intervals` re-runs the same failure histories with other intervals (common
random numbers: the differences come from the interval, not from luck).

Metrics (means over replicas, with `_std`, `_ci95` and `_per_replica` for the key ones):
`interruptions` (unexpected + planned; `unexpected_interruptions`, `planned_interruptions`,
`interruptions_by_cause`), `effective_training_time_fraction` (useful training time / horizon),
`lost_work_s` (training time rolled back per replica), `checkpoint_overhead_s`, `recovery_s`,
`checkpoint_write_s`, `checkpoint_stall_s`, `restore_s`, `checkpoint_interval_s`,
`job_mtbf_s` (unexpected failures), `expected_interruptions` (rate x horizon),
`young_daly_interval_s` = sqrt(2 x stall x MTBF), `daly_interval_s`, and with compare_intervals
`interval_scan` (one row per interval; `delta_vs_best` and its standard error are paired over the
replicas' shared failure histories) and `best_checkpoint_interval_s`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from hardware_models.nic import LinkSpec
from hardware_models.strict import StrictModel
from hardware_models.topology import HostPool
from hardware_models.units import BytesPerS, Seconds
from sim.errors import ScenarioError
from sim.network.flow import FlowNetwork
from sim.workloads import training as training_workload
from sim.workloads.base import WorkloadBase
from sim.workloads.campaign.faults import (
    Checkpoint,
    CyclePlan,
    FailureCause,
    Replica,
    Restart,
    daly_s,
    failure_times,
    iterations_for,
    young_daly_s,
)

POOL = "ckpt-storage"
TRAINING_KEYS = (
    "iteration_s",
    "tokens_per_s",
    "tflop_per_s_per_gpu",
    "mfu",
    "bubble_fraction",
    "exposed_comm_fraction",
    "peak_memory_per_gpu_bytes",
)


class CheckpointStorage(StrictModel):
    bandwidth: BytesPerS = Field(gt=0, description="aggregate checkpoint storage bandwidth, each direction")
    servers: int = Field(64, ge=1, description="storage endpoints sharing it (assumption: spreads the load)")
    latency: Seconds = Field(1e-4, ge=0, description="per request (assumption: 100 us, networked flash)")


class Config(WorkloadBase):
    kind: Literal["training_campaign"]
    training: training_workload.Config | None = Field(
        None,
        description="the training job (kind: training fields); one run of it on this cluster gives the iteration time",
    )
    iteration_s: Seconds | None = Field(None, gt=0, description="or: the iteration time, given")
    horizon: Seconds = Field(gt=0, description="wall-clock span simulated, e.g. '54 d'")
    replicas: int = Field(8, ge=1, le=4096, description="independent failure histories (the spread over seeds)")
    checkpoint: Checkpoint
    storage: CheckpointStorage
    restart: Restart
    faults: list[FailureCause] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _training_kind(cls, data):
        if isinstance(data, dict) and isinstance(data.get("training"), dict) and "kind" not in data["training"]:
            data = {**data, "training": {**data["training"], "kind": "training"}}
        return data

    def check(self, hardware) -> None:
        if (self.training is None) == (self.iteration_s is None):
            raise ScenarioError(
                "give either training (a kind: training job, simulated once) or iteration_s", path="workload.training"
            )
        if self.training is not None:
            try:
                self.training.check(hardware)
            except ScenarioError as err:
                if err.path and err.path.startswith("workload."):
                    err.path = "workload.training." + err.path[len("workload.") :]
                raise
        names = [f.cause for f in self.faults]
        for i, f in enumerate(self.faults):
            if names.count(f.cause) > 1:
                raise ScenarioError("causes must have distinct names", path=f"workload.faults.{i}.cause", value=f.cause)
        if self.iteration_s is not None and self.iteration_s >= self.horizon:
            raise ScenarioError(
                f"must be shorter than the horizon ({self.horizon:.0f} s)",
                path="workload.iteration_s",
                value=self.iteration_s,
            )
        if self.checkpoint.interval == "young-daly" and not any(
            f.count or f.mtbf for f in self.faults if not f.planned
        ):
            raise ScenarioError(
                "young-daly needs unexpected failures with a rate (count or mtbf)",
                path="workload.checkpoint.interval",
                value="young-daly",
            )
        intervals = [i for i in [self.checkpoint.interval, *self.checkpoint.compare_intervals] if i != "young-daly"]
        shortest = max(min(intervals, default=1.0), self.iteration_s or 0.0)
        cycles = self.horizon / shortest * self.replicas * len(intervals or [1])
        if cycles > 1e8:
            raise ScenarioError(
                f"{cycles:.2g} checkpoint cycles to step through; use fewer replicas, longer "
                "intervals or a shorter horizon",
                path="workload.replicas",
                value=self.replicas,
            )

    def host_pools(self, hardware) -> list:
        nic = LinkSpec(
            name="checkpoint-storage",
            bandwidth=self.storage.bandwidth / self.storage.servers,
            latency=self.storage.latency,
            source="scenario: workload.storage",
        )
        return [HostPool(POOL, self.storage.servers, nic)]


# ---------------------------------------------------------------------------------------------
# one checkpoint write, snapshot and restore, as flows on the cluster


def _timed(sim, flows, name: str, network):
    start = sim.now
    if flows:
        yield network.transfer_many(flows, name=name)
    return sim.now - start


def measure_io(sim, cluster, config: Config):
    """Generator -> (write_s, snapshot_s, restore_s, bytes_per_gpu) of one checkpoint on this cluster."""
    per_gpu = config.checkpoint.total_bytes(cluster.num_gpus) / cluster.num_gpus
    servers = cluster.topology.pools[POOL]
    net = cluster.network
    if not isinstance(net, FlowNetwork):  # storage I/O is bandwidth sharing: always flows, even at scale
        net = FlowNetwork(sim, cluster.topology, cluster.hardware.topology.ecmp)
    to_storage = [(d.node, servers[i % len(servers)], per_gpu) for i, d in enumerate(cluster.devices)]
    snapshot_s = 0.0
    if config.checkpoint.mode == "async":
        to_host = [(d.node, f"h{d.host}/cpu", per_gpu) for d in cluster.devices]
        snapshot_s = yield from _timed(sim, to_host, "checkpoint snapshot", net)
    write_s = yield from _timed(sim, to_storage, "checkpoint write", net)
    restore_s = yield from _timed(sim, [(s, d, b) for d, s, b in to_storage], "checkpoint restore", net)
    return write_s, snapshot_s, restore_s, per_gpu


# ---------------------------------------------------------------------------------------------
# the campaign


def _summary(values) -> dict:
    from scipy import stats  # lazy: scipy.stats alone takes longer to import than a small run

    a = np.asarray(values, dtype=float)
    n = len(a)
    std = float(a.std(ddof=1)) if n > 1 else 0.0
    half = float(stats.t.ppf(0.975, n - 1) * std / np.sqrt(n)) if n > 1 else 0.0
    return {
        "mean": float(a.mean()),
        "std": std,
        "sem": std / np.sqrt(n) if n > 1 else 0.0,
        "ci95": [float(a.mean()) - half, float(a.mean()) + half],
        "min": float(a.min()),
        "max": float(a.max()),
    }


def simulate(sim, cluster, config: Config):
    gpus, gpn = cluster.num_gpus, cluster.hardware.gpus_per_node
    iteration_s, trained = config.iteration_s, None
    if config.training is not None:  # one simulated run of the training job
        trained = yield from training_workload.simulate(sim, cluster, config.training)
        iteration_s = trained["iteration_s"]
    write_s, snapshot_s, restore_s, per_gpu = yield from measure_io(sim, cluster, config)
    stall_s = snapshot_s if config.checkpoint.mode == "async" else write_s
    rates = [f.rate_per_s(gpus, gpn) for f in config.faults]
    unexpected_rate = sum(r for f, r in zip(config.faults, rates) if not f.planned)
    mtbf_s = 1.0 / unexpected_rate if unexpected_rate > 0 else float("inf")
    yd_s = young_daly_s(stall_s, mtbf_s) if unexpected_rate > 0 else None
    main_interval = yd_s if config.checkpoint.interval == "young-daly" else config.checkpoint.interval
    intervals = [main_interval] + [i for i in config.checkpoint.compare_intervals if i != main_interval]
    horizon = config.horizon
    histories = [
        [failure_times(f, r, horizon, sim.rng(f"faults/{k}/{f.cause}")) for f, r in zip(config.faults, rates)]
        for k in range(config.replicas)
    ]
    runs: dict[float, list[Replica]] = {}
    for interval in intervals:
        plan = CyclePlan(
            iteration_s,
            iterations_for(interval, iteration_s),
            stall_s,
            write_s,
            restore_s,
            config.restart.detection,
            config.restart.restart,
            config.checkpoint.mode,
        )
        runs[interval] = []
        for k, history in enumerate(histories):
            traced = interval == main_interval and k == 0  # replica 0's phases as spans (trace, timeline)
            trace = (
                (lambda name, t0, t1, cat: sim.span("job", "replica 0", name, t0, t1, category=cat)) if traced else None
            )
            replica = Replica(sim.env, plan, horizon, trace)
            for cause, times in zip(config.faults, history):
                replica.add_cause(cause, times)
            runs[interval].append(replica)
    yield sim.timeout(horizon)
    tallies = {i: [r.finish() for r in reps] for i, reps in runs.items()}
    metrics = {
        "iteration_s": iteration_s,
        "iteration_from": "training" if trained else "iteration_s",
        "gpus": gpus,
        "horizon_s": horizon,
        "replicas": config.replicas,
        "checkpoint_bytes": per_gpu * gpus,
        "checkpoint_bytes_per_gpu": per_gpu,
        "checkpoint_mode": config.checkpoint.mode,
        "checkpoint_write_s": write_s,
        "checkpoint_snapshot_s": snapshot_s,
        "checkpoint_stall_s": stall_s,
        "restore_s": restore_s,
        "detection_s": config.restart.detection,
        "restart_s": config.restart.restart,
        "job_mtbf_s": mtbf_s if unexpected_rate > 0 else None,
        "expected_interruptions": sum(rates) * horizon
        + sum(len(h[j]) for h in histories for j, f in enumerate(config.faults) if f.at is not None) / config.replicas,
        "young_daly_interval_s": yd_s,
        "daly_interval_s": daly_s(stall_s, mtbf_s) if unexpected_rate > 0 else None,
    }
    metrics.update(_interval_metrics(tallies[main_interval], main_interval, iteration_s, horizon, config))
    if trained is not None:
        metrics["training"] = {k: trained.get(k) for k in TRAINING_KEYS}
        metrics["useful_tokens"] = metrics["useful_training_s"] / iteration_s * config.training.tokens_per_iteration
    if len(intervals) > 1:
        scan = [_scan_row(tallies[i], i, iteration_s, horizon) for i in sorted(intervals)]
        best = max(scan, key=lambda row: row["effective_training_time_fraction"])
        best_eff = np.array(_fractions(tallies[best["interval_s"]], horizon))
        for row in scan:  # paired over replicas (same failure histories): much tighter than the sems
            delta = _summary(np.array(_fractions(tallies[row["interval_s"]], horizon)) - best_eff)
            row["delta_vs_best"], row["delta_vs_best_sem"] = delta["mean"], delta["sem"]
        metrics["interval_scan"] = scan
        metrics["best_checkpoint_interval_s"] = best["checkpoint_interval_s"]
        metrics["best_effective_training_time_fraction"] = best["effective_training_time_fraction"]
    return metrics


def _fractions(tallies, horizon: float) -> list[float]:
    return [(t.compute_s - t.lost_work_s) / horizon for t in tallies]


def _scan_row(tallies, interval: float, iteration_s: float, horizon: float) -> dict:
    eff = _summary(_fractions(tallies, horizon))
    k = iterations_for(interval, iteration_s)
    return {
        "interval_s": interval,
        "checkpoint_interval_s": k * iteration_s,
        "iterations_per_checkpoint": k,
        "effective_training_time_fraction": eff["mean"],
        "effective_training_time_fraction_sem": eff["sem"],
        "lost_work_s": float(np.mean([t.lost_work_s for t in tallies])),
        "checkpoint_overhead_s": float(np.mean([t.checkpoint_s for t in tallies])),
    }


def _interval_metrics(tallies, interval: float, iteration_s: float, horizon: float, config: Config) -> dict:
    k = iterations_for(interval, iteration_s)
    eff = _summary(_fractions(tallies, horizon))
    interruptions = _summary([t.unexpected + t.planned for t in tallies])
    lost = _summary([t.lost_work_s for t in tallies])
    causes = [f.cause for f in config.faults]
    return {
        "checkpoint_interval_s": k * iteration_s,
        "iterations_per_checkpoint": k,
        "interruptions": interruptions["mean"],
        "interruptions_std": interruptions["std"],
        "interruptions_per_replica": [t.unexpected + t.planned for t in tallies],
        "unexpected_interruptions": float(np.mean([t.unexpected for t in tallies])),
        "planned_interruptions": float(np.mean([t.planned for t in tallies])),
        "planned_absorbed": float(np.mean([t.absorbed_planned for t in tallies])),
        "interruptions_by_cause": {c: float(np.mean([t.by_cause.get(c, 0) for t in tallies])) for c in causes},
        "effective_training_time_fraction": eff["mean"],
        "effective_training_time_fraction_std": eff["std"],
        "effective_training_time_fraction_ci95": eff["ci95"],
        "effective_training_time_fraction_min": eff["min"],
        "effective_training_time_fraction_max": eff["max"],
        "effective_training_time_fraction_per_replica": _fractions(tallies, horizon),
        "lost_work_s": lost["mean"],
        "lost_work_s_std": lost["std"],
        "useful_training_s": float(np.mean([t.compute_s - t.lost_work_s for t in tallies])),
        "checkpoint_overhead_s": float(np.mean([t.checkpoint_s for t in tallies])),
        "recovery_s": float(np.mean([t.recovery_s for t in tallies])),
        "checkpoints": float(np.mean([t.checkpoints for t in tallies])),
    }
