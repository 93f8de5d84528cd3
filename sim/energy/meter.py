"""Power, energy and cost of a run, from activity: every workload kind, no per-workload code.

Power model (each component: idle power all run long, plus a dynamic part driven by activity):
- GPU: idle + (max - idle) x a, with a = 1 while a compute kernel runs, `gpu_comm_activity`
  while it only communicates, 0 otherwise (max = TDP, or the `power_cap`). Activity comes from the
  spans on the device (or on its host `h{i}` for host-level spans such as a trainer's step):
  category `comm` = communicating, `stall`/`idle`/`wait`/`fault` = nothing, anything else = compute.
  A network transfer also makes both its sender and its receiver GPUs communicate from its start
  until their last flow is delivered. Compute and comm are merged exactly per device (overlap
  counts once, at compute power).
- Host CPUs: idle + (max - idle) per core x busy cores: spans on track `cpu` of `h{i}`, `h{i}/cpu`
  or a pool host, each occupying `units` cores (Simulation.span's `units`, default 1). The
  core-seconds are exact; within a span burst they are spread evenly.
- Host DRAM (when no `ddr` tier is listed) follows the host's CPU utilisation; the GPU server's
  chassis (fans, PSU loss, NVSwitch board) follows its GPUs' mean activity; a pool host's board
  follows its core utilisation.
- NICs, scale-up ports, host links, switches, memory tiers and storage media: idle + power
  proportional to the bytes they move (sim/energy/inventory.py gives joules per byte per link),
  from the network's own accounting of every byte moved, when it moved.
- Pool hosts (storage, preprocessing workers) draw power only if something ran on them or
  crossed their NIC during the run (an autoscaler's never-started hosts are not provisioned).
- Facility overhead: (pue - 1) x IT power.

Exactness: activity is accumulated while the run goes (observers on the span recorder and the network:
sim/engine/activity.py, sim/engine/link_traffic.py, sim/engine/open_intervals.py), so energy is exact
even when the recorder drops spans past its limit.
Cost: the observers only buffer what they see (spans, link bytes per interval, transfers' GPUs) and
fold it in vectorised batches; the report integrates the merged busy intervals once at the end. A
transfer's GPUs keep one open comm interval per GPU set (the transfer's senders and receivers), fanned
out to the set's GPUs by the report; GPUs whose keys bring identical intervals (a stage group's
mirrors, the GPUs of one collective) are swept once and charged per device.
Time series: cluster power per class in up to 16,384 bins, per group (host, pool host, switch)
in up to 256 bins; bin widths are powers of two seconds, fine enough to cover the run.

Metrics (merged into every run's metrics by sim/runner.py): `energy_j`, `avg_power_w`,
`peak_power_w` (max over the fine bins, width `power_bin_s`), `cluster_power_swing_w_per_s` (the
largest change of cluster power within any one-second window; the whole run if shorter),
`cost_usd` (price per hour x run time over every component), `energy_per_sample_j` /
`energy_per_token_j` (from the workload's `samples` / `tokens` counts if it reports them, else
from `samples_per_s` / `trainer_samples_per_s` / `tokens_per_s` as average power / rate), and
breakdowns `energy_j_by_class` and `energy_j_by_scope` (gpu_hosts, pool.{name}, network).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim.energy.inventory import CLASS_ROW, CLASSES, Inventory, dynamic_w
from sim.engine.activity import SpanActivity, block_edges, union
from sim.engine.codes import distinct
from sim.engine.link_traffic import COMPILED_SPREAD_MIN, AdaptiveBins, LinkTraffic
from sim.engine.open_intervals import JOIN_ABS, JOIN_REL, OpenIntervals
from sim.engine.replay import StepKey

if TYPE_CHECKING:  # pandas is imported by the tables below only (a run's metrics need none)
    import pandas as pd

# merged intervals from which the per-device sweep runs compiled (sim/energy/sweep_kernel.py): below,
# numpy's sort costs less than loading numba (~0.35 s), which a small run then never does
COMPILED_SWEEP_MIN = 200_000

FINE_BINS = 16384
COARSE_BINS = 256
IDLE_CATEGORIES = frozenset({"stall", "idle", "wait", "fault"})
WAIT_ON_PREFIX = ("memory:", "page_fault")  # what a CPU waits on inside a busy span: no extra busy core
CPU_TRACKS = frozenset({"cpu"})
SWING_WINDOW_S = 1.0
_FEW_ENDPOINTS = 16  # transfers with at most this many endpoints are buffered (OpenIntervals.add)
_ROWS_BY_CONTENT_MAX = 4096  # transfers with at most this many flows are remembered by their endpoints
_ROWS_BY_CONTENT_SETS = 1024  # ... up to this many distinct endpoint lists (<= 8M references)
_ROWS_BY_STEPS = 1 << 17  # keyed steps whose rows are remembered (a few MB)


def largest_window_range(values: np.ndarray, size: int) -> float:
    """max over every run of `size` consecutive values of (largest - smallest), 1 < size <= len.

    The sliding maximum and minimum in O(n) (van Herk / Gil-Werman): cut the series into blocks of
    `size`; a window spans the end of one block and the start of the next, so its extreme is the
    extreme of that block's suffix and the next one's prefix. Exact (only max and min), and the
    same float as scipy.ndimage's maximum_filter1d - minimum_filter1d with mode="nearest" (whose
    windows at the edges are parts of full windows), without importing scipy.ndimage.
    """
    n = len(values)
    padded = np.concatenate([values, np.full(-n % size, values[-1])]).reshape(-1, size)

    def sliding(extreme: np.ufunc) -> np.ndarray:
        prefix = extreme.accumulate(padded, axis=1).ravel()
        suffix = extreme.accumulate(padded[:, ::-1], axis=1)[:, ::-1].ravel()
        return extreme(suffix[: n - size + 1], prefix[size - 1 : n])

    return float((sliding(np.maximum) - sliding(np.minimum)).max())


class EnergyMeter:
    """Attach before the run (`EnergyMeter.attach`), then `report(duration_s)` after it."""

    def __init__(self, sim, cluster, hardware, pools) -> None:
        self.inv = Inventory(cluster, hardware, pools)
        self.network = cluster.network
        self.spans = SpanActivity()
        # (span, device) pairs merged at once by the report: ~300 B each while merged, so a block
        # of 2^22 stays near 1.2 GiB however long the run (one block, the plain path, below that)
        self.block_entries = 1 << 22
        self.fine = AdaptiveBins(len(CLASSES), FINE_BINS)
        self.coarse = AdaptiveBins(len(self.inv.groups), COARSE_BINS)
        cls, grp, coef = self.inv.link_coefficients()
        self.traffic = LinkTraffic([(cls, coef, self.fine), (grp, coef, self.coarse)], self._transfer_ends)
        self._devices = list(self.inv.device_index)
        self._device_row = {name: i for i, name in enumerate(self._devices)}  # name -> row, O(1) per flow
        # a transfer's GPUs communicate as one: per GPU set (a transfer's senders and receivers) one
        # row of open intervals and one span key, fanned out to the set's GPUs by the report (16K
        # GPUs in 128-GPU CP rings: 128x fewer intervals than one per GPU per step)
        self._rows_by_step: dict[StepKey, list[int]] = {}  # a keyed step's transfer -> its rows (`_rows_of`)
        self._set_by_content: dict[tuple, int] = {}  # (srcs, dsts) as tuples -> their GPU set's row
        self._set_of_rows: dict[bytes, int] = {}  # a GPU set (its device rows) -> its row
        self._set_rows: dict[int, list[int]] = {}  # span key of a GPU set -> its device rows
        self._comm_key = np.array([self.spans.key_id((node, "flow", "comm")) for node in self._devices], dtype=np.int64)
        self._comm = OpenIntervals(  # rows: each GPU, then the GPU sets as they appear
            len(self._devices),
            lambda rows, start, end: self.spans.add_many(self._comm_key[rows], start, end),
        )
        sim.recorder.observers.append(self.spans)
        cluster.network.traffic_observers.append(self.traffic)

    def _transfer_ends(self, transfers) -> None:
        """Transfers' GPUs (senders and receivers) communicate from each one's start until its last
        flow is delivered, as GPUs inside one collective step wait for each other. `transfers`: one
        (srcs, dsts, start_s, end_s: its last flow's end, step key or None) per transfer, in the order
        they completed (`LinkTraffic.on_flows` gives one; a replayed schedule gives its steps).

        Intervals that continue the open interval of the transfer's GPU set (the next step of a
        collective starting when the last one ended) extend it instead of adding a new one
        (`OpenIntervals`), so a 16K-GPU ring all-reduce keeps one interval rather than 32K. Transfers
        in a row on the same GPUs that `OpenIntervals` would join (each starting no earlier than the
        first and no later than the end so far) are added as one: the same intervals, fewer calls."""
        add, by_step = self._comm.add, self._rows_by_step
        rows_open: list[int] | None = None  # the run of joined transfers: their rows, start, end
        s0 = e0 = 0.0
        for srcs, dsts, start_s, end_s, key in transfers:
            rows = by_step.get(key)
            if rows is None:
                rows = self._rows_of(srcs, dsts, key)
            if not rows or not end_s > start_s:
                continue
            if rows == rows_open and s0 <= start_s and not start_s > e0 * (1 + JOIN_REL) + JOIN_ABS:
                e0 = max(e0, end_s)
                continue
            if rows_open is not None:
                add(rows_open, s0, e0)
            rows_open, s0, e0 = rows, start_s, end_s
        if rows_open is not None:
            add(rows_open, s0, e0)

    def _rows_of(self, srcs: list[str], dsts: list[str], step: StepKey | None) -> list[int]:
        """The rows a transfer's GPUs communicate on: with a few endpoints (point-to-point) each GPU's
        own, else their GPU set's (`_transfer_set`); remembered by the step's key (`step`; the same
        step: the same endpoints, sim/engine/replay.py)."""
        if len(srcs) == len(dsts) == 1:  # one flow (a batch, a read): its endpoints' rows, ascending
            row = self._device_row
            a, b = row.get(srcs[0]), row.get(dsts[0])
            if a is None:
                rows = [] if b is None else [b]
            else:
                rows = [a] if b is None or b == a else [a, b] if a < b else [b, a]
        elif len(srcs) + len(dsts) <= _FEW_ENDPOINTS:
            row = self._device_row
            rows = sorted({row[n] for n in (*srcs, *dsts) if n in row})
        else:
            rows = self._transfer_set(srcs, dsts)
        if step is not None:
            if len(self._rows_by_step) >= _ROWS_BY_STEPS:
                self._rows_by_step.clear()  # bounded memory; a later transfer looks up again
            self._rows_by_step[step] = rows
        return rows

    def _transfer_set(self, srcs: list[str], dsts: list[str]) -> list[int]:
        """[row] of the GPU set of a transfer's endpoints ([] if none is a GPU; a single GPU's own row),
        remembered for the next transfer between the same endpoints, up to _ROWS_BY_CONTENT_MAX
        flows (another chunk of a collective)."""
        key = (tuple(srcs), tuple(dsts)) if len(srcs) <= _ROWS_BY_CONTENT_MAX else None
        found = self._set_by_content.get(key) if key is not None else None
        if found is None:
            row = self._device_row
            rows = np.fromiter(
                (row.get(n, -1) for seq in (srcs, dsts) for n in seq), dtype=np.int64, count=len(srcs) + len(dsts)
            )
            found = self._set_row(distinct(rows[rows >= 0]))
            if key is not None:
                if len(self._set_by_content) >= _ROWS_BY_CONTENT_SETS:
                    self._set_by_content.clear()  # bounded memory; a later transfer looks up again
                self._set_by_content[key] = found
        return [found] if found >= 0 else []

    def _set_row(self, rows: np.ndarray) -> int:
        """The open-interval row of the GPU set `rows` (ascending device rows; -1 when empty)."""
        if len(rows) <= 1:
            return int(rows[0]) if len(rows) else -1
        content = rows.tobytes()
        found = self._set_of_rows.get(content)
        if found is None:
            found = self._set_of_rows[content] = self._comm.grow()
            key = self.spans.key_id((f"{len(rows)} GPUs #{found}", "flow", "comm"))
            self._comm_key = np.append(self._comm_key, key)
            self._set_rows[key] = rows.tolist()
        return found

    @classmethod
    def attach(cls, sim, cluster, scenario) -> EnergyMeter:
        return cls(sim, cluster, scenario.hardware, scenario.workload.host_pools(scenario.hardware))

    # ---- after the run ------------------------------------------------------------------------
    def report(self, duration_s: float) -> PowerReport:
        inv = self.inv
        if hasattr(self.network, "flush"):  # flows still running at the end: bytes so far
            self.network.flush()
        self.traffic.flush()  # bin the buffered traffic
        for bins in (self.fine, self.coarse):
            bins.fit(duration_s)
        fine = AdaptiveBins(len(CLASSES), FINE_BINS, self.fine.width_s)
        coarse = AdaptiveBins(len(inv.groups), COARSE_BINS, self.coarse.width_s)
        self._comm.close()
        key_ids, start, end = self.spans.intervals()  # disjoint per (component, track, category)
        targets = [self._target(k) for k in self.spans.keys]
        for k, rows in self._set_rows.items():  # a GPU set's transfers: comm on each of its GPUs
            targets[k] = ("gpu", 1, rows)
        active = self._active_groups(targets)
        self._gpu_activity(targets, key_ids, start, end, fine, coarse)
        self._cpu_activity(targets, key_ids, start, end, fine, coarse)
        idle = [(gi, g) for gi, g in enumerate(inv.groups) if g.kind != "pool_host" or gi in active]
        fine.spread(
            [CLASS_ROW[c] for _, g in idle for c in g.idle_w],
            0.0,
            duration_s,
            [w * duration_s for _, g in idle for w in g.idle_w.values()],
        )
        coarse.spread([gi for gi, _ in idle], 0.0, duration_s, [sum(g.idle_w.values()) * duration_s for _, g in idle])
        class_j = self.fine.values() + fine.values()
        group_j = self.coarse.values() + coarse.values()
        pue = inv.site.pue
        class_j[CLASS_ROW["facility"]] = (pue - 1.0) * class_j.sum(axis=0)
        group_j *= pue
        price = np.array(
            [
                sum(g.price_per_hour.values()) if (g.kind != "pool_host" or i in active) else 0.0
                for i, g in enumerate(inv.groups)
            ]
        )
        return PowerReport(
            duration_s,
            self.fine.width_s,
            class_j,
            self.coarse.width_s,
            group_j,
            inv,
            price * duration_s / 3600.0,
            self.spans.spans,
        )

    def _target(self, key: tuple[str, str, str]):
        """What a span key drives: ('gpu', state, [device rows]), ('pool_gpu', state, component, group),
        ('cpu', group), ('touch', group) (marks a pool host as used) or None."""
        component, track, category = key
        inv = self.inv
        if category in IDLE_CATEGORIES or category.startswith(WAIT_ON_PREFIX):
            return None
        state = 1 if category == "comm" else 0
        if component in inv.device_index:
            return ("gpu", state, [inv.device_index[component]])
        host = inv.gpu_host_of(component)
        if host is not None:
            if track in CPU_TRACKS:
                return ("cpu", inv.group_index[component])
            if state == 1:
                return None  # host-level sends: NIC power comes from the traffic
            return ("gpu", 0, [inv.device_index[d] for d in inv.topology.hosts[host]])
        head, _, rest = component.partition("/")
        if component.endswith("/cpu") and inv.gpu_host_of(head) is not None:
            return ("cpu", inv.group_index[head]) if state == 0 else None
        if head in inv.pool_of:
            group = inv.group_index[head]
            if rest.startswith("g") and rest[1:].isdigit():
                return ("pool_gpu", state, component, group)
            if not rest and track in CPU_TRACKS and state == 0:
                return ("cpu", group)
            return ("touch", group)
        return None

    def _active_groups(self, targets) -> set[int]:
        inv, active = self.inv, set()
        for t in targets:
            if t is not None and t[0] in ("cpu", "touch"):
                active.add(t[1])
            elif t is not None and t[0] == "pool_gpu":
                active.add(t[3])
        topo = inv.topology
        for l in np.flatnonzero(self.network.link_bytes != 0):
            for node in (topo.link_src[l], topo.link_dst[l]):
                head = node.split("/")[0]
                if head in inv.pool_of:
                    active.add(inv.group_index[head])
        return active

    def _gpu_activity(self, targets, key_ids, start, end, fine, coarse) -> None:
        """Per GPU: exact compute / comm-only segments -> GPU and chassis energy."""
        inv = self.inv
        n_dev = len(inv.device_index)
        host_group = [inv.group_index[f"h{h}"] for h in range(len(inv.topology.hosts))]
        dev_group = [host_group[inv.cluster.devices[r].host] for r in range(n_dev)]
        pool_gpus: dict[str, int] = {}
        rows_of_key: dict[int, tuple[int, list[int]]] = {}
        for k, t in enumerate(targets):
            if t is None:
                continue
            if t[0] == "gpu":
                rows_of_key[k] = (t[1], t[2])
            elif t[0] == "pool_gpu":
                if t[2] not in pool_gpus:
                    pool_gpus[t[2]] = n_dev + len(pool_gpus)
                    dev_group.append(t[3])
                    inv.add_pool_gpu(t[2], inv.groups[t[3]].name)
                rows_of_key[k] = (t[1], [pool_gpus[t[2]]])
        # key -> its devices as CSR (host-level keys fan out to every GPU of the host)
        counts = np.zeros(len(targets), dtype=np.int64)
        key_state = np.zeros(len(targets), dtype=np.int64)
        keys = list(rows_of_key)  # ascending, as filled
        counts[keys] = [len(rows) for _, rows in rows_of_key.values()]
        key_state[keys] = [state for state, _ in rows_of_key.values()]
        flat = np.array([d for _, rows in rows_of_key.values() for d in rows], dtype=np.int64)
        sel = counts[key_ids] > 0 if len(key_ids) else np.zeros(0, dtype=bool)
        if not sel.any():
            return
        k_sel, s_sel, e_sel = key_ids[sel], start[sel], end[sel]
        n_rows = len(dev_group)
        # GPUs with the same activity (mirroring one driver, in the same collectives) are swept once
        flat, counts, rep = _activity_classes(flat, counts, key_state, k_sel, s_sel, e_sel, n_rows)
        members = _class_members(rep, np.asarray(dev_group), n_dev)
        blocks = _row_blocks(flat, counts, np.bincount(k_sel, minlength=len(targets)), self.block_entries)
        if len(blocks) > 1:  # several blocks spread separately: the bins must already cover the run
            fine.fit(float(e_sel.max()))
            coarse.fit(float(e_sel.max()))
        for lo, hi in blocks:
            if len(blocks) == 1:
                b_flat, b_counts = flat, counts
            else:
                inside = (flat >= lo) & (flat < hi)
                b_flat, b_counts = flat[inside], _segment_sums(inside, counts)
            b_sel = b_counts[k_sel] > 0
            segments = _device_segments(
                b_flat, b_counts, key_state, k_sel[b_sel], s_sel[b_sel], e_sel[b_sel], inv.site.gpu_comm_activity
            )
            self._spread_gpu(segments, members, fine, coarse)

    def _spread_gpu(self, segments, members: tuple, fine, coarse) -> None:
        """GPU and chassis energy of activity segments (t0, t1, representative device row, activity),
        for every device each representative stands for (`_class_members`)."""
        inv = self.inv
        t0, t1, dev_seg, activity = segments
        total, on_hosts, ptr, pair_group, pair_count, pair_on_host = members
        gpu_j = activity * inv.gpu_dynamic_w * (t1 - t0)  # one device's
        per_gpu = dynamic_w(inv.site.gpu_host) / max(len(inv.topology.hosts[0]), 1)
        chassis_j = activity * per_gpu * (t1 - t0)
        fine.spread(np.full(len(t0), CLASS_ROW["gpu"]), t0, t1, gpu_j * total[dev_seg])
        hosted = on_hosts[dev_seg] > 0
        if hosted.any():
            fine.spread(
                np.full(int(hosted.sum()), CLASS_ROW["chassis"]),
                t0[hosted],
                t1[hosted],
                (chassis_j * on_hosts[dev_seg])[hosted],
            )
        # per (segment, group of its devices): the devices of the class in that group
        first = ptr[dev_seg]
        n = ptr[dev_seg + 1] - first
        if int(n.sum()) >= COMPILED_SPREAD_MIN:  # the same entries, spread compiled without building them
            coarse.spread_fanout(t0, t1, gpu_j, dev_seg, ptr, pair_group, pair_count)
            if pair_on_host.any():
                coarse.spread_fanout(t0, t1, chassis_j, dev_seg, ptr, pair_group, pair_count, pair_on_host)
            return
        seg = np.repeat(np.arange(len(t0)), n)
        pair = np.repeat(first - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        groups, count = pair_group[pair], pair_count[pair]
        coarse.spread(groups, t0[seg], t1[seg], gpu_j[seg] * count)
        hosted = pair_on_host[pair]
        if hosted.any():
            seg, count = seg[hosted], count[hosted]
            coarse.spread(groups[hosted], t0[seg], t1[seg], chassis_j[seg] * count)

    def _cpu_activity(self, targets, key_ids, start, end, fine, coarse) -> None:
        """Core-seconds per CPU key, spread over its busy intervals -> CPU, DRAM and board energy."""
        inv = self.inv
        bounds = np.searchsorted(key_ids, np.arange(len(targets) + 1))  # key_ids is sorted (union)
        parts_of = {"fine": [], "coarse": []}  # (rows, start, end, joules)
        for k, t in enumerate(targets):
            if t is None or t[0] != "cpu":
                continue
            s, e = start[bounds[k] : bounds[k + 1]], end[bounds[k] : bounds[k + 1]]
            busy_s = float((e - s).sum())
            if busy_s <= 0:
                continue
            group = inv.groups[t[1]]
            cores = inv.host_cores if group.kind == "gpu_host" else inv.pool_cores(group.name)
            core_s = min(self.spans.unit_s[k], cores * busy_s)
            parts = [("cpu", inv.cpu_core_dynamic_w() * core_s)]
            if group.kind == "gpu_host" and inv.ddr_tier is None:
                parts.append(("dram", dynamic_w(inv.site.host_dram) * core_s / cores))
            if group.kind == "pool_host":
                parts.append(("chassis", dynamic_w(inv.site.cpu_host) * core_s / cores))
            for cls, joules in parts:
                amounts = joules * (e - s) / busy_s
                parts_of["fine"].append((np.full(len(s), CLASS_ROW[cls]), s, e, amounts))
                parts_of["coarse"].append((np.full(len(s), t[1]), s, e, amounts))
        for bins, parts in ((fine, parts_of["fine"]), (coarse, parts_of["coarse"])):
            if parts:  # one spread for every key's intervals
                bins.spread(*(np.concatenate(column) for column in zip(*parts)))


@dataclass
class PowerReport:
    """Energy per class over time (fine bins) and per group (coarse bins) of one run."""

    duration_s: float
    bin_s: float
    class_j: np.ndarray  # classes x FINE_BINS joules
    group_bin_s: float
    group_j: np.ndarray  # groups x COARSE_BINS joules
    inventory: Inventory
    group_cost_usd: np.ndarray
    spans_seen: int

    # ---- series ---------------------------------------------------------------------------
    def _series(self, joules: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
        n = max(int(np.ceil(self.duration_s / width - 1e-9)), 1)
        lengths = np.full(n, width)
        lengths[-1] = max(self.duration_s - (n - 1) * width, 0.0) or width
        return np.arange(n) * width, joules[..., :n] / lengths

    def class_power(self) -> pd.DataFrame:
        """Cluster power per class (W) over time: index `t_s` (bin start), one column per class."""
        import pandas as pd

        t, watts = self._series(self.class_j, self.bin_s)
        return pd.DataFrame(watts.T, index=pd.Index(t, name="t_s"), columns=list(CLASSES))

    def cluster_power_w(self) -> np.ndarray:
        """Cluster power (W) per fine bin: `class_power()` summed over the classes."""
        return self._series(self.class_j, self.bin_s)[1].sum(axis=0)

    def group_power(self) -> pd.DataFrame:
        """Power per group (host, pool host, switch) in W over the coarse bins."""
        import pandas as pd

        t, watts = self._series(self.group_j, self.group_bin_s)
        names = [g.name for g in self.inventory.groups]
        return pd.DataFrame(watts.T, index=pd.Index(t, name="t_s"), columns=names)

    def rack_power(self) -> pd.DataFrame:
        """Power per rack (W): hosts under one first-hop switch plus that switch; pools; `network`."""
        groups = self.group_power()
        racks = [g.rack for g in self.inventory.groups]
        return groups.T.groupby(racks, sort=True).sum().T

    def group_energy(self) -> pd.DataFrame:
        import pandas as pd

        inv = self.inventory
        n = self._series(self.group_j, self.group_bin_s)[0].size
        return pd.DataFrame(
            {
                "group": [g.name for g in inv.groups],
                "kind": [g.kind for g in inv.groups],
                "rack": [g.rack for g in inv.groups],
                "energy_j": self.group_j[:, :n].sum(axis=1),
                "cost_usd": self.group_cost_usd,
            }
        )

    # ---- scalars --------------------------------------------------------------------------
    @property
    def energy_j(self) -> float:
        n = self._series(self.class_j, self.bin_s)[0].size
        return float(self.class_j[:, :n].sum())

    def swing_w(self, window_s: float = SWING_WINDOW_S) -> float:
        """Largest |P(t2) - P(t1)| with |t2 - t1| <= window_s over the fine series."""
        p = self.cluster_power_w()
        size = min(int(window_s / self.bin_s) + 1, len(p))
        if size <= 1:
            return 0.0
        return largest_window_range(p, size)

    def metrics(self, workload_metrics: dict | None = None) -> dict:
        wm = workload_metrics or {}
        inv = self.inventory
        energy = self.energy_j
        power = self.cluster_power_w()
        avg = energy / self.duration_s if self.duration_s > 0 else 0.0
        n = self._series(self.class_j, self.bin_s)[0].size
        scope: dict[str, float] = {}
        for g, j in zip(inv.groups, self.group_j[:, :n].sum(axis=1)):
            name = "gpu_hosts" if g.kind == "gpu_host" else f"pool.{g.pool}" if g.kind == "pool_host" else "network"
            scope[name] = scope.get(name, 0.0) + float(j)
        out = {
            "energy_j": energy,
            "avg_power_w": avg,
            "peak_power_w": float(power.max()) if len(power) else 0.0,
            "cluster_power_swing_w_per_s": self.swing_w(),
            "power_bin_s": self.bin_s,
            "cost_usd": float(self.group_cost_usd.sum()),
            "energy_j_by_class": {c: float(self.class_j[i, :n].sum()) for i, c in enumerate(CLASSES)},
            "energy_j_by_scope": scope,
        }
        out.update(per_unit_energy(wm, energy, avg))
        return out


def per_unit_energy(metrics: dict, energy_j: float, avg_power_w: float) -> dict:
    """energy_per_sample_j / energy_per_token_j from a workload's counts (or rates)."""
    out = {}
    for unit, counts, rates in (
        ("sample", ("samples",), ("samples_per_s", "trainer_samples_per_s")),
        ("token", ("tokens",), ("tokens_per_s",)),
    ):
        count = next((metrics[c] for c in counts if _positive(metrics.get(c))), None)
        if count is not None:
            out[f"energy_per_{unit}_j"] = energy_j / float(count)
            continue
        rate = next((metrics[r] for r in rates if _positive(metrics.get(r))), None)
        if rate is not None:
            out[f"energy_per_{unit}_j"] = avg_power_w / float(rate)
    return out


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _segment_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sums of `values` over consecutive segments of lengths `counts` (empty segments sum to 0)."""
    c = np.r_[0, np.cumsum(values, dtype=np.int64)]
    ptr = np.r_[0, np.cumsum(counts)]
    return c[ptr[1:]] - c[ptr[:-1]]


def _activity_classes(flat, counts, key_state, k_sel, s_sel, e_sel, n_rows: int) -> tuple:
    """Devices whose keys bring the same intervals (the same state and the same start and end
    times: GPUs that mirror one driver, GPUs of one collective's set) have the same activity: one
    representative per such class is swept. Returns the key -> device CSR (`flat`, `counts`)
    restricted to the representatives and, per device row, its representative (-1: no activity).
    `k_sel` (sorted), `s_sel`, `e_sel`: the keys' intervals."""
    bounds = np.searchsorted(k_sel, np.arange(len(counts) + 1))
    content = np.full(len(counts), -1, dtype=np.int64)
    seen: dict[tuple, int] = {}
    for k in np.flatnonzero((counts > 0) & (np.diff(bounds) > 0)).tolist():
        a, b = bounds[k], bounds[k + 1]
        content[k] = seen.setdefault((int(key_state[k]), s_sel[a:b].tobytes(), e_sel[a:b].tobytes()), len(seen))
    entry_content = np.repeat(content, counts)
    has = entry_content >= 0
    dev, c = flat[has], entry_content[has]
    order = np.lexsort((c, dev))
    dev, c = dev[order], c[order]
    distinct = np.r_[True, (dev[1:] != dev[:-1]) | (c[1:] != c[:-1])]  # the same content twice adds nothing
    dev, c = dev[distinct], c[distinct]
    starts = np.flatnonzero(np.r_[True, dev[1:] != dev[:-1]]) if len(dev) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(dev)].astype(np.int64)
    rep = np.full(n_rows, -1, dtype=np.int64)
    classes: dict[bytes, int] = {}
    for d, a, b in zip(dev[starts].tolist(), starts.tolist(), ends.tolist()):
        rep[d] = classes.setdefault(c[a:b].tobytes(), d)
    kept = rep[flat] == flat  # a representative's entries
    return flat[kept], _segment_sums(kept, counts), rep


