"""Workload-side speed shortcuts are exact: each one against the straightforward path (or against
metrics pinned before it existed) on small cases.

- Ingestion (sim/workloads/ingestion/pipeline.py): trainer credits granted through a heap of per-worker
  candidates, windowed link bytes counted in bulk. Pinned: metrics of small DLRM (with faults) and
  video-curation runs, recorded with the code before these changes.
- Energy (sim/engine/link_traffic.py, sim/engine/open_intervals.py, sim/energy/meter.py): link traffic binned in
  batches; GPUs' open comm intervals folded in vectorised batches; the end-to-end energy of a run either way.
- cp_inference (sim/workloads/cp_inference/replay.py): one recorded layer replayed for the others, against
  simulating every layer (metrics, spans, link table), also where the span recorder fills up midway.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from sim.runner import run
from sim.scenario.model import scenario_from_dict

# ---- ingestion: metrics pinned before the speed-ups -----------------------------------------------

DLRM_FAULTS = {
    "name": "speed-dlrm-faults",
    "seed": 0,
    "network_model": "flow",
    "hardware": {
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "nodes": 2,
        "nic": "cx7-400g-rdma",
        "host_cpu": "xeon-8480",
        "host_cpus": 2,
        "topology": {"kind": "single-switch"},
    },
    "workload": {
        "kind": "ingestion",
        "dataset": {
            "samples": 100_000_000,
            "bytes_per_sample": 16_000,
            "columns": 800,
            "columns_read": 0.3,
            "compression": 3.0,
            "partition_bytes": "512 MiB",
        },
        "storage": {"nodes": 40, "media": "hdd", "media_per_node": 12, "replication": 3, "nic": "eth-25g-tcp"},
        "preprocessing": {
            "mode": "disaggregated",
            "workers": 11,
            "worker": {"cores": 32, "memory": "256 GiB", "nic": "eth-25g-tcp"},
            "cpu_s_per_sample": {"decode": 2.0e-4, "transform": 6.0e-4},
            "batch_samples": 16384,
            "cores_per_batch": 8,
            "splits_in_flight": 4,
            "service_cv": 0.3,
        },
        "trainers": {"demand_samples_per_s_per_host": 200_000, "buffer_batches": 8},
        "faults": [
            {"kind": "worker_crash", "at_s": 15, "count": 4, "restart_after_s": 10},
            {"kind": "storage_node_down", "at_s": 20, "count": 2},
        ],
        "duration_s": 30,
        "warmup_s": 10,
    },
}
VIDEO = {
    "name": "speed-video",
    "seed": 0,
    "network_model": "flow",
    "hardware": {
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "nodes": 1,
        "nic": "cx7-400g-rdma",
        "topology": {"kind": "single-switch"},
    },
    "workload": {
        "kind": "ingestion",
        "dataset": {"samples": 1_000_000, "bytes_per_sample": "75 MB", "partition_bytes": "600 MB"},
        "storage": {"nodes": 8, "media": "nvme-ssd", "media_per_node": 8, "replication": 3, "nic": "cx7-200g-rdma"},
        "preprocessing": {
            "mode": "disaggregated",
            "workers": 4,
            "worker": {"cores": 112, "memory": "1 TiB", "nic": "cx7-200g-rdma", "gpus": 8, "gpu": "h100-sxm"},
            "batch_samples": 4,
            "cores_per_batch": 8,
            "splits_in_flight": 16,
            "service_cv": 0.2,
        },
        "trainers": {"demand_samples_per_s_per_host": 60, "buffer_batches": 8},
        "media": {"video_s": 60, "clip_s": 8, "keep_fraction": 0.5},
        "duration_s": 40,
        "warmup_s": 10,
    },
}


def ingestion_case(name: str) -> dict:
    base, _, network = name.partition("/")
    data = copy.deepcopy({"dlrm-faults": DLRM_FAULTS, "video": VIDEO}[base])
    data["network_model"] = network
    return data


def fingerprint(m: dict) -> dict:
    """The ingestion metrics every shortcut must leave unchanged (energy included)."""
    return {
        "trainer_samples_per_s": m["trainer_samples_per_s"],
        "data_stall_fraction": m["data_stall_fraction"],
        "storage_read_bytes_per_s": m["storage_read_bytes_per_s"],
        "energy_j": m["energy_j"],
        "peak_power_w": m["peak_power_w"],
        "cpu_j": m["energy_j_by_class"]["cpu"],
        "gpu_j": m["energy_j_by_class"]["gpu"],
        "nic_j": m["energy_j_by_class"]["nic"],
        "switch_j": m["energy_j_by_class"]["switch"],
        "batches": m["totals"]["batches_delivered"],
        "delivered": m["exactly_once"]["samples_delivered"],
        "lost": m["samples_lost"],
        "nic_tx": m["utilisation"].get("preprocessing_nic_tx"),
        "trace_sum": sum(sum(row) for row in m["buffer_trace"]),
    }


# recorded with the code before these speed-ups (git 7bd367d; python 3.11, numpy 2), then re-recorded
# twice for model changes, never for a speed-up: energy_j, peak_power_w and cpu_j when a batch's CPU spans
# began to count its cores_per_batch cores (preprocessing CPU energy had been charged for one core); all
# keys at git 27e6998, when each worker began to draw its service-time factors from its own seeded stream
# (different draws, so different metrics; recorded with that commit, before the speed-ups that followed it:
# one-flow analytical path, LeanContainer, LeanStore, interned skeleton codes)
PINNED = {
    "dlrm-faults/analytical": {
        "trainer_samples_per_s": 356069.1,
        "data_stall_fraction": 0.11031605617294912,
        "storage_read_bytes_per_s": 803993279.9999998,
        "energy_j": 846806.4383284177,
        "peak_power_w": 30223.652541251366,
        "cpu_j": 138712.5210581718,
        "gpu_j": 302595.83307414385,
        "nic_j": 13482.348829570274,
        "switch_j": 24009.570909878235,
        "batches": 755,
        "delivered": 10841195,
        "lost": 0,
        "nic_tx": 0.055210854205404926,
        "trace_sum": 367.9017244388267,
    },
    "dlrm-faults/flow": {
        "trainer_samples_per_s": 354896.05,
        "data_stall_fraction": 0.11248663599862319,
        "storage_read_bytes_per_s": 795940239.9999998,
        "energy_j": 844379.5184660868,
        "peak_power_w": 30195.65736779362,
        "cpu_j": 138404.07334273861,
        "gpu_j": 301252.4816097121,
        "nic_j": 13482.023051618975,
        "switch_j": 24009.52525591402,
        "batches": 752,
        "delivered": 10792043,
        "lost": 0,
        "nic_tx": 0.054876762378841586,
        "trace_sum": 367.7862977762703,
    },
    "video/flow": {
        "trainer_samples_per_s": 23.066666666666666,
        "data_stall_fraction": 0.6136359593755475,
        "storage_read_bytes_per_s": 1600000000.0,
        "energy_j": 708274.9393211657,
        "peak_power_w": 32623.819196428572,
        "cpu_j": 57805.691257770064,
        "gpu_j": 478180.4349983252,
        "nic_j": 8697.901474872717,
        "switch_j": 32014.794799715834,
        "batches": 174,
        "delivered": 696,
        "lost": 0,
        "nic_tx": 0.003792297195311948,
        "trace_sum": 488.649435694296,
    },
}


@pytest.mark.parametrize("case", sorted(PINNED))
def test_ingestion_metrics_are_those_pinned_before_the_speedups(case):
    got = fingerprint(run(scenario_from_dict(ingestion_case(case))).metrics)
    for key, value in PINNED[case].items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_credits_go_where_a_scan_of_every_waiting_request_sends_them():
    """Credits: fewest slots held first, then first come - the heap gives the scan's order."""
    import simpy

    from sim.workloads.ingestion.parts import Credits

    rng = np.random.default_rng(1)
    env = simpy.Environment()
    credits = Credits(env)
    waiting, held, seq, granted, expected = [], {}, 0, [], []

    def reference_grant(free: list):
        while free and waiting:
            i = min(range(len(waiting)), key=lambda j: (held.get(waiting[j][1], 0), waiting[j][0]))
            _, key, tag = waiting.pop(i)
            held[key] = held.get(key, 0) + 1
            expected.append((tag, free.pop(0)))

    free_ref: list = []
    for _ in range(3000):
        op = rng.integers(3)
        if op == 0:  # a worker asks for a credit
            key, seq = int(rng.integers(12)), seq + 1
            event = credits.get(key)
            event.callbacks.append(lambda e, tag=seq: granted.append((tag, e.value)))
            waiting.append((seq, key, seq))
            reference_grant(free_ref)
        elif op == 1:  # a trainer frees a slot
            trainer = int(rng.integers(4))
            credits.put(trainer)
            free_ref.append(trainer)
            reference_grant(free_ref)
        else:  # a batch lands: its worker holds one less
            holders = [k for k, n in held.items() if n > 0]
            if holders:
                key = holders[int(rng.integers(len(holders)))]
                held[key] -= 1
                credits.release(key)
        env.run()
    assert len(expected) > 500
    assert granted == expected


