"""Power, energy and cost (sim/energy/meter.py, sim/engine/activity.py, sim/engine/link_traffic.py,
hardware_models/power.py).

Hand-computed schedules use round power figures set through the scenario (inline specs and the
`hardware.power` block), so every expected joule below is arithmetic on those numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from hardware_models import catalog
from hardware_models.power import SitePower, capped_clock_fraction, capped_power_w
from hardware_models.topology import HostPool
from sim.cluster.cluster import Cluster
from sim.energy.meter import EnergyMeter
from sim.energy.plots import power_over_time
from sim.engine.activity import SpanActivity, union
from sim.engine.link_traffic import AdaptiveBins
from sim.engine.simulation import Simulation
from sim.errors import ScenarioError
from sim.runner import run
from sim.scenario.model import load_scenario
from sim.workloads import kinds
from tests.conftest import make_scenario

# GPU 100/500 W, NIC 10/30 W, one CPU socket 50/150 W (56 cores), chassis 200/400 W, DRAM 20/40 W,
# switch box 300/600 W, communicating GPUs at 25% of their dynamic range. NVLink and PCIe: 0 W.
ROUND = dict(
    gpu={"base": "h100-sxm", "power": {"idle": 100, "max": 500}},
    nic={"base": "cx7-400g-rdma", "power": {"idle": 10, "max": 30}},
    host_cpu={"base": "xeon-8480", "power": {"idle": 50, "max": 150}},
    host_cpus=1,
    power={
        "gpu_host": {"idle": 200, "max": 400},
        "host_dram": {"idle": 20, "max": 40},
        "switch": {"base": "switch-51t", "power": {"idle": 300, "max": 600}},
        "gpu_comm_activity": 0.25,
    },
)
IDLE_ONE_HOST_ONE_GPU_W = 100 + 50 + 20 + 200 + 10 + 300


def simulate(schedule, nodes=1, gpus_per_node=1, pools=None, **overrides):
    """Run `schedule(sim, cluster)` on a ROUND cluster with an EnergyMeter; returns the PowerReport."""
    hardware = {**ROUND, "nodes": nodes, "gpus_per_node": gpus_per_node, **overrides}
    scenario = make_scenario({"kind": "collective", "bytes": 1}, **hardware)
    sim = Simulation(seed=0)
    cluster = Cluster.build(sim, scenario.hardware, scenario.network_model, pools)
    meter = EnergyMeter(sim, cluster, scenario.hardware, pools or [])
    sim.env.run(until=sim.process(schedule(sim, cluster)))
    return meter.report(float(sim.now))


def test_one_kernel_then_idle_is_max_power_while_busy_and_idle_power_after():
    def schedule(sim, cluster):
        yield cluster.devices[0].run("gemm", 1.0)  # 1 s at full power ...
        yield sim.timeout(1.0)  # ... then 1 s idle

    report = simulate(schedule)
    m = report.metrics()
    # GPU 100 x 2 + 400 x 1; chassis 200 x 2 + (400 - 200) x 1 (follows its one GPU); the rest idle x 2 s
    by_class = m["energy_j_by_class"]
    assert by_class["gpu"] == pytest.approx(600)
    assert by_class["chassis"] == pytest.approx(600)
    assert by_class["cpu"] == pytest.approx(100) and by_class["dram"] == pytest.approx(40)
    assert by_class["nic"] == pytest.approx(20) and by_class["switch"] == pytest.approx(600)
    assert m["energy_j"] == pytest.approx(1960)
    assert m["avg_power_w"] == pytest.approx(980)
    assert m["peak_power_w"] == pytest.approx(IDLE_ONE_HOST_ONE_GPU_W + 400 + 200)
    assert m["cluster_power_swing_w_per_s"] == pytest.approx(600)  # the step down at t = 1 s
    power = report.class_power().sum(axis=1)
    assert power.iloc[0] == pytest.approx(1280) and power.iloc[-1] == pytest.approx(680)


def test_compute_and_comm_overlapping_on_a_gpu_count_once_at_compute_power():
    def schedule(sim, cluster):
        dev = cluster.devices[0]
        kernel = dev.run("attention", 2.0)  # compute [0, 2]
        yield sim.timeout(1.0)
        yield dev.run("send", 2.0, stream="comm", category="comm")  # comm [1, 3]
        yield kernel

    by_class = simulate(schedule).metrics()["energy_j_by_class"]
    # 2 s computing (400 W dynamic) + 1 s only communicating (25% of 400 W) on top of 3 s x 100 W idle
    assert by_class["gpu"] == pytest.approx(300 + 2 * 400 + 1 * 100)
    assert by_class["chassis"] == pytest.approx(600 + 200 * (2 + 0.25))


def test_host_level_spans_drive_all_its_gpus_and_stalls_draw_idle_power():
    def schedule(sim, cluster):
        yield sim.timeout(1.0)
        sim.span("h0", "trainer", "train step", 0.0, 1.0, category="compute")
        yield sim.timeout(1.0)
        sim.span("h0", "trainer", "data stall", 1.0, 2.0, category="stall")

    by_class = simulate(schedule, gpus_per_node=2).metrics()["energy_j_by_class"]
    assert by_class["gpu"] == pytest.approx(2 * 100 * 2 + 2 * 400 * 1)


def test_cpu_spans_count_their_units_as_busy_cores():
    def schedule(sim, cluster):
        yield sim.timeout(1.0)
        sim.span("h0", "cpu", "decode", 0.0, 1.0, category="compute", units=4)  # 4 cores for 1 s

    by_class = simulate(schedule).metrics()["energy_j_by_class"]
    per_core_w = (150 - 50) / 56  # xeon-8480: 56 cores
    assert by_class["cpu"] == pytest.approx(50 + 4 * per_core_w)
    assert by_class["dram"] == pytest.approx(20 + (40 - 20) * 4 / 56)  # DRAM follows core use
    assert by_class["gpu"] == pytest.approx(100)  # CPU work is not GPU work


def test_preprocessing_batches_charge_every_core_they_hold():
    """A batch's CPU stages hold `cores_per_batch` cores: the core-seconds the energy model charges
    are the workers' busy-core area (less the batches still in flight when the run ends)."""
    sc = load_scenario(
        Path("scenarios/ingest-dlrm-disaggregated.yaml"), ["workload.duration_s=8", "workload.warmup_s=0"]
    )
    r = run(sc)
    spans = next(o for o in r.sim.recorder.observers if isinstance(o, SpanActivity))
    charged_core_s = sum(spans.unit_s[k] for k, key in enumerate(spans.keys) if key[1] == "cpu")
    pre = sc.workload.preprocessing
    busy_core_s = r.metrics["utilisation"]["preprocessing_cpu"] * pre.workers * pre.worker.cores * r.sim_time_s
    in_flight_core_s = pre.workers * pre.worker.cores * 16384 * 0.8e-3 / pre.cores_per_batch  # one batch time
    assert busy_core_s - in_flight_core_s <= charged_core_s <= busy_core_s


