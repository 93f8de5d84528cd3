"""Storage of the flow table (sim/network/flow_table.py): the flow network's active flows as slots.

A flow is a row of link entries (fraction of its rate on each link). `FlowSlots` keeps the rows as
slot arrays with spare room: admission appends, completion clears a slot, and dead slots are
compacted away once they outnumber live ones (amortised O(1) per flow). Bytes left are kept
lazily: bytes at the last rate change of the flow plus its rate times the time since, so a flow
whose rate does not change costs nothing. Per link the table keeps the load (bytes/s), the summed
entries and the number of entries of live flows.

Entries on *shared* links (links between switches) are stored once per *bundle*: the distinct
shared-entry sets (sim/network/flow_bundles.py). All flows from the hosts of one leaf to the hosts
of another share one bundle (in a 1,024-GPU all-to-all: ~1,000 bundles for ~130,000 flows). A
flow's other (edge) entries are kept per flow.

A *clocked* flow (one that shares its bundle's rate, sim/network/flow_clocks.py) reads its rate and
bytes left off its bundle's clock; the queries here answer for loose and clocked flows alike.
Adding flows records what came, removing them what went and the lowest rate that left: what a
refill (`FlowTable.recompute`) starts from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.engine.codes import ranges
from sim.network.flow_bundles import Bundles, Growable, owners
from sim.network.flow_clocks import BundleClocks
from sim.network.max_min import flow_matrix

if TYPE_CHECKING:
    import scipy.sparse as sp

_SLOT_FIELDS = {
    "start": (np.int64, 0),
    "length": (np.int64, 0),
    "bundle": (np.int64, -1),
    "group": (np.int64, -1),
    "flow": (np.int64, 0),
    "rate": (float, 0.0),
    "left": (float, 0.0),
    "t_ref": (float, 0.0),
    "finish": (float, np.inf),
    "due": (float, np.inf),
    "alive": (bool, False),
    "fresh": (bool, False),
    "clocked": (bool, False),
    "key": (float, 0.0),
}  # clocked: left = key - clock's v


class FlowSlots:
    """Active flows as slots, their entries and per-link sums (see the module docstring). `shared`:
    per link, True for links between switches (entries on them are stored per bundle)."""

    def __init__(self, capacity: np.ndarray, shared: np.ndarray | None = None) -> None:
        self.capacity = np.asarray(capacity, dtype=float)
        self.num_links = len(self.capacity)
        self.shared = np.zeros(self.num_links, dtype=bool) if shared is None else np.asarray(shared, dtype=bool)
        self.link_rate = np.zeros(self.num_links)  # bytes/s on each link
        self.link_weight = np.zeros(self.num_links)  # summed entries of live flows per link
        self.link_entries = np.zeros(self.num_links, dtype=np.int64)
        self.link_bundled = np.zeros(self.num_links, dtype=np.int64)  # entries of flows with a bundle
        # links that may be in use: every link with entries or a rate is among the first n_listed of
        # listed_links (flagged in `listed`); idle ones leave it when the flow network advances
        # (sim/network/links_kernel.py `advance`)
        self.listed_links = np.zeros(self.num_links, dtype=np.int64)
        self.n_listed = 0
        self.listed = np.zeros(self.num_links, dtype=bool)
        self.bundles = Bundles()
        self.clocks = BundleClocks(self.num_links)
        self._slots = Growable(_SLOT_FIELDS)
        self._entries = Growable({"link": (np.int64, 0), "weight": (float, 0.0)})  # edge entries
        self.n_alive = 0
        self._loose = np.zeros(0, dtype=np.int64)  # live slots not in a clock, ascending
        self._added: list[np.ndarray] = []
        self._added_links: list[np.ndarray] = []
        self._lowest_removed = np.inf
        self._removed_links: list[np.ndarray] = []

    @property
    def compiled(self) -> bool:
        """Whether sums run compiled (numba loaded; `FlowTable` says when)."""
        return False

    def __getattr__(self, name: str) -> np.ndarray:  # slot fields: table.rate, table.group ...
        slots = self.__dict__.get("_slots")
        if slots is not None and name in slots.arrays:
            return slots.arrays[name]
        raise AttributeError(name)

    @property
    def n_slots(self) -> int:
        return self._slots.size

    # ---- adding and removing flows ----------------------------------------------------------
    def add(
        self,
        flat: np.ndarray,
        weights: np.ndarray,
        lengths: np.ndarray,
        left: np.ndarray,
        group: np.ndarray,
        flow: np.ndarray,
        now: float,
    ) -> None:
        """Append flows (concatenated link ids, entry weights, entries per flow, bytes, owner)."""
        k = len(lengths)
        row = owners(lengths)
        shared = self.shared[flat]
        bundle = self.bundles.ids(flat[shared], weights[shared], np.bincount(row[shared], minlength=k))
        e_row, e_link, e_weight = row[~shared], flat[~shared], weights[~shared]
        e_len = np.bincount(e_row, minlength=k)
        s, e = self._slots, self._entries
        s.reserve(k)
        e.reserve(len(e_link))
        new = np.arange(s.size, s.size + k)
        a = s.arrays
        a["start"][new] = e.size + np.cumsum(e_len) - e_len
        a["length"][new] = e_len
        a["bundle"][new] = bundle
        a["group"][new] = group
        a["flow"][new] = flow
        a["left"][new] = left
        a["t_ref"][new] = now
        a["alive"][new] = True
        a["fresh"][new] = True  # rate 0, finish and due inf: slots are never reused
        e.arrays["link"][e.size : e.size + len(e_link)] = e_link
        e.arrays["weight"][e.size : e.size + len(e_link)] = e_weight
        s.size += k
        e.size += len(e_link)
        self.n_alive += k
        self._link_add(self.link_weight, flat, weights)
        self._link_add(self.link_entries, flat, 1)
        self._list(flat)
        in_bundle = bundle[row] >= 0
        self._link_add(self.link_bundled, flat[in_bundle], 1)
        self.clocks.ensure(self.bundles.store.size)
        self._loose = np.concatenate([self._loose, new])
        self._added.append(new)
        self._added_links.append(flat)

    def _list(self, links: np.ndarray) -> None:
        """Put the links of `links` not yet listed on `listed_links` (once each)."""
        if self.compiled:  # numba loaded: one pass (sim/network/links_kernel.py)
            from sim.network.links_kernel import enlist

            self.n_listed = enlist(
                np.ascontiguousarray(links, dtype=np.int64), self.listed, self.listed_links, self.n_listed
            )
            return
        unlisted = np.sort(links[~self.listed[links]])
        if len(unlisted):
            unlisted = unlisted[np.concatenate([[True], unlisted[1:] != unlisted[:-1]])]  # np.unique loads numpy.ma
            self.listed[unlisted] = True
            self.listed_links[self.n_listed : self.n_listed + len(unlisted)] = unlisted
            self.n_listed += len(unlisted)

    def remove(self, slots: np.ndarray) -> None:
        """Clear finished slots; their load leaves their links."""
        if not len(slots):
            return
        a = self._slots.arrays
        if self.compiled:  # the same, the arrays in one compiled call
            link, clocked, lowest, any_fresh = self._compiled_remove(slots)
            self._lowest_removed = min(self._lowest_removed, lowest)
        else:
            fresh = self.fresh[slots]
            rate = self.rates(slots)
            any_fresh = bool(fresh.any())
            if not fresh.all():
                self._lowest_removed = min(self._lowest_removed, float(rate[~fresh].min()))
            row, link, weight = self.entries(slots)
            self._link_add(self.link_rate, link, -weight * rate[row])
            self._link_add(self.link_weight, link, -weight)
            self._link_add(self.link_entries, link, -1)
            in_bundle = self.bundle[slots][row] >= 0
            self._link_add(self.link_bundled, link[in_bundle], -1)
            emptied = link[self.link_entries[link] == 0]
            self.link_rate[emptied] = 0.0  # no rounding residue on idle links
            self.link_weight[emptied] = 0.0
            clocked = slots[a["clocked"][slots]]
            for name in ("alive", "fresh", "clocked"):
                a[name][slots] = False
            for name, value in (("rate", 0.0), ("finish", np.inf), ("due", np.inf), ("group", -1)):
                a[name][slots] = value
        self._removed_links.append(link)
        if len(clocked):
            compiled = self.compiled
            members = self._member_arrays() if compiled else None
            self.clocks.leave(self.bundle[clocked], self._edge(clocked), self._is_member, compiled, members)
        if len(clocked) < len(slots):
            self._loose = self._loose[self.alive[self._loose]]
        self.n_alive -= len(slots)
        if any_fresh:  # added and removed before any refill
            self._added = [added[self.alive[added]] for added in self._added]

    def _compiled_remove(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """`remove`'s rates, per-link sums and cleared slots (sim/network/region_kernel.py
        `remove_slots`); returns the entries' links, the slots that were clocked, the lowest rate of
        those that had one and whether any was fresh."""
        from sim.network.region_kernel import remove_slots

        a, store = self._slots.arrays, self.bundles.store.arrays
        link, clocked, lowest, fresh = remove_slots(
            np.ascontiguousarray(slots, dtype=np.int64), a["bundle"], a["start"], a["length"], a["alive"],
            a["fresh"], a["clocked"], a["rate"], a["finish"], a["due"], a["group"], self.clocks.rate,
            store["start"], store["length"], self.bundles.entries.arrays["link"], self.bundles.entries.arrays["weight"],
            self._entries.arrays["link"], self._entries.arrays["weight"], self.link_rate, self.link_weight,
            self.link_entries, self.link_bundled,
        )  # fmt: skip
        return link, clocked, float(lowest), bool(fresh)

    def _link_add(self, target: np.ndarray, links: np.ndarray, values: np.ndarray | int) -> None:
        """target[links] += values (an array, or +-1 to count entries; repeated links add up)."""
        if len(links) * 8 < self.num_links:
            np.add.at(target, links, values)
        elif isinstance(values, int):
            target += values * np.bincount(links, minlength=self.num_links)
        else:
            target += np.bincount(links, values, minlength=self.num_links)

    # ---- queries ----------------------------------------------------------------------------
    def slots(self) -> np.ndarray:
        return np.flatnonzero(self.alive[: self.n_slots])

    def entries(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position in `slots`, link, weight) of all entries of `slots`: shared, then edge."""
        bundle = self.bundle[slots]
        bundled = np.flatnonzero(bundle >= 0)
        if not len(bundled):
            return self._edge(slots)
        b_row, b_link, b_weight = self.bundles.of(bundle[bundled])
        e_row, e_link, e_weight = self._edge(slots)
        return (
            np.concatenate([bundled[b_row], e_row]),
            np.concatenate([b_link, e_link]),
            np.concatenate([b_weight, e_weight]),
        )

    def rates(self, slots: np.ndarray) -> np.ndarray:
        """Current rate of `slots` (a clocked flow's is its clock's)."""
        rate = self.rate[slots].copy()
        clocked = self.clocked[slots]
        if clocked.any():
            rate[clocked] = self.clocks.rate[self.bundle[slots[clocked]]]
        return rate

    def left_at(self, slots: np.ndarray, now: float) -> np.ndarray:
        """Bytes left at `now` (rates constant since the last recompute)."""
        left = np.maximum(self.left[slots] - self.rate[slots] * (now - self.t_ref[slots]), 0.0)
        clocked = self.clocked[slots]
        if clocked.any():
            mine = slots[clocked]
            left[clocked] = self.clocks.left(self.bundle[mine], self.key[mine], now)
        return left

    def done(self, now: float) -> np.ndarray:
        """Slots with (almost) no bytes left at `now`: fewer than DONE_BYTES, or fewer than the clock
        can resolve at their rate (at large `now` a timer lands up to one ulp early)."""
        loose = self._loose
        slots = loose[self.due[loose] <= now + 4 * np.spacing(now)]
        if not self.clocks.members:
            return slots
        members = self._member_arrays() if self.compiled else None
        return np.concatenate([slots, np.array(self.clocks.due_members(now, self._is_member, members), dtype=np.int64)])

    def next_finish(self) -> float:
        flows = float(self.finish[self._loose].min()) if len(self._loose) else np.inf
        return min(flows, self.clocks.next_finish()) if self.clocks.members else flows

    def _is_member(self, key: float, slot: int) -> bool:
        """A clock's heap entry is live: its slot is alive, clocked and has this key."""
        a = self._slots.arrays
        return bool(a["alive"][slot] and a["clocked"][slot] and a["key"][slot] == key)

    def _member_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(alive, clocked, key) per slot: what `_is_member` reads, for the compiled heaps."""
        a = self._slots.arrays
        return a["alive"], a["clocked"], a["key"]

    def _are_members(self, keys: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """`_is_member` of many heap entries at once."""
        a = self._slots.arrays
        return a["alive"][slots] & a["clocked"][slots] & (a["key"][slots] == keys)

    def _edge(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position in `slots`, link, weight) of the edge entries of `slots`."""
        lengths = self.length[slots]
        idx = ranges(self.start[slots], lengths)
        return owners(lengths), self._entries.arrays["link"][idx], self._entries.arrays["weight"][idx]

    def used_links(self) -> np.ndarray:
        return self.link_entries > 0

    def matrix(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """(links x live flows) incidence and the live flows' rates (for checks)."""
        slots = self.slots()
        row, link, weight = self.entries(slots)
        order = np.argsort(row, kind="stable")
        return flow_matrix(
            np.bincount(row, minlength=len(slots)), link[order], self.num_links, weight[order]
        ), self.rates(slots)

    # ---- compaction -------------------------------------------------------------------------
    def _compact(self) -> None:
        """Drop dead slots and their entries once they outnumber the live ones (amortised O(1))."""
        dead = self.n_slots - self.n_alive
        if dead < 4096 or dead < self.n_alive:
            return
        live = self.slots()
        lengths = self.length[live]
        idx = ranges(self.start[live], lengths)
        kept = {name: values[live] for name, values in self._slots.arrays.items()}
        links, weights = self._entries.arrays["link"][idx], self._entries.arrays["weight"][idx]
        self._slots = Growable(_SLOT_FIELDS)
        self._slots.reserve(2 * len(live))
        for name, values in kept.items():
            self._slots.arrays[name][: len(live)] = values
        self._slots.arrays["start"][: len(live)] = np.cumsum(lengths) - lengths
        self._slots.size = len(live)
        self._entries = Growable({"link": (np.int64, 0), "weight": (float, 0.0)})
        self._entries.reserve(2 * len(idx))
        self._entries.arrays["link"][: len(idx)] = links
        self._entries.arrays["weight"][: len(idx)] = weights
        self._entries.size = len(idx)
        clocked = self._slots.arrays["clocked"][: len(live)]
        self._loose = np.flatnonzero(~clocked)  # slots were renumbered
        if self.clocks.members:
            mine = np.flatnonzero(clocked)
            self.clocks.rebuild(mine, self.bundle[mine], self.key[mine], self.compiled)
