"""`kind: trace_replay` on small traces written here in the torch.profiler (Chrome/Kineto) and Chakra
JSON layouts (synthetic format samples: their times are chosen, not measured), checked against
closed forms:

- nothing re-timed: every step replays in exactly its measured time;
- a GEMM re-timed: the step changes by (device model - measured) for that op, the model without the
  launch overhead (the trace keeps launch/dispatch time outside the op);
- scale factors multiply the time kept as measured;
- gloo: a collective issued by `c10d::allreduce_` runs on the worker thread through the network
  (what `collective(...)` takes on the same cluster), and the issuing thread's gap in which it ended
  becomes a wait for it;
- GPU: a kernel starts after the runtime call that launched it; cudaDeviceSynchronize waits for it;
- Chakra: nodes follow their data dependencies; a collective node meets its peers.
Real traces recorded with torch are replayed in tests/validation/test_measured.py.
"""

from __future__ import annotations

import json

import pytest

from hardware_models import catalog
from sim.cluster.cluster import Cluster
from sim.engine.simulation import Simulation
from sim.errors import ScenarioError
from sim.network.collectives import collective
from sim.runner import run
from sim.scenario.model import scenario_from_dict

H100 = catalog.device("h100-sxm")


def x(name, ts_us, dur_us, tid=1, cat="cpu_op", pid=100, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts_us, "dur": dur_us, "args": args}


def mm(ts, dur, m=1024, k=1024, n=1024, tid=1):
    return x("aten::mm", ts, dur, tid, **{"Input Dims": [[m, k], [k, n]], "Input type": ["float", "float"]})


def write(tmp_path, name, events, **top):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return str(path)


def replay(trace, devices=1, gpu="h100-sxm", **workload):
    hw = {"gpu": gpu, "gpus_per_node": 1, "nodes": devices, "topology": {"kind": "single-switch"}}
    scenario = scenario_from_dict(
        {"name": "t", "hardware": hw, "workload": {"kind": "trace_replay", "trace": trace, **workload}}
    )
    return run(scenario, limits=None)


def one_step(tmp_path):
    """ProfilerStep#1 [0, 1000] us: aten::linear [100, 600] holding aten::mm [150, 550]; aten::relu [700, 800]."""
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        x("aten::linear", 100, 500),
        mm(150, 400),
        x("aten::relu", 700, 100, **{"Input Dims": [[1024, 1024]], "Input type": ["float"]}),
    ]
    return write(tmp_path, "step.json", events)


ALL_MEASURED = {"gemm": "measured", "attention": "measured", "embedding": "measured", "elementwise": "measured"}


def test_nothing_retimed_replays_the_measured_step(tmp_path):
    m = replay(one_step(tmp_path), retime=ALL_MEASURED).metrics
    assert m["step_s"] == pytest.approx([1000e-6]) and m["measured_step_s"] == pytest.approx([1000e-6])
    assert m["replay_error"] == pytest.approx(0.0, abs=1e-12)
    assert m["time_by_category_s"]["gemm"] == pytest.approx(400e-6)
    assert m["time_by_category_s"]["elementwise"] == pytest.approx(100e-6)


def test_a_retimed_gemm_takes_the_device_model_time_without_launch_overhead(tmp_path):
    m = replay(one_step(tmp_path), retime={**ALL_MEASURED, "gemm": "model"}).metrics
    gemm = H100.gemm_time_s(1024, 1024, 1024, "fp32") - H100.launch_overhead
    assert m["time_by_category_s"]["gemm"] == pytest.approx(gemm)
    assert m["step_s"][0] == pytest.approx(1000e-6 - 400e-6 + gemm)


def test_scale_multiplies_the_time_kept_as_measured(tmp_path):
    m = replay(one_step(tmp_path), retime=ALL_MEASURED, scale={"gemm": 0.5, "other": 2.0, "gap": 3.0}).metrics
    # other: linear's own 100 us; gap: the step's own 100 + 100 + 200 us outside ops
    assert m["step_s"][0] == pytest.approx(200e-6 + 2 * 100e-6 + 3 * 400e-6 + 100e-6)


