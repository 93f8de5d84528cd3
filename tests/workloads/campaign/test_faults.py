"""Failures, checkpoints and restarts over long horizons (kind: training_campaign, sim/workloads/campaign/faults.py), and
stragglers (hardware.stragglers, sim/cluster/stragglers.py): hand-checked timelines, rates, invariants,
Young-Daly, and straggler delays against closed forms."""

import math

import pytest

from sim.errors import ScenarioError
from sim.network.collectives import collective
from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads.campaign.faults import FailureCause, daly_s, young_daly_s
from tests.conftest import make_cluster

HOUR, DAY = 3600.0, 86400.0


def campaign(**workload):
    """A training campaign on one 8-GPU host. Storage: 8 servers of 1 GB/s, so each GPU's 1 GB shard
    takes 1 s to write and 1 s to read back (plus microseconds of latency)."""
    base = {
        "kind": "training_campaign",
        "iteration_s": 10.0,
        "horizon": 200.0,
        "replicas": 1,
        "checkpoint": {"interval": 30.0, "bytes_per_gpu": 1e9},
        "storage": {"bandwidth": "8 GB/s", "servers": 8, "latency": 0},
        "restart": {"detection": 5.0, "restart": 20.0},
        "faults": [],
    }
    base.update(workload)
    return scenario_from_dict({"name": "t", "hardware": {"gpus_per_node": 8, "nodes": 1}, "workload": base})


def test_checkpoint_write_and_restore_are_flows_to_storage():
    m = run(campaign()).metrics
    assert m["checkpoint_write_s"] == pytest.approx(1.0, rel=1e-4)
    assert m["restore_s"] == pytest.approx(1.0, rel=1e-4)
    assert m["checkpoint_stall_s"] == m["checkpoint_write_s"]  # blocking: the job waits for the write


def test_no_failures_costs_only_checkpoints():
    m = run(campaign()).metrics
    w = m["checkpoint_write_s"]
    cycles = math.floor(200 / (30 + w))  # 6 full cycles, then 14 s of compute
    assert m["checkpoints"] == cycles
    assert m["checkpoint_overhead_s"] == pytest.approx(cycles * w)
    assert m["effective_training_time_fraction"] == pytest.approx((200 - cycles * w) / 200)
    assert m["interruptions"] == 0 and m["lost_work_s"] == 0


def test_one_failure_by_hand():
    m = run(campaign(faults=[{"cause": "gpu", "at": [100.0]}])).metrics
    w, r = m["checkpoint_write_s"], m["restore_s"]
    cycle = 30 + w
    lost = 100 - 3 * cycle  # 3 checkpoints done by t = 3 x cycle, then 7 s of compute lost
    down = 5 + 20 + r  # detection + restart + restore
    tail = 200 - (100 + down) - 2 * cycle  # 2 more cycles, then compute until the horizon
    assert m["interruptions"] == 1 and m["unexpected_interruptions"] == 1
    assert m["lost_work_s"] == pytest.approx(lost)
    assert m["recovery_s"] == pytest.approx(down)
    assert m["checkpoints"] == 5
    assert m["checkpoint_overhead_s"] == pytest.approx(5 * w)
    assert m["useful_training_s"] == pytest.approx(90 + 60 + tail)
    assert m["effective_training_time_fraction"] == pytest.approx((90 + 60 + tail) / 200)


def test_a_failure_during_recovery_starts_it_over():
    m = run(campaign(faults=[{"cause": "gpu", "at": [100.0, 110.0]}])).metrics
    r = m["restore_s"]
    assert m["interruptions"] == 2
    assert m["recovery_s"] == pytest.approx(10 + (25 + r))
    assert m["lost_work_s"] == pytest.approx(100 - 3 * (30 + m["checkpoint_write_s"]))  # nothing more to lose


def test_planned_maintenance_drains_to_a_checkpoint():
    m = run(campaign(faults=[{"cause": "maintenance", "at": [100.0], "planned": True}])).metrics
    w, r = m["checkpoint_write_s"], m["restore_s"]
    assert m["planned_interruptions"] == 1 and m["lost_work_s"] == 0
    assert m["recovery_s"] == pytest.approx(20 + r)  # no detection
    # the drain writes one more checkpoint: 3 cycles, the drain, then 2 cycles after the restart
    assert m["checkpoint_overhead_s"] == pytest.approx(6 * w)


