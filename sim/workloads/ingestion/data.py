"""The tabular (DLRM-style) dataset of DPP with RecD session dedup, as a pipeline data model.

Rows live in partitions of `partition_bytes` stored bytes; a split reads `columns_read` of one
partition's columns (one access per column chunk, or per `read_bytes`), decompresses, runs the
`cpu_s_per_sample` stages and cuts the rows into batches of `batch_samples`.

RecD: samples of one user session share their session-constant ("user") features. Sessions are
clustered: a session's samples are consecutive ids inside one partition. Session lengths are
geometric with mean `dedup.factor` (equivalently, each sample starts a new session with
probability 1/factor), or all equal to `factor` (`sessions: fixed`), drawn per partition from a
seeded stream. Storing and sending each distinct value once (an inverse-keyed jagged tensor:
unique values + one inverse index per sample) turns a range of n samples touching m sessions into

    units(n, m, f) = (1 - f) n + f m      sample-equivalents,

with f = `byte_fraction` for bytes (stored, read, sent; plus `index_bytes_per_sample` per sample
sent) and f = `work_fraction` for preprocessing work. m is counted from the session boundaries:
per partition for storage, per split for reads, per batch for work and bytes sent (a session cut
by a batch boundary is sent twice). Every plan also carries the same quantities without dedup,
so the pipeline reports measured ratios.
A batch's host-memory traffic (used on trainer hosts with a DRAM tier) is its work in
sample-equivalents x the decoded bytes per sample (bytes_per_sample x columns_read) x the stages'
`memory_bytes_per_byte` summed.
"""

from __future__ import annotations

import math

import numpy as np

from sim.workloads.ingestion.parts import BatchPlan, SplitPlan, Stage, batch_ranges

_BATCH_COSTS_MAX = 4096  # batch shapes (samples, sessions) whose costs are kept


def units(n: float, distinct: float, fraction: float) -> float:
    """Sample-equivalents of n samples with `distinct` sessions when `fraction` is deduplicated."""
    return (1.0 - fraction) * n + fraction * distinct