def _random_traffic(rng, links: int, calls: int):
    for _ in range(calls):
        t0 = float(rng.uniform(0, 50))
        t1 = t0 + float(rng.choice([0.0, rng.exponential(2.0)]))
        if rng.random() < 0.5:
            delta = np.where(rng.random(links) < 0.3, rng.exponential(1e6, links), 0.0)
            yield "on_links", (t0, t1, np.arange(links), delta)  # zero entries are skipped
        else:
            n = int(rng.integers(1, 6))
            lengths = rng.integers(1, 4, n)
            flat = rng.integers(0, links, int(lengths.sum()))
            start = t0 + rng.uniform(0, 1e-3, n)
            yield "on_subflows", (start, start + rng.exponential(1.0, n), flat, lengths, rng.exponential(1e6, n))


def test_adaptive_bins_coarsened_at_once_equal_doubling_one_step_at_a_time():
    from sim.engine.link_traffic import AdaptiveBins

    rng = np.random.default_rng(4)
    bins = AdaptiveBins(3, 16)
    t0 = rng.uniform(0, 1e-7, 50)
    bins.spread(rng.integers(0, 3, 50), t0, t0 + rng.uniform(0, 1e-7, 50), rng.exponential(1.0, 50))
    values, width = bins.values(), bins.width_s
    for target in (20 * width, 1e3):  # 2^m < bins, then 2^m >= bins
        while target >= 16 * width:  # the straightforward path: pair by pair
            values = values.reshape(3, 8, 2).sum(axis=2)
            values = np.concatenate([values, np.zeros((3, 8))], axis=1)
            width *= 2
        bins.fit(target)
        assert bins.width_s == width
        np.testing.assert_allclose(bins.values(), values, rtol=1e-12, atol=1e-15)