@pytest.mark.parametrize("network_model", ["flow", "analytical"])
def test_a_transfer_charges_nics_and_switch_per_byte(network_model):
    nbytes = 10e9
    scenario = make_scenario(
        {"kind": "collective", "op": "send_recv", "bytes": nbytes, "algorithm": "ring"},
        **{**ROUND, "nodes": 2, "gpus_per_node": 1, "network_model": network_model},
    )
    result = run(scenario)
    t = result.sim_time_s
    by_class = result.metrics["energy_j_by_class"]
    nic = catalog.link("cx7-400g-rdma")
    # two flows of nbytes; each byte leaves one NIC and enters the other: (30 - 10) / (2 x capacity) each
    nic_dynamic = 2 * nbytes * 2 * (30 - 10) / (2 * nic.achieved_bytes_per_s)
    assert by_class["nic"] == pytest.approx(2 * 10 * t + nic_dynamic, rel=1e-9)
    # ... and enters and leaves the switch box: (600 - 300) / (2 x 128 x 400 Gbit/s) per byte each way
    switch_dynamic = 2 * nbytes * 2 * 300 / (2 * 128 * 50e9)
    assert by_class["switch"] == pytest.approx(300 * t + switch_dynamic, rel=1e-9)
    # both GPUs communicate for the whole run
    assert by_class["gpu"] == pytest.approx(2 * t * (100 + 0.25 * 400), rel=1e-6)


