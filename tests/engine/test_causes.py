"""Every span records what released it (sim/engine/simulation.py, "Causes"): `until`, what its end
waited for, and `after`, what its start waited for. These tests build small processes by hand and
check the references against what the processes did."""

import simpy

from hardware_models import catalog
from sim.engine.compute import Device
from sim.engine.simulation import NO_CAUSE, Simulation


def _device(sim: Simulation, node: str) -> Device:
    return Device(sim, node, catalog.resolve("device", "h100-sxm"), host=0)


def _rows(sim: Simulation) -> dict[str, dict]:
    df = sim.recorder.frame()
    return {r["name"]: r for r in df.to_dict("records")}


def test_kernels_on_one_stream_each_wait_for_the_one_before():
    sim = Simulation()
    gpu = _device(sim, "h0/g0")
    for name in ("a", "b", "c"):
        gpu.run(name, 1.0)
    sim.env.run()
    rows = _rows(sim)
    assert rows["a"]["after"] == NO_CAUSE  # released by nothing recorded: the start of the run
    assert rows["b"]["after"] == rows["b"]["until"] == rows["a"]["id"]
    assert rows["c"]["after"] == rows["b"]["id"]


def test_a_span_that_waits_for_several_ends_by_the_last_of_them():
    sim = Simulation()
    g0, g1 = _device(sim, "h0/g0"), _device(sim, "h0/g1")

    def step():
        start = sim.now
        yield sim.all_of([g0.run("short", 1.0), g1.run("long", 3.0)])
        sim.span("h0/g0", "comm", "wait both", start, category="comm")

    sim.process(step())
    sim.env.run()
    rows = _rows(sim)
    assert rows["wait both"]["until"] == rows["long"]["id"]


def test_a_timeout_between_two_kernels_keeps_the_first_as_the_cause_of_the_second():
    sim = Simulation()
    gpu = _device(sim, "h0/g0")

    def chain():
        yield gpu.run("a", 1.0)
        yield sim.timeout(0.5)  # latency: nothing recorded runs
        yield gpu.run("b", 1.0)

    sim.process(chain())
    sim.env.run()
    rows = _rows(sim)
    assert rows["b"]["after"] == rows["a"]["id"]
    assert rows["b"]["start_s"] - rows["a"]["end_s"] == 0.5


def test_the_current_cause_follows_events_triggered_by_hand():
    sim = Simulation()
    gpu = _device(sim, "h0/g0")
    ready = sim.env.event()

    def producer():
        yield gpu.run("produce", 2.0)
        ready.succeed()

    def consumer():
        yield ready
        yield gpu.run("consume", 1.0)

    sim.process(consumer())
    sim.process(producer())
    sim.env.run()
    rows = _rows(sim)
    assert rows["consume"]["after"] == rows["produce"]["id"]


def test_ids_are_handed_out_for_dropped_spans_too():
    sim = Simulation(span_limit=2)
    gpu = _device(sim, "h0/g0")
    for name in "abcd":
        gpu.run(name, 1.0)
    sim.env.run()
    assert sim.recorder.dropped == 2 and sim.recorder.next_id == 4
    assert [r[8] for r in sim.recorder.rows] == [0, 1]


def test_the_environment_still_runs_like_simpy():
    sim = Simulation()
    out = []

    def proc(env: simpy.Environment):
        yield env.timeout(1)
        out.append(env.now)
        return "done"

    p = sim.process(proc(sim.env))
    assert sim.env.run(until=p) == "done" and out == [1]