def test_link_traffic_binned_in_batches_equals_binning_every_call():
    from sim.engine.link_traffic import AdaptiveBins, LinkTraffic

    rng = np.random.default_rng(2)
    links = 40
    rows = rng.integers(0, 5, (links, 2))
    coef = np.where(rng.random((links, 2)) < 0.8, rng.uniform(1e-9, 1e-8, (links, 2)), 0.0)
    observers = {
        batch: LinkTraffic(
            [(rows, coef, AdaptiveBins(5, 64)), (rows % 3, coef, AdaptiveBins(3, 16))], batch_entries=batch
        )
        for batch in (0, 7, 1 << 16)
    }
    for method, args in _random_traffic(rng, links, 400):
        for traffic in observers.values():
            getattr(traffic, method)(*args)
    for traffic in observers.values():
        traffic.flush()
    each_call = observers[0]
    for traffic in observers.values():
        assert traffic.bytes == pytest.approx(each_call.bytes, rel=1e-12)
        for (_, _, bins), (_, _, ref) in zip(traffic.row_sets, each_call.row_sets):
            assert bins.width_s == ref.width_s
            np.testing.assert_allclose(bins.values(), ref.values(), rtol=1e-9, atol=1e-12)


def test_link_traffic_repeated_calls_equal_each_call_in_turn():
    """A replayed tape hands LinkTraffic one recorded call's link bytes for every start at once
    (`on_links_repeated`, sim/network/replay.py); the bins equal those of the calls one by one, mixed
    with ordinary calls and flushes in between."""
    from sim.engine.link_traffic import AdaptiveBins, LinkTraffic

    rng = np.random.default_rng(5)
    links = 30
    rows = rng.integers(0, 4, (links, 2))
    coef = np.where(rng.random((links, 2)) < 0.8, rng.uniform(1e-9, 1e-8, (links, 2)), 0.0)

    def traffic(batch):
        return LinkTraffic([(rows, coef, AdaptiveBins(4, 32))], batch_entries=batch)

    bulk, each = traffic(50), traffic(0)
    for _ in range(60):
        link_bytes = np.where(rng.random(links) < 0.5, rng.uniform(0, 1e6, links), 0.0)
        t0 = np.sort(rng.uniform(0, 5e-3, int(rng.integers(1, 9))))
        t1 = t0 + rng.uniform(0, 1e-4, len(t0))
        used = np.flatnonzero(link_bytes != 0)
        if rng.random() < 0.3:  # an ordinary call between the repeated ones
            bulk.on_links(float(t0[0]), float(t1[0]), used, link_bytes[used])
            each.on_links(float(t0[0]), float(t1[0]), used, link_bytes[used])
            continue
        bulk.on_links_repeated(t0, t1, used, link_bytes[used])
        for a, b in zip(t0.tolist(), t1.tolist()):
            each.on_links(a, b, used, link_bytes[used])
    bulk.flush()
    each.flush()
    assert bulk.bytes == pytest.approx(each.bytes, rel=1e-12)
    (_, _, got), (_, _, ref) = bulk.row_sets[0], each.row_sets[0]
    assert got.width_s == ref.width_s
    np.testing.assert_allclose(got.values(), ref.values(), rtol=1e-9, atol=1e-12)


