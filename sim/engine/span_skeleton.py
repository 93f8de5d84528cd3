"""What the recorder keeps of the spans it drops past its limit: enough to walk the critical path.

A span recorder with a `trace_limit` keeps the first spans whole (names, bytes, FLOPs: the trace,
the plots) and drops the rest; the critical path is walked back from the end of the run, through
exactly the spans dropped. So each dropped span leaves its skeleton: where it ran (component, track,
category, interned as small integers), when (start, end) and its causes (id, after, until) - about
50 bytes in flat arrays instead of a Python tuple of eight objects. `capacity` bounds it (then the
path before the oldest skeleton is unknown, and the report says so).
"""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

SKELETON_CAPACITY = 20_000_000  # ~1 GB at most: past it, spans leave nothing (the path is then partial)


class SpanSkeleton:
    """Flat columns of dropped spans (see the module docstring)."""

    def __init__(self, capacity: int = SKELETON_CAPACITY) -> None:
        self.capacity = capacity
        self._names: dict[str, int] = {}
        self.where = array("i")  # 3 interned codes per span: component, track, category
        self.times = array("d")  # 2 per span: start, end
        self.causes = array("q")  # 3 per span: id, after, until
        self.lost = 0  # spans past `capacity`, which left nothing

    def __len__(self) -> int:
        return len(self.times) // 2

    def _code(self, text: str) -> int:
        code = self._names.get(text)
        if code is None:
            code = self._names[text] = len(self._names)
        return code

    def add(
        self, component: str, track: str, category: str, start_s: float, end_s: float, sid: int, after: int, until: int
    ) -> None:
        if len(self) >= self.capacity:
            self.lost += 1
            return
        code = self._code
        self.where.extend((code(component), code(track), code(category)))
        self.times.extend((start_s, end_s))
        self.causes.extend((sid, after, until))

    def extend(
        self, other: SpanSkeleton, start: int, stop: int, shift_s: float, ids: dict[int, int], entry: int
    ) -> None:
        """Add `other`'s skeletons start..stop again, `shift_s` later, with ids mapped by `ids` (a cause
        not in it becomes `entry`): a replayed repetition (sim/engine/replay.py RecorderTape)."""
        names = list(other._names)
        for k in range(start, stop):
            c, t, g = other.where[3 * k : 3 * k + 3]
            sid, after, until = other.causes[3 * k : 3 * k + 3]
            self.add(
                names[c],
                names[t],
                names[g],
                other.times[2 * k] + shift_s,
                other.times[2 * k + 1] + shift_s,
                ids[sid],
                ids.get(after, entry),
                ids.get(until, entry),
            )

    def frame(self) -> pd.DataFrame:
        """The skeletons as rows of the span table (no name, bytes or FLOPs)."""
        n = len(self)
        names = np.array(list(self._names) or [""], dtype=object)
        where = np.frombuffer(self.where, dtype=np.int32).reshape(n, 3) if n else np.zeros((0, 3), dtype=np.int32)
        times = np.frombuffer(self.times, dtype=np.float64).reshape(n, 2) if n else np.zeros((0, 2))
        causes = np.frombuffer(self.causes, dtype=np.int64).reshape(n, 3) if n else np.zeros((0, 3), dtype=np.int64)
        return pd.DataFrame(
            {
                "component": names[where[:, 0]],
                "track": names[where[:, 1]],
                "name": "",
                "start_s": times[:, 0],
                "end_s": times[:, 1],
                "bytes": 0.0,
                "flop": 0.0,
                "category": names[where[:, 2]],
                "id": causes[:, 0],
                "after": causes[:, 1],
                "until": causes[:, 2],
                "duration_s": times[:, 1] - times[:, 0],
            }
        )