def _class_members(rep: np.ndarray, dev_group: np.ndarray, n_dev: int) -> tuple:
    """Per representative row: (devices it stands for, those on GPU hosts (chassis power), CSR
    pointer into its (group, device count, on a GPU host) pairs, and the pairs)."""
    rows = np.flatnonzero(rep >= 0)
    n_rows = len(rep)
    total = np.bincount(rep[rows], minlength=n_rows)
    on_hosts = np.bincount(rep[rows], weights=(rows < n_dev).astype(float), minlength=n_rows)
    n_groups = int(dev_group.max()) + 1 if len(dev_group) else 1
    code = rep[rows] * n_groups + dev_group[rows]
    pairs, first, count = np.unique(code, return_index=True, return_counts=True)
    pair_rep, pair_group = pairs // n_groups, pairs % n_groups
    host_of_pair = rows[first] < n_dev  # a group's devices are all on GPU hosts, or all pool GPUs
    ptr = np.r_[0, np.cumsum(np.bincount(pair_rep, minlength=n_rows))]
    return total.astype(float), on_hosts, ptr, pair_group, count.astype(float), host_of_pair


def _row_blocks(flat: np.ndarray, counts: np.ndarray, spans_per_key: np.ndarray, block_entries: int) -> list:
    """Device rows cut into consecutive [lo, hi) blocks of about `block_entries` (span, device) pairs
    each, so that per-device activity is merged a block at a time (bounded memory): each device's
    pairs all fall in its own block. One block [0, rows) when everything fits."""
    rows = int(flat.max()) + 1 if len(flat) else 1
    edges = block_edges(np.bincount(flat, weights=np.repeat(spans_per_key, counts), minlength=rows), block_entries)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _device_segments(flat, counts, key_state, k_sel, s_sel, e_sel, comm_activity: float) -> tuple:
    """Per device row: the spans of keys fanned out to their devices (CSR `flat`/`counts`), merged
    per (device, compute|comm) and swept into segments (t0, t1, device, activity): activity 1 while
    a compute interval is open, `comm_activity` while only communication is, device-major order."""
    ptr = np.r_[0, np.cumsum(counts)]
    reps = counts[k_sel]
    first = np.repeat(np.cumsum(reps) - reps, reps)
    device = flat[np.repeat(ptr[k_sel], reps) + np.arange(int(reps.sum())) - first]
    state = key_state[np.repeat(k_sel, reps)]
    dev, s, e = union(device * 2 + state, np.repeat(s_sel, reps), np.repeat(e_sel, reps))
    if len(dev) >= COMPILED_SWEEP_MIN:
        from sim.energy.sweep_kernel import sweep  # numba: imported when first needed

        return sweep(dev, s, e, float(comm_activity))
    return _sweep(dev, s, e, comm_activity)