def test_a_one_way_transfer_makes_sender_and_receiver_gpus_communicate():
    def schedule(sim, cluster):
        yield sim.timeout(1.0)
        yield cluster.network.transfer(cluster.devices[0].node, cluster.devices[1].node, 1e9)

    report = simulate(schedule, nodes=2)
    t = report.duration_s - 1.0  # the transfer's duration
    gpu = report.group_energy().set_index("group")["energy_j"]
    assert report.metrics()["energy_j_by_class"]["gpu"] == pytest.approx(2 * 100 * (1 + t) + 2 * 0.25 * 400 * t)
    assert gpu["h0"] == pytest.approx(gpu["h1"])  # sending and receiving hosts draw the same


def test_a_gpu_communicates_from_its_earliest_transfer_even_when_a_later_one_ends_first():
    def schedule(sim, cluster):
        a, b = cluster.devices[0].node, cluster.devices[1].node
        long = cluster.network.transfer(a, b, 2e9)  # starts at 0, is seen when it ends
        yield sim.timeout(0.001)
        yield cluster.network.transfer(a, b, 1e6)  # starts later, ends first
        yield long

    report = simulate(schedule, nodes=2)
    t = report.duration_s  # both GPUs communicate throughout
    assert report.metrics()["energy_j_by_class"]["gpu"] == pytest.approx(2 * t * (100 + 0.25 * 400), rel=1e-9)


def test_energy_is_exact_when_the_span_recorder_drops_spans():
    path = "scenarios/allreduce-2x8-h100.yaml"
    full = run(load_scenario(path))
    capped = run(load_scenario(path, ["trace_limit=3"]))
    assert capped.sim.recorder.dropped > 0
    keys = ("energy_j", "avg_power_w", "peak_power_w", "cluster_power_swing_w_per_s", "energy_j_by_class")
    assert {k: capped.metrics[k] for k in keys} == {k: full.metrics[k] for k in keys}


def test_a_collectives_gpus_communicate_as_one_set_with_the_energy_of_one_interval_per_gpu(monkeypatch):
    """Transfers with many endpoints keep one open interval per GPU set (fanned out to its GPUs by
    the report); folding them per GPU instead gives the same energy and power series."""
    import sim.energy.meter
    from sim.engine.open_intervals import OpenIntervals

    grown = []
    grow = OpenIntervals.grow
    monkeypatch.setattr(OpenIntervals, "grow", lambda self: grown.append(1) or grow(self))
    path, ring = "scenarios/allreduce-2x8-h100.yaml", ["workload.algorithm=ring"]  # 16 GPUs, 2 hosts
    sets = run(load_scenario(path, ring))
    assert len(grown) >= 1  # the ring's GPUs: one set
    monkeypatch.setattr(sim.energy.meter, "_FEW_ENDPOINTS", 10**9)  # every transfer: one row per GPU
    per_gpu = run(load_scenario(path, ring))
    assert sets.metrics["energy_j_by_class"]["gpu"] > 0
    keys = ("energy_j", "avg_power_w", "peak_power_w", "cluster_power_swing_w_per_s")
    assert {k: sets.metrics[k] for k in keys} == pytest.approx({k: per_gpu.metrics[k] for k in keys}, rel=1e-12)
    assert sets.metrics["energy_j_by_class"] == pytest.approx(per_gpu.metrics["energy_j_by_class"], rel=1e-12)


