"""The per-device activity sweep of the energy report compiled (numba), for runs with many intervals.

`EnergyMeter` turns each GPU's merged compute and comm intervals into segments of constant activity
(1 while a compute interval is open, the comm activity while only a comm interval is, nothing
otherwise). The numpy path (`sim/energy/meter.py`, `_sweep`) sorts every start and end by (device,
time); a 1,024-GPU embedding iteration has ~2M intervals, and that sort took ~0.8 s. Here each
device's two interval lists, already sorted and disjoint (`union`), are merged in one pass.

The segments are the numpy path's, value for value: a segment runs from one event to the next
event of the same device with the activity after the first; events at one instant only make
zero-length segments between them, which both paths drop, so the order of tied events does not
matter. numba is imported when a run first has that many intervals (start-up); the compiled code
is cached beside this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def sweep(key, start, end, comm_activity):  # pragma: no cover (compiled)
    """(t0, t1, device, activity) of the busy segments of merged intervals `key` (device x 2 +
    state: 0 compute, 1 comm), `start`, `end`: sorted by key then start, disjoint per key."""
    n = len(key)
    t0 = np.empty(2 * n)
    t1 = np.empty(2 * n)
    device = np.empty(2 * n, np.int64)
    activity = np.empty(2 * n)
    k = 0
    i = 0
    while i < n:
        d = key[i] // 2
        a, a_end = i, i  # compute intervals [i, a_end), then comm intervals [a_end, b_end)
        while a_end < n and key[a_end] == 2 * d:
            a_end += 1
        b_end = a_end
        while b_end < n and key[b_end] == 2 * d + 1:
            b_end += 1
        b = a_end
        a_ev, b_ev = 0, 0  # events taken per list: even = the interval's start, odd = its end
        n_a, n_b = 2 * (a_end - a), 2 * (b_end - b)
        computing, communicating = 0, 0
        previous, level = 0.0, 0.0  # level 0 until the first event: no segment before it
        while a_ev < n_a or b_ev < n_b:
            ta = (start[a + a_ev // 2] if a_ev % 2 == 0 else end[a + a_ev // 2]) if a_ev < n_a else np.inf
            tb = (start[b + b_ev // 2] if b_ev % 2 == 0 else end[b + b_ev // 2]) if b_ev < n_b else np.inf
            if a_ev < n_a and (b_ev >= n_b or ta <= tb):
                t = ta
                computing += 1 if a_ev % 2 == 0 else -1
                a_ev += 1
            else:
                t = tb
                communicating += 1 if b_ev % 2 == 0 else -1
                b_ev += 1
            if level > 0 and t > previous:
                t0[k], t1[k], device[k], activity[k] = previous, t, d, level
                k += 1
            previous = t
            level = 1.0 if computing > 0 else (comm_activity if communicating > 0 else 0.0)
        i = b_end
    return t0[:k], t1[:k], device[:k], activity[:k]
