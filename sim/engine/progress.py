"""Progress display for long runs: a tqdm bar on stderr showing events processed, events/s and the
simulated clock.

`drive(env, until, progress)` runs a SimPy environment until the event `until` is processed, like
`env.run(until=until)`. With `progress` it steps the environment itself and refreshes the bar every
thousand events; the bar appears only after a second of wall time (short runs stay silent).
Stepping is identical either way, so results (and the event count) do not depend on the bar.

`progress_enabled(quiet)` is the CLI's policy: on only when stderr is a terminal and `--quiet` is
not given.
"""

from __future__ import annotations

import sys

from hardware_models.units import format_seconds

_REFRESH_EVERY = 1 << 10  # events between bar updates (tqdm throttles the drawing)


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
    step = env.step
    done = 0
    try:
        while until.callbacks is not None:  # None once the event has been processed
            if env.peek() == float("inf"):
                raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}')
            step()
            done += 1
            if done == _REFRESH_EVERY:
                bar.update(done)
                done = 0
                bar.set_postfix_str(f"sim clock {format_seconds(env.now)}", refresh=False)
        if not until.ok:
            raise until.value
    finally:
        bar.update(done)
        bar.close()