def test_async_checkpoint_counts_only_once_written():
    def lost_at(t):
        m = run(
            campaign(
                checkpoint={"interval": 30.0, "bytes_per_gpu": 1e9, "mode": "async"},
                faults=[{"cause": "gpu", "at": [t]}],
            )
        ).metrics
        return m, m["checkpoint_snapshot_s"]

    m, s = lost_at(30.5)  # the first checkpoint's write (1 s after the snapshot) has not landed
    assert 0 < s < 0.1 and m["checkpoint_stall_s"] == s  # the job stalls only for the snapshot
    assert m["lost_work_s"] == pytest.approx(30.5 - s)
    m, s = lost_at(40.0)  # it has: only the 10 s since the snapshot are lost
    assert m["lost_work_s"] == pytest.approx(40.0 - 30.0 - s)


def test_time_accounting_adds_up_and_failure_counts_match_rates():
    rate = 1 / 500.0
    m = run(
        campaign(
            horizon=50_000.0,
            replicas=24,
            faults=[{"cause": "hw", "mtbf": 1000.0, "per": "job"}, {"cause": "sw", "count": 50, "period": 50_000.0}],
        )
    ).metrics  # 1 per 1000 s
    expected = rate * 50_000  # Poisson: 100 per replica
    assert m["expected_interruptions"] == pytest.approx(expected)
    assert abs(m["interruptions"] - expected) < 4 * math.sqrt(expected / 24)
    assert m["interruptions_by_cause"]["hw"] + m["interruptions_by_cause"]["sw"] == pytest.approx(m["interruptions"])
    total = m["useful_training_s"] + m["lost_work_s"] + m["checkpoint_overhead_s"] + m["recovery_s"]
    assert total == pytest.approx(50_000.0)
    assert m["effective_training_time_fraction_std"] > 0
    assert len(m["effective_training_time_fraction_per_replica"]) == 24
    lo, hi = m["effective_training_time_fraction_ci95"]
    assert lo < m["effective_training_time_fraction"] < hi


def test_rates_from_counts_scale_with_job_size_and_mtbf_with_units():
    per_16k = FailureCause(cause="gpu", count=148, period=54 * DAY, reference_gpus=16384)
    assert per_16k.rate_per_s(8192, 8) == pytest.approx(148 / (54 * DAY) / 2)
    per_host = FailureCause(cause="host", mtbf=1e6, per="host")
    assert per_host.rate_per_s(64, 8) == pytest.approx(8 / 1e6)


def test_best_interval_is_near_young_daly_when_checkpoints_are_cheap():
    m = run(
        campaign(
            iteration_s=1.0,
            horizon=100_000.0,
            replicas=12,
            checkpoint={
                "interval": "young-daly",
                "bytes_per_gpu": 1e9,
                "compare_intervals": [10.0, 25.0, 140.0, 400.0],
            },
            faults=[{"cause": "hw", "mtbf": 2000.0}],
        )
    ).metrics
    c, mtbf = m["checkpoint_stall_s"], 2000.0
    assert m["young_daly_interval_s"] == pytest.approx(young_daly_s(c, mtbf)) == pytest.approx(math.sqrt(2 * c * mtbf))
    assert m["checkpoint_interval_s"] == math.ceil(m["young_daly_interval_s"])  # whole iterations
    scan = {row["interval_s"]: row["effective_training_time_fraction"] for row in m["interval_scan"]}
    assert max(scan, key=scan.get) not in (10.0, 400.0)
    # first-order waste: checkpoint stall per interval + (half an interval + downtime) per failure
    tau, down = m["checkpoint_interval_s"], 25 + m["restore_s"]
    first_order = 1 - c / (tau + c) - (tau / 2 + down) / mtbf
    assert m["effective_training_time_fraction"] == pytest.approx(first_order, abs=0.01)
    assert daly_s(c, mtbf) < young_daly_s(c, mtbf)


@pytest.mark.parametrize(
    "fault, words",
    [
        ({"cause": "x", "count": 3}, "count needs period"),
        ({"cause": "x", "count": 3, "period": 10, "mtbf": 5}, "exactly one of"),
        ({"cause": "x", "mtbf": "ten"}, "not a valid seconds"),
    ],
)
def test_bad_fault_specs_are_one_line_errors(fault, words):
    with pytest.raises(ScenarioError) as err:
        campaign(faults=[fault])
    assert "workload.faults.0" in str(err.value) and words in str(err.value) and "\n" not in str(err.value)


def test_young_daly_needs_a_failure_rate():
    with pytest.raises(ScenarioError, match="workload.checkpoint.interval"):
        campaign(checkpoint={"interval": "young-daly", "bytes_per_gpu": 1e9})


# ---------------------------------------------------------------------------------------------
# stragglers