def test_link_traffic_replayed_steps_equal_their_link_bytes_call_by_call():
    """A replayed step reports `times` runs of its recorded link bytes (`on_step`, sim/network/flow.py):
    LinkTraffic sums the step's amounts per row once and reuses them; the bins equal those of
    `on_links` with times x the bytes, mixed with ordinary calls and flushes in between."""
    from sim.engine.link_traffic import AdaptiveBins, LinkTraffic

    rng = np.random.default_rng(11)
    links = 40
    rows = rng.integers(0, 5, (links, 2))
    coef = np.where(rng.random((links, 2)) < 0.8, rng.uniform(1e-9, 1e-8, (links, 2)), 0.0)

    def traffic(batch):
        return LinkTraffic(
            [(rows, coef, AdaptiveBins(5, 32)), (rows[:, ::-1], coef, AdaptiveBins(5, 16))], batch_entries=batch
        )

    steps = []
    for _ in range(4):  # recorded steps: their links and bytes per run
        used = np.sort(rng.choice(links, int(rng.integers(1, links)), replace=False))
        steps.append((object(), used, rng.uniform(0, 1e6, len(used))))
    bulk, each = traffic(64), traffic(0)
    t = 0.0
    for _ in range(80):
        t0 = t + float(rng.uniform(0, 1e-4))
        t = t1 = t0 + float(rng.uniform(0, 2e-4))
        if rng.random() < 0.3:  # an ordinary call between the replays
            used = np.flatnonzero(rng.random(links) < 0.5)
            link_bytes = rng.uniform(0, 1e6, len(used))
            bulk.on_links(t0, t1, used, link_bytes)
            each.on_links(t0, t1, used, link_bytes)
            continue
        token, used, per_run = steps[int(rng.integers(len(steps)))]
        times = rng.integers(1, 4, int(rng.integers(1, 4)))  # runs, each of back-to-back replays
        t0s = t0 + np.arange(len(times)) * 1e-4
        t1s = t0s + float(rng.uniform(0, 1e-4))
        bulk.on_step(t0s, t1s, token, times, used, per_run)
        for a, b, n in zip(t0s.tolist(), t1s.tolist(), times.tolist()):
            each.on_links(a, b, used, per_run * n)
    assert bulk.bytes == pytest.approx(each.bytes, rel=1e-12)
    for (_, _, got), (_, _, ref) in zip(bulk.row_sets, each.row_sets):
        assert got.width_s == ref.width_s
        np.testing.assert_allclose(got.values(), ref.values(), rtol=1e-9, atol=1e-12)


