"""How fast this machine runs the engine: a short probe that scales wall-time estimates to it.

`dcsim check` and `dcsim run` turn an estimate's events into seconds (sim/scenario/estimate.py,
`wall_time_s`) with rates measured on one machine; a machine that runs Python twice as slowly takes
twice as long, and a user there should hear so before a long run starts. dcsim's runs are bound by
the interpreter (SimPy's event loop and the models' Python around it), so the engine's own event
rate is a fair yardstick of a machine: `engine_events_per_s` times `PROBE_EVENTS` timeouts of one
process on a fresh SimPy environment (the loop `benchmarks/run.py` reports as "bare SimPy"; SimPy
alone, so a command that does not simulate need not import the engine's pandas), a few times, and
keeps the fastest (the least disturbed by other load). About 0.05-0.15 s in all.

`speed_factor` divides it by the probe rate of a machine on which the estimate's constants are right
(`REFERENCE_EVENTS_PER_S` in sim/scenario/estimate.py, measured by benchmarks/estimate_calibration.py).
"""

from __future__ import annotations

import time

PROBE_EVENTS = 20_000  # timeouts per probe loop
PROBE_REPEATS = 5  # loops; the fastest counts


def timeout_loop_events_per_s(env=None, events: int = PROBE_EVENTS) -> float:
    """Events/s of one process yielding `events` timeouts on `env` (default: a fresh SimPy environment)."""
    import simpy

    env = simpy.Environment() if env is None else env

    def ticker():
        for _ in range(events):
            yield env.timeout(1)

    env.process(ticker())
    start = time.perf_counter()
    env.run()
    return events / max(time.perf_counter() - start, 1e-9)


def engine_events_per_s(events: int = PROBE_EVENTS, repeats: int = PROBE_REPEATS) -> float:
    """`timeout_loop_events_per_s` on fresh SimPy environments, best of `repeats`."""
    return max(timeout_loop_events_per_s(events=events) for _ in range(repeats))


def speed_factor(reference_events_per_s: float, measured_events_per_s: float | None = None) -> float:
    """This machine's speed relative to the reference machine (2.0: twice as fast): the probe's rate
    here (measured now unless given) over the reference machine's."""
    measured = engine_events_per_s() if measured_events_per_s is None else measured_events_per_s
    return measured / reference_events_per_s
