"""Progress display for long runs: a tqdm bar on stderr showing events processed, events/s and the
simulated clock.

`drive(env, until, progress)` runs the engine's environment (sim/engine/simulation.py
`CountingEnvironment`) until the event `until` is processed, like `env.run(until=until)`. With
`progress` the environment reports to the bar every thousand events; the bar appears only after a
second of wall time (short runs stay silent). Stepping is identical either way, so results (and the
event count) do not depend on the bar.

`progress_enabled(quiet)` is the CLI's policy: on only when stderr is a terminal and `--quiet` is
not given.
"""

from __future__ import annotations

import sys

from hardware_models.units import format_seconds


def progress_enabled(quiet: bool = False, stream=None) -> bool:
    stream = stream or sys.stderr
    return not quiet and hasattr(stream, "isatty") and stream.isatty()


def drive(env, until, progress: bool = False, desc: str = "simulating") -> None:
    """Run `env` until `until` is processed; show a progress bar if `progress`."""
    if not progress:
        env.run(until=until)
        return
    from tqdm import tqdm

    bar = tqdm(
        total=None, unit="ev", unit_scale=True, delay=1.0, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True
    )
    try:
        env.run(until=until, report=lambda events: _advance(bar, events, env.now))
    finally:
        bar.close()


def _advance(bar, events: int, now_s: float) -> None:
    bar.update(events)
    bar.set_postfix_str(f"sim clock {format_seconds(now_s)}", refresh=False)