def test_open_comm_intervals_folded_in_batches_equal_folding_each_transfer_in_turn():
    from sim.engine.open_intervals import OpenIntervals

    rng = np.random.default_rng(3)
    n, emitted, expected = 80, [], []
    everyone = np.arange(n)  # a collective step on every GPU, again and again
    intervals = OpenIntervals(n, lambda r, s, e: emitted.extend(zip(r.tolist(), s.tolist(), e.tolist())), batch=40)
    start_of, end_of = [0.0] * n, [-math.inf] * n  # the straightforward fold, one transfer at a time
    t = 0.0
    for _ in range(3000):
        ring = rng.random() < 0.3
        rows = everyone.tolist() if ring else sorted(rng.choice(n, int(rng.integers(1, 4)), replace=False).tolist())
        t += float(rng.exponential(0.5))
        start = t - float(rng.uniform(0, 2))  # transfers end (and are seen) out of start order
        if rng.random() < 0.5 and end_of[rows[0]] > -math.inf:
            start = end_of[rows[0]] * (1 + float(rng.choice([0.0, 5e-13, 2e-12])))  # continues it, or just not
        end = start + float(rng.exponential(0.3))
        for r in rows:
            if start > end_of[r] * (1 + 1e-12) + 1e-15:
                if end_of[r] > -math.inf:
                    expected.append((r, start_of[r], end_of[r]))
                start_of[r] = start
            else:  # joins the open interval, maybe earlier
                start_of[r] = min(start_of[r], start)
            end_of[r] = max(end_of[r], end)
        intervals.add(rows, start, end)
    intervals.close()
    expected += [(r, start_of[r], end_of[r]) for r in range(n) if end_of[r] > -math.inf]
    assert len(expected) > 1000
    assert sorted(emitted) == sorted(expected)


def test_transfers_given_together_open_the_comm_intervals_of_each_given_in_turn():
    """The energy meter's `_transfer_ends` joins a run of transfers on the same GPUs before it adds
    them (a replayed schedule's steps, back to back): the intervals of adding each in turn."""
    from sim.energy.meter import EnergyMeter
    from sim.engine.open_intervals import OpenIntervals

    rng = np.random.default_rng(5)
    gpus = [f"g{i}" for i in range(40)]
    rings = [gpus[:20], gpus[20:]]  # 20 senders and receivers each: a GPU set, rows 40 and 41

    class Meter:  # what `_transfer_ends` uses of the meter
        _device_row = {g: i for i, g in enumerate(gpus)}

        def __init__(self):
            self.emitted = []
            emit = lambda r, s, e: self.emitted.extend(zip(r.tolist(), s.tolist(), e.tolist()))  # noqa: E731
            self._comm = OpenIntervals(42, emit, batch=64)
            self._rows_by_step = {}

        _rows_of = EnergyMeter._rows_of

        def _transfer_set(self, srcs, dsts):
            return [40 + rings.index(srcs)]

    transfers, t = [], 1.0
    for _ in range(4000):
        if rng.random() < 0.6:  # a ring step, mostly right after the previous one
            srcs = rings[int(rng.integers(2))]
            dsts = srcs[1:] + srcs[:1]
        else:  # point to point
            srcs, dsts = [gpus[int(rng.integers(40))]], [gpus[int(rng.integers(40))]]
        gap = [0.0, 0.0, 5e-13 * t, 2e-12 * t, rng.exponential(0.1), -rng.exponential(0.1)][int(rng.integers(6))]
        start = t + gap  # back to back; just within or past the join tolerance; later; earlier
        end = start + (0.0 if rng.random() < 0.05 else float(rng.exponential(0.2)))
        t = max(t, end)
        transfers.append((srcs, dsts, start, end, None))
    together, one_by_one = Meter(), Meter()
    for i in range(0, len(transfers), 50):
        EnergyMeter._transfer_ends(together, transfers[i : i + 50])
    for transfer in transfers:
        EnergyMeter._transfer_ends(one_by_one, [transfer])
    together._comm.close()
    one_by_one._comm.close()
    assert len(one_by_one.emitted) > 500
    assert sorted(together.emitted) == sorted(one_by_one.emitted)


