"""`Device.run` (sim/engine/compute.py `KernelRun`): a kernel is a state machine that does event for
event what a SimPy process holding the stream for the kernel's duration would. These tests run the
same kernels both ways - the process written out as the reference - and compare everything seen:
when each kernel ends and in which order, the spans with their causes, the devices' counters."""

from __future__ import annotations

import numpy as np
import pytest

from hardware_models import catalog
from sim.engine.compute import Device
from sim.engine.simulation import Simulation


def _as_a_process(device: Device, name: str, duration_s: float, stream: str, flop: float):
    """The reference: the kernel as the process `Device.run` once was."""

    def body():
        with device.stream(stream).request() as req:
            yield req
            start = device.sim.now
            duration = duration_s * device.slowdown
            yield device.sim.timeout(duration)
            device.record(stream, duration, flop)
            device.sim.span(device.node, stream, name, start, flop=flop, category="compute")

    return device.sim.process(body())


def _run(seed: int, reference: bool) -> tuple[list, list, list]:
    sim = Simulation()
    spec = catalog.resolve("device", "h100-sxm")
    devices = [Device(sim, f"g{i}", spec, host=0) for i in range(3)]
    devices[2].slowdown = 1.5
    rng = np.random.default_rng(seed)
    ended: list = []

    def issuer(k: int):
        """Launch kernels on random devices and streams, sometimes waiting for one, sometimes not."""
        for j in range(25):
            gap = float(rng.choice([0.0, 0.0, 0.5, 1.0]))
            if gap:
                yield sim.timeout(gap)
            device = devices[int(rng.integers(len(devices)))]
            stream = str(rng.choice(["compute", "comm"]))
            duration = float(rng.choice([0.0, 0.25, 1.0, 2.0]))
            launch = _as_a_process if reference else Device.run
            done = launch(device, f"k{k}.{j}", duration, stream, flop=float(j))
            done.callbacks.append(lambda _e, k=k, j=j: ended.append((sim.now, k, j)))
            if rng.random() < 0.4:
                yield done

    for k in range(5):
        sim.process(issuer(k))
    sim.env.run()
    spans = list(sim.recorder.rows)
    counters = [(d.node, sorted(d.busy_s.items()), d.flop_done) for d in devices]
    return ended, spans, counters


@pytest.mark.parametrize("seed", range(5))
def test_a_kernel_run_is_event_for_event_the_kernel_process(seed):
    ended, spans, counters = _run(seed, reference=False)
    assert (ended, spans, counters) == _run(seed, reference=True)
    assert len(ended) == 125 and len(spans) == 125