class TabularData:
    def __init__(self, config, seed: int) -> None:
        ds, self.dedup = config.dataset, config.dedup
        pre = config.preprocessing
        self.stages = tuple(Stage(name, "cpu") for name in pre.cpu_s_per_sample)
        self.cpu_s = tuple(pre.cpu_s_per_sample.values())
        self._cpu_s_total = sum(self.cpu_s)  # per sample, every stage
        # host-memory bytes per sample-equivalent of work: every stage's passes over the decoded bytes
        self.memory_per_sample = sum(pre.memory_passes()) * ds.bytes_per_sample * ds.columns_read
        self.batch_samples = pre.batch_samples
        self.dataset = ds
        self.total_samples = ds.samples
        self.per_partition = ds.samples_per_partition
        self.partitions = math.ceil(ds.samples / self.per_partition)
        self.stored_per_sample = ds.bytes_per_sample / ds.compression
        self.read_per_sample = self.stored_per_sample * ds.columns_read
        self._seed = seed
        self._cache: dict[int, np.ndarray] = {}
        self._batch_costs: dict[tuple[int, int], tuple] = {}  # (samples, sessions) -> `_costs_of`

    def partition_range(self, p: int) -> tuple[int, int]:
        return p * self.per_partition, min((p + 1) * self.per_partition, self.total_samples)

    # ---- sessions ------------------------------------------------------------------------------
    def session_starts(self, p: int) -> np.ndarray:
        """First sample id of every session of partition p (sorted)."""
        if p not in self._cache:
            if len(self._cache) > 64:
                self._cache.clear()
            start, end = self.partition_range(p)
            d = self.dedup.factor
            if self.dedup.sessions == "fixed":
                lengths = np.full(math.ceil((end - start) / d), int(d))
            else:
                rng = np.random.default_rng([self._seed, p])
                lengths = rng.geometric(1.0 / d, size=math.ceil((end - start) / d * 1.5) + 16)
                while lengths.sum() < end - start:
                    lengths = np.concatenate([lengths, rng.geometric(1.0 / d, size=len(lengths))])
            offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            self._cache[p] = start + offsets[offsets < end - start]
        return self._cache[p]

    def distinct(self, p: int, a: int, b: int) -> int:
        """Sessions that samples [a, b) of partition p touch."""
        if self.dedup.factor == 1.0:
            return b - a
        starts = self.session_starts(p)
        return int(np.searchsorted(starts, b, "left") - np.searchsorted(starts, a, "right") + 1)

    # ---- plans -----------------------------------------------------------------------------------
    def _batch(self, p: int, a: int, b: int) -> BatchPlan:
        n, m = b - a, self.distinct(p, a, b)
        costs = self._batch_costs.get((n, m))
        if costs is None:
            costs = self._costs_of(n, m)
        return BatchPlan(a, b, *costs)

    def _costs_of(self, n: int, m: int) -> tuple[tuple[float, ...], float, dict, float]:
        """(stage seconds, bytes out, counters, memory bytes) of a batch of n samples touching m
        sessions: the same for every such batch (kept, and shared: nothing changes a plan's counters)."""
        dd, tensor = self.dedup, self.dataset.tensor_bytes
        work = units(n, m, dd.work_fraction)
        index = dd.index_bytes_per_sample * n if dd.factor > 1 else 0.0
        out = units(n, m, dd.byte_fraction) * tensor + index
        counters = {
            "sent_bytes": out,
            "sent_bytes_raw": n * tensor,
            "work_core_s": work * self._cpu_s_total,
            "work_core_s_raw": n * self._cpu_s_total,
        }
        costs = (tuple(c * work for c in self.cpu_s), out, counters, work * self.memory_per_sample)
        if len(self._batch_costs) >= _BATCH_COSTS_MAX:
            self._batch_costs.clear()  # bounded memory (dedup: many (n, m))
        self._batch_costs[(n, m)] = costs
        return costs

    def plan(self, p: int, start: int, end: int) -> SplitPlan:
        n, m = end - start, self.distinct(p, start, end)
        read = units(n, m, self.dedup.byte_fraction) * self.read_per_sample
        batches = tuple(self._batch(p, a, b) for a, b in batch_ranges(start, end, self.batch_samples))
        counters = {"read_bytes": read, "read_bytes_raw": n * self.read_per_sample}
        if (start, end) == self.partition_range(p):
            counters["stored_bytes"] = units(n, m, self.dedup.byte_fraction) * self.stored_per_sample
            counters["stored_bytes_raw"] = n * self.stored_per_sample
        memory = read * self.dataset.compression + sum(b.bytes_out for b in batches)
        return SplitPlan(p, start, end, read, math.ceil(read / self.dataset.access_bytes), memory, batches, counters)

    def mean_per_sample(self) -> dict:
        """Expected costs per sample (for closed-form stage capacities): E[m] = 1 + (n - 1)/d."""
        d, n, dd = self.dedup.factor, self.batch_samples, self.dedup
        m_batch = n / d if dd.sessions == "fixed" else 1 + (n - 1) / d
        m_split = self.per_partition / d if dd.sessions == "fixed" else 1 + (self.per_partition - 1) / d
        work = units(n, m_batch, dd.work_fraction) / n
        out = units(n, m_batch, dd.byte_fraction) / n * self.dataset.tensor_bytes
        out += dd.index_bytes_per_sample if d > 1 else 0.0
        read = units(self.per_partition, m_split, dd.byte_fraction) / self.per_partition * self.read_per_sample
        return {
            "stage_s": tuple(c * work for c in self.cpu_s),
            "memory_bytes": work * self.memory_per_sample,
            "bytes_out": out,
            "read_bytes": read,
            "accesses": read / self.dataset.access_bytes,
        }

    @staticmethod
    def split_memory_bytes(config) -> float:
        """Worker memory one full split holds without dedup (for the config check)."""
        ds = config.dataset
        n = ds.samples_per_partition
        return n * ds.bytes_per_sample * ds.columns_read + n * ds.tensor_bytes