@pytest.mark.parametrize(
    "path, overrides",
    [
        ("scenarios/allreduce-2x8-h100.yaml", ["workload.algorithm=ring"]),
        ("scenarios/cp-70b-h100-2hosts-128k.yaml", []),
    ],
)
def test_gpus_with_the_same_activity_swept_once_give_the_energy_of_sweeping_each(monkeypatch, path, overrides):
    """The report sweeps one GPU per class of GPUs whose keys bring identical intervals and charges
    it per device; sweeping every GPU on its own gives the same energy and power series."""
    import sim.energy.meter

    classes = run(load_scenario(path, overrides))
    swept = []
    grouped = sim.energy.meter._activity_classes

    def each_gpu(flat, counts, key_state, k_sel, s_sel, e_sel, n_rows):
        _, _, rep = grouped(flat, counts, key_state, k_sel, s_sel, e_sel, n_rows)
        swept.append((int((rep == np.arange(n_rows)).sum()), int((rep >= 0).sum())))
        rep = np.where(rep >= 0, np.arange(n_rows), -1)  # every active GPU its own class
        return flat, counts, rep

    monkeypatch.setattr(sim.energy.meter, "_activity_classes", each_gpu)
    each = run(load_scenario(path, overrides))
    (representatives, active), *_ = swept
    assert representatives < active  # the shortcut did group GPUs
    keys = ("energy_j", "avg_power_w", "peak_power_w", "cluster_power_swing_w_per_s")
    assert {k: classes.metrics[k] for k in keys} == pytest.approx({k: each.metrics[k] for k in keys}, rel=1e-12)
    for scope in ("energy_j_by_class", "energy_j_by_scope"):
        assert classes.metrics[scope] == pytest.approx(each.metrics[scope], rel=1e-12)


def test_gpu_activity_merged_a_block_of_devices_at_a_time_gives_the_same_energy():
    """The report merges (span, device) pairs a block of devices at a time (bounded memory on long
    runs); blocks of 3 pairs give what one block gives, within float rounding."""

    def schedule(sim, cluster):
        for i, dev in enumerate(cluster.devices):
            dev.run("gemm", 0.5 + 0.25 * i)  # compute [0, 0.5 + i/4]
            dev.run("send", 1.0, stream="comm", category="comm")  # comm [0, 1]: partly under compute
        sim.span("h1", "trainer", "train step", 0.0, 2.0, category="compute")  # all of h1's GPUs
        yield sim.timeout(3.0)

    def report(block_entries):
        scenario = make_scenario({"kind": "collective", "bytes": 1}, **{**ROUND, "nodes": 2, "gpus_per_node": 4})
        sim = Simulation(seed=0)
        cluster = Cluster.build(sim, scenario.hardware, scenario.network_model, None)
        meter = EnergyMeter(sim, cluster, scenario.hardware, [])
        meter.block_entries = block_entries
        sim.env.run(until=sim.process(schedule(sim, cluster)))
        return meter.report(float(sim.now))

    one, blocks = report(1 << 22), report(3)
    assert one.metrics()["energy_j_by_class"] == pytest.approx(blocks.metrics()["energy_j_by_class"], rel=1e-12)
    assert one.class_power().to_numpy() == pytest.approx(blocks.class_power().to_numpy(), rel=1e-12)
    # h0's GPUs: compute 0.5, 0.75, 1.0, 1.25 s, then communicating up to 1 s (25% of 400 W);
    # h1's: the host span keeps them computing for 2 s, the last one's own kernel to 2.25 s
    h0 = sum(400 * c + 100 * max(0.0, 1.0 - c) for c in (0.5, 0.75, 1.0, 1.25))
    h1 = sum(400 * max(2.0, c) for c in (1.5, 1.75, 2.0, 2.25))
    assert one.metrics()["energy_j_by_class"]["gpu"] == pytest.approx(8 * 100 * 3 + h0 + h1)


def test_same_scenario_and_seed_give_identical_energy_metrics():
    a = run(load_scenario("scenarios/allreduce-2x8-h100.yaml"))
    b = run(load_scenario("scenarios/allreduce-2x8-h100.yaml"))
    assert a.metrics == b.metrics