def gloo_rank(rank: int, work_us: float):
    """Step [0, 2000]: compute [0, 500], c10d::allreduce_ [500, 520] issues gloo:all_reduce of 1 MiB on
    the worker thread [520, 520 + work]; the main thread waits (a gap) and ends the step 30 us after it."""
    end = 520 + work_us
    dims = {"Input Dims": [[262144]], "Input type": ["float"]}
    return [
        x("ProfilerStep#1", 0, end + 30, cat="user_annotation"),
        mm(0, 500),
        x("c10d::allreduce_", 500, 20, **{"Input Dims": [[[262144]]]}),
        x("gloo:all_reduce", 520, work_us, tid=2, cat="user_annotation", **dims),
    ]


def test_gloo_collectives_run_through_the_network_and_the_issuing_thread_waits(tmp_path):
    files = [
        write(tmp_path, f"rank{r}.json", gloo_rank(r, 1500), distributedInfo={"rank": r, "world_size": 2})
        for r in range(2)
    ]
    m = replay(files, devices=2, retime=ALL_MEASURED).metrics
    sim = Simulation()
    hw = scenario_from_dict(
        {
            "name": "c",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1, "nodes": 2, "topology": {"kind": "single-switch"}},
            "workload": {"kind": "collective", "bytes": 1},
        }  # fmt: skip
    ).hardware
    cluster = Cluster.build(sim, hw)
    proc, _ = collective(cluster.network, "all_reduce", cluster.nodes([0, 1]), 262144 * 4, "auto", protocol=None)
    sim.env.run(proc)
    assert m["collectives"] == 2 and m["ranks"] == 2
    assert m["step_s"][0] == pytest.approx(520e-6 + sim.now + 30e-6)  # the 1500 us wait became the network's time
    assert m["measured_step_s"] == pytest.approx([2050e-6])


def test_a_gpu_kernel_follows_its_launch_and_a_sync_waits_for_it(tmp_path):
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        x("aten::mm", 10, 40, **{"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16"] * 2}),
        x("cudaLaunchKernel", 20, 10, cat="cuda_runtime", correlation=7),
        x("cudaDeviceSynchronize", 60, 930, cat="cuda_runtime"),
        x("sm90_xmma_gemm_bf16", 35, 900, tid=7, pid=0, cat="kernel", correlation=7),
    ]
    m = replay(write(tmp_path, "gpu.json", events)).metrics
    kernel = H100.gemm_time_s(4096, 4096, 4096, "bf16") - H100.launch_overhead
    # CPU: 10 us gap, launch ends at 30 us; kernel [30, 30 + model]; sync returns then; 10 us to the step's end
    assert m["step_s"][0] == pytest.approx(30e-6 + kernel + 10e-6)
    assert m["time_by_category_s"]["gemm"] == pytest.approx(kernel)


def chakra(rank: int, comp_us: float):
    return {
        "rank": rank,
        "nodes": [
            {"id": 1, "name": "aten::mm", "type": "COMP_NODE", "duration_micros": comp_us},
            {"id": 2, "name": "all_reduce", "type": "COMM_COLL_NODE", "data_deps": [1],
             "attr": [{"name": "comm_type", "int64_val": 0}, {"name": "comm_size", "int64Val": "1048576"}]},
            {"id": 3, "name": "meta", "type": "METADATA_NODE"},
            {"id": 4, "name": "aten::relu", "type": 4, "durationMicros": 50, "dataDeps": [2, 3]},
        ],
    }  # fmt: skip


def test_chakra_nodes_follow_their_dependencies_and_collectives_meet_their_peers(tmp_path):
    files = []
    for r, comp in ((0, 100), (1, 300)):
        (tmp_path / f"et.{r}.json").write_text(json.dumps(chakra(r, comp)))
        files.append(str(tmp_path / f"et.{r}.json"))
    m = replay(files, devices=2).metrics
    alone = replay(files, devices=2, collectives="measured").metrics  # collectives take their measured 0 s
    assert alone["makespan_s"] == pytest.approx(300e-6 + 50e-6)  # the slower rank's chain
    assert m["makespan_s"] > alone["makespan_s"]  # + the all-reduce, started when the slower rank arrives
    assert m["ignored"] == ["meta"] and m["collectives"] == 2


def test_a_missing_trace_is_a_one_line_error(tmp_path):
    with pytest.raises(ScenarioError) as err:
        replay(str(tmp_path / "nope.json"))
    assert "workload.trace" in str(err.value)