def test_point_to_point_gpu_comm_intervals_equal_the_array_path(monkeypatch):
    """Energy of a run whose transfers all take the scalar path, against the array path for all."""
    import sim.energy.meter

    data = ingestion_case("dlrm-faults/flow")
    data["workload"].update(duration_s=16, faults=[])
    scalar = run(scenario_from_dict(data)).metrics
    monkeypatch.setattr(sim.energy.meter, "_FEW_ENDPOINTS", 0)
    arrays = run(scenario_from_dict(data)).metrics
    assert scalar["energy_j_by_class"]["gpu"] > 0
    for key in ("energy_j", "peak_power_w", "cluster_power_swing_w_per_s"):
        assert scalar[key] == pytest.approx(arrays[key], rel=1e-12), key
    for cls, joules in arrays["energy_j_by_class"].items():
        assert scalar["energy_j_by_class"][cls] == pytest.approx(joules, rel=1e-12, abs=1e-9), cls


# ---- cp_inference: exact layer replay ---------------------------------------------------------------

TINY = {"name": "tiny", "layers": 6, "hidden": 1024, "ffn": 3584, "heads": 16, "kv_heads": 4, "vocab": 32000}


def cp_scenario(requests, ring="auto", nodes=4, trace_limit=200_000, **simulate):
    return scenario_from_dict(
        {
            "name": "speed-cp",
            "trace_limit": trace_limit,
            "hardware": {
                "gpu": "h100-sxm",
                "gpus_per_node": 2,
                "nodes": nodes,
                "scale_up": "nvlink4",
                "nic": "cx7-400g-rdma",
                "topology": {"kind": "single-switch"},
            },
            "workload": {
                "kind": "cp_inference",
                "model": TINY,
                "dtype": "bf16",
                "ring": ring,
                "requests": requests,
                "simulate": {"ranks": "representative", **simulate},
            },
        }
    )


def _assert_same(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not (a is None or math.isnan(a)):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-15), path
    else:
        assert a == b, path


def _simulated_every_layer(monkeypatch, scenario):
    from sim.workloads.cp_inference.replay import LayerRecording

    with monkeypatch.context() as m:
        m.setattr(LayerRecording, "replayable", lambda self, layers: 0)  # record, never replay
        return run(scenario)


@pytest.mark.parametrize("ring", ["pass-kv", "pass-q"])
def test_cp_layer_replay_equals_simulating_every_layer(monkeypatch, ring):
    scenario = cp_scenario(
        [{"prompt_tokens": 8192, "decode_tokens": 2}, {"prompt_tokens": 512, "cached_tokens": 16000}], ring
    )
    full = _simulated_every_layer(monkeypatch, scenario)
    fast = run(scenario)
    assert fast.events < full.events / 2  # the replay ran
    _assert_same(fast.metrics, full.metrics)
    cols = ["component", "track", "name", "category"]
    a, b = (r.spans.sort_values(cols + ["start_s"], kind="stable").reset_index(drop=True) for r in (fast, full))
    assert len(a) == len(b) and (a[cols] == b[cols]).all().all()
    for col in ("start_s", "end_s", "bytes", "flop"):
        np.testing.assert_allclose(a[col], b[col], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fast.links["bytes"], full.links["bytes"], rtol=1e-12)
    np.testing.assert_allclose(fast.links["busy_s"], full.links["busy_s"], rtol=1e-9, atol=1e-15)
    for d, e in zip(fast.cluster.devices, full.cluster.devices):
        assert d.busy_s == pytest.approx(e.busy_s, rel=1e-9) and d.flop_done == pytest.approx(e.flop_done)
    _assert_same(fast.bottleneck, full.bottleneck)  # the critical path follows the same ties