def test_pool_hosts_draw_power_only_when_used():
    pools = [HostPool("preproc", 2, catalog.link("eth-25g-tcp"))]

    def schedule(sim, cluster):
        yield cluster.network.transfer("preproc0", cluster.devices[0].node, 1e9)

    report = simulate(schedule, pools=pools)
    energy = report.group_energy().set_index("group")["energy_j"]
    t = report.duration_s
    site = SitePower()
    idle_w = site.cpu_host.idle + 32 * 50 / 56 + catalog.link("eth-25g-tcp").power.idle  # 32 cores of ROUND's CPU
    assert energy["preproc1"] == 0.0
    assert energy["preproc0"] > idle_w * t
    assert report.group_energy().set_index("group").loc["preproc0", "cost_usd"] == pytest.approx(
        32 * site.price_per_core_hour * t / 3600
    )


def test_pue_and_power_overrides_come_from_the_scenario():
    def schedule(sim, cluster):
        yield cluster.devices[0].run("gemm", 1.0)

    base = simulate(schedule).metrics()
    with_pue = simulate(schedule, power={**ROUND["power"], "pue": 1.5}).metrics()
    assert with_pue["energy_j"] == pytest.approx(1.5 * base["energy_j"])
    assert with_pue["energy_j_by_class"]["facility"] == pytest.approx(0.5 * base["energy_j"])
    assert base["energy_j_by_class"]["switch"] == pytest.approx(300)


def test_bad_power_block_is_a_one_line_error_with_its_key_path():
    with pytest.raises(ScenarioError, match=r"hardware\.power\.pue"):
        make_scenario({"kind": "collective", "bytes": 1}, power={"pue": 0.5})
    with pytest.raises(ScenarioError, match=r"hardware\.power\.bogus"):
        make_scenario({"kind": "collective", "bytes": 1}, power={"bogus": 1})
    with pytest.raises(ScenarioError, match=r"hardware\.gpu"):
        make_scenario({"kind": "collective", "bytes": 1}, gpu={"base": "h100-sxm", "power_cap": "50 W"})


# ---- power cap -------------------------------------------------------------------------------------
def test_power_cap_model_checked_against_the_h100_pair_of_reference_md():
    """Check, not a fit: static power = the catalog idle power (88 W), exponent 3 (V ~ f)."""
    h100 = catalog.device("h100-sxm")
    capped = catalog.device({"base": "h100-sxm", "power_cap": "500 W"})
    predicted = capped.peak_flop_per_s("bf16")
    error = predicted / 800e12 - 1  # arXiv 2411.01783: 500 W -> 800 TFLOP/s
    assert predicted == pytest.approx(989e12 * ((500 - 88) / (700 - 88)) ** (1 / 3))
    assert error == pytest.approx(0.0835, abs=0.001)  # the model's error: +8.4 %
    assert capped.memory_bandwidth == h100.memory_bandwidth  # HBM keeps its clock
    assert capped.max_power_w == 500 and h100.max_power_w == 700
    assert capped.gemm_time_s(8192, 8192, 8192) > h100.gemm_time_s(8192, 8192, 8192)


def test_power_cap_clock_fraction_is_monotone_and_inverts():
    caps = np.linspace(100, 800, 50)
    f = [capped_clock_fraction(c, 700, 88) for c in caps]
    assert all(b >= a for a, b in zip(f, f[1:]))
    assert f[-1] == 1.0  # caps above TDP change nothing
    for cap in (120.0, 300.0, 650.0):  # both sides of the voltage floor
        assert capped_power_w(capped_clock_fraction(cap, 700, 88), 700, 88) == pytest.approx(cap)
    with pytest.raises(ValueError):
        capped_clock_fraction(80, 700, 88)


# ---- the accumulators ------------------------------------------------------------------------------
def test_adaptive_bins_keep_totals_exact_while_coarsening():
    bins = AdaptiveBins(2, 8)
    bins.spread([0, 1], [0.0, 1e-9], [1e-6, 3e-9], [5.0, 7.0])
    bins.spread([0], [0.5], [123.0], [11.0])  # forces many doublings
    assert bins.values().sum(axis=1) == pytest.approx([16.0, 7.0])
    assert bins.width_s * bins.bins > 123.0