def _sweep(dev: np.ndarray, s: np.ndarray, e: np.ndarray, comm_activity: float) -> tuple:
    """(t0, t1, device, activity) of the busy segments of merged intervals (`dev` = device x 2 +
    state, sorted by it then start, disjoint per dev), by sorting every start and end by device and
    time (sim/energy/sweep_kernel.py merges each device's lists instead: the same segments)."""
    d, st = dev // 2, dev % 2
    # sweep-line per device: counters of open compute / comm intervals between events
    t = np.r_[s, e]
    dd = np.r_[d, d]
    dc = np.r_[np.where(st == 0, 1, 0), np.where(st == 0, -1, 0)]
    dm = np.r_[np.where(st == 1, 1, 0), np.where(st == 1, -1, 0)]
    order = np.lexsort((t, dd))
    t, dd, c, m = t[order], dd[order], np.cumsum(dc[order]), np.cumsum(dm[order])
    same = dd[1:] == dd[:-1]
    t0, t1, dev_seg = t[:-1][same], t[1:][same], dd[:-1][same]
    activity = np.where(c[:-1][same] > 0, 1.0, np.where(m[:-1][same] > 0, comm_activity, 0.0))
    busy = (activity > 0) & (t1 > t0)
    return t0[busy], t1[busy], dev_seg[busy], activity[busy]
