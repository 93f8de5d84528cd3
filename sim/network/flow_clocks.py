"""Bundle clocks of the flow table (sim/network/flow_table.py): the flows of a bundle that share its rate, as one row.

In an oversubscribed fabric a bundled refill gives every flow of a bundle (flows with the same
switch-to-switch links) one rate, and keeps doing so as flows come and go. A *clock* holds such
flows together, so that a refill costs per bundle, not per flow:

- per bundle: the rate per member flow, `v` the bytes each member has sent since the clock started
  (as of time `t`: v(now) = v + rate x (now - t)), the number of members, and a heap of
  (key, slot) with key = the member's bytes left when it joined + v at that time. A member has
  key - v(now) bytes left, so members finish in key order and the head (smallest key) gives the
  clock's next finish and due time;
- *pairs*: the members' edge entries (NIC, host and scale-up links) summed per (bundle, link). In
  a refill a clock is one row: `count` times the bundle's shared entries, and its pairs as edge
  entries (the load of its members on each link at their common rate).

A member's own entries stay in the flow table, so a clock can be turned back into per-flow rows
(`member_slots`) when a refill has to treat flows one by one.

The heaps are Python lists (`heapq`) until the flow table fills compiled; from then on, the methods
called `compiled` keep them as blocks of a flat pool and push and pop them compiled
(sim/network/heap_kernel.py: `heapq`'s operations, so every heap holds its entries in the same
places). A call of the other kind turns them back first.
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import repeat

import numpy as np

from sim.engine.codes import distinct, ranges
from sim.network.flow_bundles import Growable
from sim.network.max_min import DONE_BYTES, finish_and_due

FEW_PAIR_ENTRIES = 32  # entries added to their pairs one by one (more: summed per pair first)

_NO_FLAGS = np.zeros(0, dtype=bool)
_NO_KEYS = np.zeros(0)
RESORT_PAIRS = 1024  # pairs made since the codes were last sorted, from which they are sorted again


class BundleClocks:
    """Clocks indexed by bundle id (see the module docstring). Heaps may hold stale entries (of
    members that left); `valid(key, slot)` tells the live ones and keeps each heap's top live."""

    def __init__(self, num_links: int) -> None:
        self.num_links = num_links
        self.state = Growable(
            {
                "count": (np.int64, 0),
                "rate": (float, 0.0),
                "v": (float, 0.0),
                "t": (float, 0.0),
                "head": (float, np.inf),
                "finish": (float, np.inf),
                "due": (float, np.inf),
                "heap_start": (np.int64, 0),  # the heap's block in the pool (compiled)
                "heap_size": (np.int64, 0),
                "heap_room": (np.int64, 0),
            }
        )
        self.heaps: dict[int, list[tuple[float, int]]] = {}
        self._pooled = False  # the heaps live in the pool (compiled), not in `heaps`
        self._pool_key = np.zeros(0)
        self._pool_slot = np.zeros(0, dtype=np.int64)
        self._pool_end = 0
        self.pairs = Growable(
            {"bundle": (np.int64, 0), "link": (np.int64, 0), "weight": (float, 0.0), "count": (np.int64, 0)}
        )
        self._pair_of: dict[int, int] = {}  # bundle x num_links + link -> pair
        none = np.zeros(0, dtype=np.int64)
        self._sorted: tuple[np.ndarray, np.ndarray] = (none, none)  # (codes ascending, their pairs)
        self._by_bundle: tuple[np.ndarray, np.ndarray, int, bool] = (
            np.zeros(1, dtype=np.int64),
            none,
            0,
            True,
        )  # `pairs_by_bundle`
        self.members = 0

    def __getattr__(self, name: str) -> np.ndarray:  # count, rate, v, t, head, finish, due
        state = self.__dict__.get("state")
        if state is not None and name in state.arrays:
            return state.arrays[name]
        raise AttributeError(name)

    def ensure(self, n_bundles: int) -> None:
        """Room for clocks of bundle ids below `n_bundles`."""
        extra = n_bundles - self.state.size
        if extra > 0:
            self.state.reserve(extra)
            self.state.size = n_bundles

    # ---- queries ------------------------------------------------------------------------
    def running(self, min_rate: float) -> np.ndarray:
        """Bundle ids of clocks with members whose rate is at least `min_rate`."""
        if not self.members:
            return np.zeros(0, dtype=np.int64)
        n = self.state.size
        return np.flatnonzero((self.count[:n] > 0) & (self.rate[:n] >= min_rate))

    def left(self, bundles: np.ndarray, keys: np.ndarray, now: float) -> np.ndarray:
        """Bytes left at `now` of members with these bundles and keys."""
        sent = self.v[bundles] + self.rate[bundles] * (now - self.t[bundles])
        return np.maximum(keys - sent, 0.0)

    def next_finish(self) -> float:
        n = self.state.size
        return float(self.finish[:n].min()) if n else np.inf

    def due_members(self, now: float, valid, members: tuple | None = None) -> list[int] | np.ndarray:
        """Slots of members due at `now` (bytes left below DONE_BYTES or the clock's resolution),
        taken off their heaps: the caller removes them (`leave`). `members`: the flow table's (alive,
        clocked, key) per slot, which `valid` reads: given, the heaps are popped compiled."""
        n = self.state.size
        if not n:
            return []
        limit = now + 4 * np.spacing(now)
        if members is not None:
            from sim.network.heap_kernel import due_members

            self._to_pool()
            a = self.state.arrays
            alive, clocked, key = members
            return due_members(
                np.flatnonzero(self.due[:n] <= limit), a["t"], a["v"], a["rate"], a["heap_start"], a["heap_size"],
                self._pool_key, self._pool_slot, alive, clocked, key, float(limit), DONE_BYTES,
            )  # fmt: skip
        self._to_lists()
        slots: list[int] = []
        for b in np.flatnonzero(self.due[:n] <= limit).tolist():
            heap, t, v, rate = self.heaps.get(b, []), float(self.t[b]), float(self.v[b]), float(self.rate[b])
            while heap:
                key, slot = heap[0]
                if not valid(key, slot):
                    heapq.heappop(heap)
                    continue
                left = key - v
                due = (
                    t + (left - DONE_BYTES) / rate
                    if left > DONE_BYTES and rate > 0
                    else (t if left <= DONE_BYTES else np.inf)
                )
                if due > limit:
                    break
                heapq.heappop(heap)
                slots.append(slot)
        return slots

    def member_slots(self, bundles: np.ndarray, valid_all, compiled: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(slots, keys) of the live members of these clocks, in heap order; `valid_all(keys, slots)`
        tells the live heap entries at once (an array of `valid`). `compiled`: off the pool."""
        if compiled:
            self._to_pool()
            at = ranges(self.heap_start[bundles], self.heap_size[bundles])
            keys, slots = self._pool_key[at], self._pool_slot[at]
        else:
            self._to_lists()
            entries = [entry for b in bundles.tolist() for entry in self.heaps.get(b, ())]
            keys = np.array([k for k, _ in entries], dtype=float)
            slots = np.array([s for _, s in entries], dtype=np.int64)
        live = valid_all(keys, slots)
        return slots[live], keys[live]

    def pairs_by_bundle(self) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """(start of each bundle's run, pair ids by bundle (ascending within a bundle), pairs grouped,
        whether they are numbered bundle by bundle): the pairs made before the last grouping,
        grouped by bundle; those made since (up to `RESORT_PAIRS` or a quarter more) are not in it.
        Grouped again when more were made. Pairs made in one join are numbered by (bundle, link),
        so a table whose pairs came in its first join has its ids in order (runs in bundle order
        are then in pair order)."""
        start, ids, grouped, in_order = self._by_bundle
        size = self.pairs.size
        if size - grouped > max(RESORT_PAIRS, grouped // 4) or (grouped == 0 and size):
            bundle = self.pairs.arrays["bundle"][:size]
            in_order = bool(np.all(bundle[1:] >= bundle[:-1]))
            ids = np.arange(size) if in_order else np.argsort(bundle, kind="stable")
            start = np.concatenate([[0], np.cumsum(np.bincount(bundle, minlength=self.state.size))])
            self._by_bundle = (start, ids, size, in_order)
        return self._by_bundle

    def region_pairs(self, clocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bundle, link, weight) of the non-empty pairs of `clocks` (bundle ids), in pair order (the
        order in which refills sum their loads per link)."""
        p = self.pairs
        in_region = np.zeros(self.state.size, dtype=bool)
        in_region[clocks] = True
        bundle, count = p.arrays["bundle"][: p.size], p.arrays["count"][: p.size]
        sel = np.flatnonzero(np.take(in_region, bundle) & (count > 0))  # take: faster than [] here
        return np.take(p.arrays["bundle"], sel), np.take(p.arrays["link"], sel), np.take(p.arrays["weight"], sel)

    # ---- changes ------------------------------------------------------------------------
    def advance(self, bundles: np.ndarray, now: float) -> None:
        """Move these clocks' `v` to `now` at their current rates."""
        self.v[bundles] += self.rate[bundles] * (now - self.t[bundles])
        self.t[bundles] = now

    def start(self, bundles: np.ndarray, rate: np.ndarray, now: float) -> None:
        """Clocks for bundles without members: v = 0 at `now`, at `rate` per flow."""
        self.v[bundles], self.t[bundles], self.rate[bundles] = 0.0, now, rate

    def join(
        self,
        slots: np.ndarray,
        bundles: np.ndarray,
        left: np.ndarray,
        edge: tuple[np.ndarray, np.ndarray, np.ndarray],
        compiled: bool = False,
    ) -> np.ndarray:
        """Flows (their slots, bundles, bytes left now and edge entries (owner position, link,
        weight)) join the clocks of their bundles, which run at `now`. Returns their keys.
        `compiled`: pairs summed compiled (`_add_pairs`)."""
        keys = left + self.v[bundles]
        if compiled:
            from sim.network.heap_kernel import push

            self._to_pool()
            a = self.state.arrays
            self._pool_key, self._pool_slot, self._pool_end = push(
                bundles, keys, np.ascontiguousarray(slots, dtype=np.int64), a["heap_start"], a["heap_size"],
                a["heap_room"], self._pool_key, self._pool_slot, self._pool_end,
            )  # fmt: skip
            np.add.at(self.count, bundles, 1)
            self.members += len(slots)
            owner, link, weight = edge
            self._add_pairs(bundles[owner], link, weight, 1, compiled)
            touched = distinct(bundles)
            self.head[touched] = self._pool_key[self.heap_start[touched]]
            return keys
        self._to_lists()
        order = np.argsort(bundles, kind="stable")  # per bundle in the given order: the same heaps
        grouped = bundles[order]
        entries = list(zip(keys[order].tolist(), slots[order].tolist()))
        bounds = (np.flatnonzero(grouped[1:] != grouped[:-1]) + 1).tolist() if len(entries) else []
        firsts = [0, *bounds] if len(entries) else []
        for b, i, j in zip(grouped[firsts].tolist(), firsts, [*bounds, len(entries)]):
            heap = self.heaps.setdefault(b, [])
            deque(map(heapq.heappush, repeat(heap, j - i), entries[i:j]), maxlen=0)  # pushes, in C
        np.add.at(self.count, bundles, 1)
        self.members += len(slots)
        owner, link, weight = edge
        self._add_pairs(bundles[owner], link, weight, 1, compiled)
        touched = distinct(bundles)
        self.head[touched] = [self.heaps[b][0][0] for b in touched.tolist()]
        return keys

    def leave(
        self,
        bundles: np.ndarray,
        edge: tuple[np.ndarray, np.ndarray, np.ndarray],
        valid,
        compiled: bool = False,
        members: tuple | None = None,
    ) -> None:
        """Members (by bundle, with their edge entries) leave; the table has already marked their
        slots dead, so `valid` rejects their heap entries. `compiled`: as in `join`, with `members`
        (as in `due_members`) for the heaps: in one compiled call where it finds every pair among
        the sorted codes (sim/network/clock_kernel.py; the same sums, heaps and times)."""
        if compiled and members is not None and valid is not None:
            from sim.network.clock_kernel import leave

            self._to_pool()
            a, p = self.state.arrays, self.pairs.arrays
            owner, link, weight = edge
            sorted_codes, sorted_pairs = self._sorted
            alive, clocked, key = members
            if leave(
                np.ascontiguousarray(bundles, dtype=np.int64), np.ascontiguousarray(owner, dtype=np.int64),
                np.ascontiguousarray(link, dtype=np.int64), np.ascontiguousarray(weight, dtype=float),
                self.num_links, sorted_codes, sorted_pairs, p["weight"], p["count"], a["count"], a["head"], a["rate"],
                a["v"], a["t"], a["finish"], a["due"], a["heap_start"], a["heap_size"], self._pool_key,
                self._pool_slot, alive, clocked, key, DONE_BYTES,
            ):  # fmt: skip
                self.members -= len(bundles)
                return
        np.subtract.at(self.count, bundles, 1)
        self.members -= len(bundles)
        owner, link, weight = edge
        self._add_pairs(bundles[owner], link, -weight, -1, compiled)
        self._refresh(distinct(bundles), valid, compiled, members)

    def stop(self, bundles: np.ndarray, compiled: bool = False) -> None:
        """Drop these clocks (their members became per-flow rows). `compiled`: the heaps in the pool."""
        self.members -= int(self.count[bundles].sum())
        self.count[bundles] = 0
        if compiled:
            self._to_pool()
            self.heap_size[bundles] = 0
        else:
            self._to_lists()
            for b in bundles.tolist():
                self.heaps.pop(b, None)
        p = self.pairs
        stopped = np.zeros(self.state.size, dtype=bool)
        stopped[bundles] = True
        mine = stopped[p.arrays["bundle"][: p.size]]
        p.arrays["weight"][: p.size][mine] = 0.0
        p.arrays["count"][: p.size][mine] = 0
        self._refresh(bundles, None, compiled, None)

    def retime(self, bundles: np.ndarray, compiled: bool = False) -> None:
        """Finish and due time of these clocks' heads (as the flow table computes them per flow).
        `compiled`: in one compiled call (sim/network/region_kernel.py; the same times)."""
        if compiled:
            from sim.network.region_kernel import retime

            a = self.state.arrays
            retime(bundles, a["head"], a["v"], a["rate"], a["t"], a["count"], a["finish"], a["due"], DONE_BYTES)
            return
        left = self.head[bundles] - self.v[bundles]
        self.finish[bundles], self.due[bundles] = finish_and_due(left, self.rate[bundles], self.t[bundles])
        empty = self.count[bundles] == 0
        self.finish[bundles[empty]] = np.inf
        self.due[bundles[empty]] = np.inf

    def rebuild(self, slots: np.ndarray, bundles: np.ndarray, keys: np.ndarray, compiled: bool = False) -> None:
        """Heaps from the live members (after the table renumbered its slots). `compiled`: laid out in
        a new pool (the old one's unused blocks go)."""
        order = np.lexsort((keys, bundles))  # a sorted list is a heap
        grouped = bundles[order]
        if compiled:
            from sim.network.heap_kernel import layout

            ids, counts = np.unique(grouped, return_counts=True)
            a = self.state.arrays
            self.heaps, self._pooled = {}, True
            self._pool_key, self._pool_slot, self._pool_end = layout(
                ids, counts, keys[order], np.ascontiguousarray(slots[order], dtype=np.int64), a["heap_start"],
                a["heap_size"], a["heap_room"],
            )  # fmt: skip
            return
        self._pooled = False
        entries = list(zip(keys[order].tolist(), slots[order].tolist()))
        firsts = np.flatnonzero(np.diff(grouped, prepend=-1)).tolist() if len(grouped) else []
        ends = [*firsts[1:], len(entries)]
        self.heaps = {b: entries[i:j] for b, i, j in zip(grouped[firsts].tolist(), firsts, ends)}

    def _refresh(self, bundles: np.ndarray, valid, compiled: bool = False, members: tuple | None = None) -> None:
        """Heads of these clocks after members left (stale tops popped: `valid`, or compiled with
        `members` as in `due_members`); empty clocks reset."""
        if compiled:
            from sim.network.heap_kernel import refresh

            self._to_pool()
            a = self.state.arrays
            check = valid is not None
            alive, clocked, key = members if members is not None else (_NO_FLAGS, _NO_FLAGS, _NO_KEYS)
            refresh(
                bundles, a["count"], a["head"], a["rate"], a["v"], a["heap_start"], a["heap_size"], self._pool_key,
                self._pool_slot, alive, clocked, key, check,
            )  # fmt: skip
            self.retime(bundles, compiled)
            return
        self._to_lists()
        for b in bundles.tolist():
            heap = self.heaps.get(b)
            while heap and valid is not None and not valid(*heap[0]):
                heapq.heappop(heap)
            if self.count[b] == 0 or not heap:
                self.heaps.pop(b, None)
                self.head[b], self.rate[b], self.v[b] = np.inf, 0.0, 0.0
            else:
                self.head[b] = heap[0][0]
        self.retime(bundles, compiled)

    def _to_pool(self) -> None:
        """The heaps as blocks of the pool, laid out from the lists as they are (compiled calls)."""
        if self._pooled:
            return
        from sim.network.heap_kernel import layout

        ids = np.array(sorted(b for b, heap in self.heaps.items() if heap), dtype=np.int64)
        heaps = [self.heaps[b] for b in ids.tolist()]
        entries = [entry for heap in heaps for entry in heap]
        a = self.state.arrays
        self._pool_key, self._pool_slot, self._pool_end = layout(
            ids,
            np.array([len(heap) for heap in heaps], dtype=np.int64),
            np.array([k for k, _ in entries], dtype=float),
            np.array([s for _, s in entries], dtype=np.int64),
            a["heap_start"],
            a["heap_size"],
            a["heap_room"],
        )
        self.heaps, self._pooled = {}, True

    def _to_lists(self) -> None:
        """The heaps as lists, read off the pool as they are (calls that are not compiled)."""
        if self._pooled:
            self.heaps, self._pooled = self.heap_lists(), False

    def heap_lists(self) -> dict[int, list[tuple[float, int]]]:
        """Each non-empty heap as a list of (key, slot) in heap order, wherever the heaps are kept."""
        if not self._pooled:
            return {b: list(heap) for b, heap in self.heaps.items() if heap}
        n = self.state.size
        start, size = self.heap_start[:n], self.heap_size[:n]
        return {
            b: list(zip(self._pool_key[s : s + k].tolist(), self._pool_slot[s : s + k].tolist()))
            for b, s, k in zip(np.flatnonzero(size).tolist(), start[size > 0].tolist(), size[size > 0].tolist())
        }

    def _pairs_of_codes(self, codes: np.ndarray, few: bool) -> np.ndarray:
        """The pair of each of `codes` (bundle x num_links + link), made where there is none yet in
        the order `_add_pairs` makes them (`few`: in entry order, else in code order): looked up in
        the codes sorted (`_sorted`, of the pairs made before its last rebuild), the others (made
        since, or new) one by one."""
        sorted_codes, sorted_pairs = self._sorted
        if len(sorted_codes):
            pos = np.minimum(np.searchsorted(sorted_codes, codes), len(sorted_codes) - 1)
            index = sorted_pairs[pos]
            missing = np.flatnonzero(sorted_codes[pos] != codes)
        else:
            index, missing = np.zeros(len(codes), dtype=np.int64), np.arange(len(codes))
        if len(missing):
            pair_of = self._pair_of
            if few:  # in entry order
                for i, c in zip(missing.tolist(), codes[missing].tolist()):
                    found = pair_of.get(c)
                    index[i] = self._new_pair(c) if found is None else found
            else:  # in code order
                wanted, inverse = np.unique(codes[missing], return_inverse=True)
                made = [pair_of.get(c) for c in wanted.tolist()]
                made = [self._new_pair(c) if i is None else i for c, i in zip(wanted.tolist(), made)]
                index[missing] = np.array(made, dtype=np.int64)[inverse.ravel()]
            size = self.pairs.size
            if size - len(sorted_codes) > max(RESORT_PAIRS, len(sorted_codes) // 4):  # many made since: sort again
                a = self.pairs.arrays
                every = a["bundle"][:size] * self.num_links + a["link"][:size]
                order = np.argsort(every)
                self._sorted = (every[order], order)
        return index

    def _new_pair(self, code: int) -> int:
        p = self.pairs
        p.reserve(1)
        new = p.size
        p.arrays["bundle"][new], p.arrays["link"][new] = divmod(code, self.num_links)
        p.size += 1
        self._pair_of[code] = new
        return new

    def _add_pairs(
        self, bundles: np.ndarray, link: np.ndarray, weight: np.ndarray, sign: int, compiled: bool = False
    ) -> None:
        """Add entries' weights (and +-1 entry each) to their (bundle, link) pairs. `compiled`: the
        pairs looked up by their sorted codes and the sums made compiled (the same pairs, made in
        the same order, and the same sums: sim/network/region_kernel.py `apply_pairs`)."""
        if not len(link):
            return
        if compiled:
            from sim.network.region_kernel import apply_pairs

            few = len(link) <= FEW_PAIR_ENTRIES
            index = self._pairs_of_codes(bundles * self.num_links + link, few)
            arrays = self.pairs.arrays
            apply_pairs(index, np.ascontiguousarray(weight, dtype=float), sign, few, arrays["weight"], arrays["count"])
            return
        if len(link) <= FEW_PAIR_ENTRIES:  # a few entries: one by one
            p = self.pairs
            for c, w in zip((bundles * self.num_links + link).tolist(), weight.tolist()):
                i = self._pair_of.get(c)
                if i is None:
                    i = self._new_pair(c)
                p.arrays["weight"][i] += w
                p.arrays["count"][i] += sign
                if p.arrays["count"][i] == 0:
                    p.arrays["weight"][i] = 0.0
            return
        code, inverse = np.unique(bundles * self.num_links + link, return_inverse=True)
        inverse = inverse.ravel()
        summed = np.bincount(inverse, weight, minlength=len(code))
        counted = sign * np.bincount(inverse, minlength=len(code))
        p = self.pairs
        index = np.empty(len(code), dtype=np.int64)
        for i, c in enumerate(code.tolist()):
            found = self._pair_of.get(c)
            index[i] = self._new_pair(c) if found is None else found
        p.arrays["weight"][index] += summed
        p.arrays["count"][index] += counted
        gone = index[p.arrays["count"][index] == 0]
        p.arrays["weight"][gone] = 0.0  # no rounding residue on empty pairs