def test_span_activity_union_matches_brute_force():
    rng = np.random.default_rng(0)
    activity = SpanActivity(batch=16)
    grid = np.zeros((3, 1000), dtype=bool)  # 1 ms cells on [0, 1) s
    for _ in range(200):
        key = int(rng.integers(3))
        a, b = sorted(rng.integers(0, 1000, 2))
        activity(f"c{key}", "compute", "compute", a / 1000, b / 1000)
        grid[key, a:b] = True
    keys, start, end = activity.intervals()
    busy = np.bincount(keys, end - start, minlength=3)
    names = [int(k[0][1:]) for k in activity.keys]
    assert np.allclose([busy[names.index(i)] for i in range(3)], grid.sum(axis=1) / 1000)
    assert len(union(keys, start, end)[0]) == len(keys)  # already disjoint


def test_union_of_many_intervals_merges_a_range_of_groups_at_a_time_with_the_same_result():
    rng = np.random.default_rng(1)
    group = rng.integers(0, 40, 5000)
    start = rng.integers(0, 10_000, 5000) / 1000.0
    end = start + rng.integers(1, 500, 5000) / 1000.0
    whole = union(group, start, end)
    blocked = union(group, start, end, block=300)  # ~17 ranges of groups
    for a, b in zip(whole, blocked):
        assert np.array_equal(a, b)
    g, s, e = whole
    same = g[1:] == g[:-1]
    assert (s[1:][same] > e[:-1][same]).all()  # disjoint and sorted within each group


# ---- every workload kind ---------------------------------------------------------------------------
def _scenario_of(kind: str) -> tuple[str, list[str]] | None:
    preferred = {
        "collective": ("allreduce-2x8-h100.yaml", []),
        "cp_inference": ("cp-405b-rdma-128k.yaml", ["hardware.nodes=1"]),
        "ingestion": ("ingest-dlrm-on-trainer.yaml", []),
        "embedding_training": ("emb-dlrm-1x8-a100-scm.yaml", []),
        "training": ("train-mixtral-8x7b-ep8.yaml", []),  # the smallest of each kind (the suite's time)
        "tiered_memory": ("tiered-dram-cxl-churn.yaml", []),
        "serving": ("serve-mixtral-8x7b-ep.yaml", []),
    }
    if kind in preferred and Path("scenarios", preferred[kind][0]).is_file():
        return str(Path("scenarios", preferred[kind][0])), preferred[kind][1]
    for path in sorted(Path("scenarios").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and (data.get("workload") or {}).get("kind") == kind:
            return str(path), []
    return None


@pytest.mark.parametrize("kind", kinds())
def test_every_kind_reports_energy_power_and_cost(kind):
    found = _scenario_of(kind)
    if found is None:
        pytest.skip(f"no scenario of kind {kind} in scenarios/")
    result = run(load_scenario(found[0], found[1]))
    m = result.metrics
    for key in ("energy_j", "avg_power_w", "peak_power_w", "cost_usd", "cluster_power_swing_w_per_s"):
        assert isinstance(m[key], float) and m[key] >= 0, key
    assert m["energy_j"] == pytest.approx(m["avg_power_w"] * result.sim_time_s)
    assert m["peak_power_w"] >= m["avg_power_w"] > 0
    assert m["energy_j"] == pytest.approx(sum(m["energy_j_by_class"].values()))
    assert m["energy_j"] == pytest.approx(sum(m["energy_j_by_scope"].values()))
    if any(k in m for k in ("samples_per_s", "trainer_samples_per_s", "samples")):
        assert m["energy_per_sample_j"] > 0


def test_power_plot_has_labelled_axes_with_units(tmp_path):
    def schedule(sim, cluster):
        yield cluster.devices[0].run("gemm", 1.0)
        yield sim.timeout(1.0)

    fig = power_over_time(simulate(schedule))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "simulated time (s)" and ax.get_ylabel() == "power (kW)"
    path = tmp_path / "power.png"
    power_over_time(simulate(schedule), path=path)
    assert path.read_bytes()[:4] == b"\x89PNG"