def test_a_slow_nic_delays_a_ring_all_reduce_by_its_bandwidth_factor():
    n, S, f = 4, 256 * 2**20, 0.25
    times = []
    for stragglers in ([], [{"gpu": 2, "bandwidth_factor": f}]):
        c = make_cluster(nodes=n, stragglers=stragglers)
        proc, _ = collective(c.network, "all_reduce", c.nodes(range(n)), S, "ring")
        c.sim.env.run(until=proc)
        times.append(c.sim.now)
    B = c.hardware.nic.achieved_bytes_per_s
    latency = times[0] - 2 * (n - 1) / n * S / B
    # every ring step waits for the flow through the slow NIC: the bandwidth term grows by 1/f
    assert times[1] == pytest.approx(2 * (n - 1) / n * S / (f * B) + latency, rel=1e-6)


def test_a_slow_gpu_delays_every_lock_step_that_waits_for_it():
    slow = 1.25
    c = make_cluster(nodes=4, stragglers=[{"gpu": 3, "compute_slowdown": slow}])
    sim = c.sim

    def step():  # compute 10 ms on every GPU, then an all-reduce
        yield sim.all_of([d.run("gemm", 0.010) for d in c.devices])
        t_compute = sim.now
        proc, _ = collective(c.network, "all_reduce", c.nodes(range(4)), 64 * 2**20, "ring")
        yield proc
        return t_compute, sim.now - t_compute

    t_compute, t_comm = sim.env.run(until=sim.process(step()))
    healthy = make_cluster(nodes=4)
    proc, _ = collective(healthy.network, "all_reduce", healthy.nodes(range(4)), 64 * 2**20, "ring")
    healthy.sim.env.run(until=proc)
    # the step = the slowest GPU's compute + the all-reduce (which no GPU can start before it)
    assert t_compute == pytest.approx(0.010 * slow)
    assert t_comm == pytest.approx(healthy.sim.now)
    assert c.devices[3].busy_s["compute"] == pytest.approx(0.010 * slow)
    assert c.devices[0].busy_s["compute"] == pytest.approx(0.010)


def test_bad_stragglers_are_errors():
    with pytest.raises(ScenarioError, match="hardware.stragglers.0.gpu"):
        make_cluster(nodes=2, stragglers=[{"gpu": 5, "compute_slowdown": 2}])
    with pytest.raises(ScenarioError, match="compute_slowdown > 1 or bandwidth_factor < 1"):
        make_cluster(nodes=2, stragglers=[{"gpu": 1}])
    with pytest.raises(ScenarioError, match="no such link"):
        make_cluster(nodes=2, stragglers=[{"link": "a->b", "bandwidth_factor": 0.5}])


# ---------------------------------------------------------------------------------------------
# the iteration time from a simulated training run

TRAINING = {
    "model": "llama3-8b",
    "parallelism": {"tp": 8, "dp": 2},
    "sequence_length": 4096,
    "global_batch_tokens": 16384,
    "iterations": 1,
}


def test_the_iteration_time_comes_from_one_simulated_training_run():
    def campaign_on_two_hosts(stragglers=()):
        return scenario_from_dict(
            {
                "name": "t",
                "hardware": {"gpus_per_node": 8, "nodes": 2, "stragglers": list(stragglers)},
                "workload": {
                    **campaign().workload.model_dump(exclude={"iteration_s"}),
                    "horizon": 2000.0,
                    "training": TRAINING,
                },
            }
        )

    training_alone = scenario_from_dict(
        {"name": "t", "hardware": {"gpus_per_node": 8, "nodes": 2}, "workload": {"kind": "training", **TRAINING}}
    )
    m = run(campaign_on_two_hosts()).metrics
    assert m["iteration_from"] == "training"
    assert m["iteration_s"] == pytest.approx(run(training_alone).metrics["iteration_s"])
    assert m["training"]["mfu"] > 0
    # a straggling GPU slows every iteration (by at most its factor: communication is not slowed), so
    # fewer tokens fit in the same useful time
    slow = run(campaign_on_two_hosts([{"gpu": 3, "compute_slowdown": 1.3}])).metrics
    assert 1.05 * m["iteration_s"] < slow["iteration_s"] <= 1.3 * m["iteration_s"]
    assert slow["useful_tokens"] < m["useful_tokens"] / 1.05


def test_training_or_iteration_s_and_training_errors_name_their_path():
    with pytest.raises(ScenarioError, match="either training"):
        campaign(iteration_s=None)
    with pytest.raises(ScenarioError, match="workload.training.parallelism"):
        campaign(iteration_s=None, training={**TRAINING, "parallelism": {"tp": 8, "dp": 4}})