def test_cp_layer_replay_stays_exact_when_the_span_recorder_fills_up_midway(monkeypatch):
    requests = [{"prompt_tokens": 8192, "decode_tokens": 1}]
    per_run = len(run(cp_scenario(requests)).spans)
    for limit in (per_run // 3, per_run // 2 + 7):
        scenario = cp_scenario(requests, trace_limit=limit)
        full, fast = _simulated_every_layer(monkeypatch, scenario), run(scenario)
        assert full.sim.recorder.dropped > 0
        assert (len(fast.spans), fast.sim.recorder.dropped) == (len(full.spans), full.sim.recorder.dropped)
        _assert_same(fast.metrics, full.metrics)


@pytest.mark.parametrize("capacity", [None, 777])
def test_cp_layer_replay_past_the_trace_limit_leaves_the_skeletons_of_simulating_every_layer(monkeypatch, capacity):
    """Past the trace limit a replayed layer's spans are skeletons only, laid out for every copy at
    once (`RecorderTape._replay_bones`): the same codes, ids and causes as simulating every layer,
    the same times (to rounding: base + offset), the same critical path; with a small skeleton
    capacity (777) the same evictions too."""
    from sim.engine import span_skeleton

    if capacity is not None:
        monkeypatch.setattr(span_skeleton.SpanSkeleton.__init__, "__defaults__", (capacity,))
    scenario = cp_scenario([{"prompt_tokens": 8192, "decode_tokens": 2}], trace_limit=10)
    full, fast = _simulated_every_layer(monkeypatch, scenario), run(scenario)
    assert fast.events < full.events / 2  # the replay ran
    a, b = (r.sim.recorder.skeleton for r in (fast, full))
    assert (a.added, a.lost) == (b.added, b.lost) and (capacity is None or a.lost > 0)
    x, y = a.frame(), b.frame()
    for col in ("component", "track", "category", "id", "after", "until"):
        assert (x[col].to_numpy() == y[col].to_numpy()).all(), col
    for col in ("start_s", "end_s"):
        np.testing.assert_allclose(x[col], y[col], rtol=1e-12, atol=1e-12)
    _assert_same(fast.bottleneck, full.bottleneck)


def test_a_replayed_layers_transfers_reach_the_energy_meter_at_once_as_one_by_one(monkeypatch):
    """A replayed layer hands an observer with `on_steps_until` (the energy meter's LinkTraffic) the
    ends of every copy's transfers in one call (sim/network/replay.py): the metrics (GPU power while
    communicating included) and the critical path are those of an `on_flows` call per transfer."""
    from sim.engine.link_traffic import LinkTraffic

    scenario = cp_scenario([{"prompt_tokens": 8192, "decode_tokens": 2}], trace_limit=10)
    batched = run(scenario)
    monkeypatch.delattr(LinkTraffic, "on_steps_until")  # every transfer by itself (`on_flows`)
    one_by_one = run(scenario)
    assert batched.metrics == one_by_one.metrics and batched.metrics["energy_j"] > 0
    assert batched.bottleneck == one_by_one.bottleneck


def test_explicit_layers_replay_exactly_where_one_rank_group_runs_alone(monkeypatch):
    """`simulate.layers: k` (k simulated, the rest replayed) now equals the full run, network energy too."""
    requests = [{"prompt_tokens": 8192}]
    full = _simulated_every_layer(monkeypatch, cp_scenario(requests))
    _assert_same(run(cp_scenario(requests, layers=2)).metrics, full.metrics)


def test_subflow_buffer_gives_reports_in_call_order_whether_lists_or_arrays():
    """The analytical backend's one-flow path reports fresh Python lists, other paths arrays (whose
    times may be one value for all sub-flows): `take` concatenates them in call order, times per
    sub-flow, and copies arrays (the network may reuse them)."""
    from sim.engine.link_traffic import SubflowBuffer

    rng = np.random.default_rng(7)
    buffer, expected = SubflowBuffer(), []
    for _ in range(50):
        n = int(rng.integers(1, 4))
        lengths = rng.integers(0, 3, n)
        flat = rng.integers(0, 20, int(lengths.sum()))
        t0, nbytes = rng.uniform(0, 1, n), rng.exponential(1e6, n)
        if rng.random() < 0.2:  # one sub-flow given as scalars and its links (`add_one`)
            lengths, flat = lengths[:1], flat[: lengths[0]]
            t0, nbytes = t0[:1], nbytes[:1]
            buffer.add_one(float(t0[0]), float(t0[0] + 1), tuple(flat.tolist()), float(nbytes[0]))
        elif rng.random() < 0.5:
            buffer.add(t0.tolist(), (t0 + 1).tolist(), flat.tolist(), lengths.tolist(), nbytes.tolist())
        else:
            start = float(t0[0])  # one time for all sub-flows
            buffer.add(np.float64(start), np.float64(start + 1), flat, lengths, nbytes)
            t0, sent = np.full(n, start), flat.copy()
            flat[:] = -1  # the caller reuses its array: the buffer kept a copy
            flat = sent
        expected.append((t0, t0 + 1, nbytes, flat, lengths))
    assert buffer.calls == 50
    got = buffer.take()
    assert got is not None and buffer.take() is None
    for column, want in zip(got, zip(*expected)):
        np.testing.assert_array_equal(column, np.concatenate(want))
