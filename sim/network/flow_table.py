"""The flow network's active flows, with max-min fair rates kept up to date incrementally (exact).

A flow is a row of link entries (fraction of its rate on each link). `FlowTable` keeps the rows as
slot arrays with spare room: admission appends, completion clears a slot, and dead slots are
compacted away once they outnumber live ones (amortised O(1) per flow). Bytes left are kept
lazily: bytes at the last rate change of the flow plus its rate times the time since, so a flow
whose rate does not change costs nothing. Per link the table keeps the load (bytes/s), the summed
entries and the number of entries of live flows.

Entries on *shared* links (links between switches) are stored once per *bundle*: the distinct
shared-entry sets (sim/network/flow_bundles.py). All flows from the hosts of one leaf to the hosts of another share one bundle
(in a 1,024-GPU all-to-all: ~1,000 bundles for ~130,000 flows). A flow's other (edge) entries are
kept per flow.

`recompute(now)` refills only the flows whose rate can have changed. Progressive filling is a
function of the water level: if every flow that finished had a rate >= L and no link of a flow
that started can fill below L, the new filling does below L exactly what the old one did, so
every flow with an old rate below L keeps it (and its links keep their load). L is the smallest
rate among finished flows and, over the links of started flows, capacity / summed entries of all
live flows on the link: the level at which the link would fill if no flow on it froze earlier
(a lower bound of its real fill level). The flows at or above L and the new ones are refilled on
the capacity the others leave, by `bundled_filling` (sim/network/max_min.py: bundles as single flows, with
an exactness check) or, when its check fails, by row-level `progressive_filling`. Flows of that
region not connected (by shared links) to a link where flows came or went or bundled flows run
keep their rates too: they see the same capacity as before (`_affected`).

After a bundled refill the bundled flows of the region join their bundle's *clock*
(sim/network/flow_clocks.py): flows that share the bundle's rate, kept as one row (their number on the
bundle's shared links, their edge entries summed per link) with bytes left read off the clock.
Refills then cost per bundle, not per flow. A refill that must go row by row first turns the
clocks of its region back into per-flow rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sim.network.flow_bundles import Bundles, Growable, owners, ranges
from sim.network.flow_clocks import BundleClocks
from sim.network.max_min import (
    bundled_filling,
    finish_and_due,
    flow_matrix,
    max_min_fair,
    progressive_filling,
)

_SLACK = 1e-9  # flows within this relative distance above/below L are refilled too
_BACKOFF_MAX = 64  # after a failed bundle check, row-level refills for up to this many updates
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


class FlowTable:
    """Active flows with max-min fair rates (see the module docstring). `shared`: per link, True
    for links between switches (entries on them are stored per bundle). `plain`: the
    straightforward path instead (every flow refilled by `max_min_fair` at every change)."""

    def __init__(self, capacity: np.ndarray, shared: np.ndarray | None = None, plain: bool = False) -> None:
        self.plain = plain  # refill all flows with `max_min_fair` (for checks)
        self.capacity = np.asarray(capacity, dtype=float)
        self.num_links = len(self.capacity)
        self.shared = np.zeros(self.num_links, dtype=bool) if shared is None else np.asarray(shared, dtype=bool)
        self.link_rate = np.zeros(self.num_links)  # bytes/s on each link
        self.link_weight = np.zeros(self.num_links)  # summed entries of live flows per link
        self.link_entries = np.zeros(self.num_links, dtype=np.int64)
        self.link_bundled = np.zeros(self.num_links, dtype=np.int64)  # entries of flows with a bundle
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
        self._backoff = 0
        self._failures = 0
        self.refills = 0  # statistics
        self.refilled_rows = 0
        self.bundled_refills = 0

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
        in_bundle = bundle[row] >= 0
        self._link_add(self.link_bundled, flat[in_bundle], 1)
        self.clocks.ensure(self.bundles.store.size)
        self._loose = np.concatenate([self._loose, new])
        self._added.append(new)
        self._added_links.append(flat)

    def remove(self, slots: np.ndarray) -> None:
        """Clear finished slots; their load leaves their links."""
        if not len(slots):
            return
        fresh = self.fresh[slots]
        rate = self.rates(slots)
        if not fresh.all():
            self._lowest_removed = min(self._lowest_removed, float(rate[~fresh].min()))
        row, link, weight = self.entries(slots)
        self._link_add(self.link_rate, link, -weight * rate[row])
        self._link_add(self.link_weight, link, -weight)
        self._link_add(self.link_entries, link, -1)
        in_bundle = self.bundle[slots][row] >= 0
        self._link_add(self.link_bundled, link[in_bundle], -1)
        self._removed_links.append(link)
        emptied = link[self.link_entries[link] == 0]
        self.link_rate[emptied] = 0.0  # no rounding residue on idle links
        self.link_weight[emptied] = 0.0
        a = self._slots.arrays
        clocked = slots[a["clocked"][slots]]
        for name in ("alive", "fresh", "clocked"):
            a[name][slots] = False
        for name, value in (("rate", 0.0), ("finish", np.inf), ("due", np.inf), ("group", -1)):
            a[name][slots] = value
        if len(clocked):
            self.clocks.leave(self.bundle[clocked], self._edge(clocked), self._is_member)
        if len(clocked) < len(slots):
            self._loose = self._loose[self.alive[self._loose]]
        self.n_alive -= len(slots)
        if fresh.any():  # added and removed before any refill
            self._added = [added[self.alive[added]] for added in self._added]

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
        return np.concatenate([slots, np.array(self.clocks.due_members(now, self._is_member), dtype=np.int64)])

    def next_finish(self) -> float:
        flows = float(self.finish[self._loose].min()) if len(self._loose) else np.inf
        return min(flows, self.clocks.next_finish()) if self.clocks.members else flows

    def _is_member(self, key: float, slot: int) -> bool:
        """A clock's heap entry is live: its slot is alive, clocked and has this key."""
        a = self._slots.arrays
        return bool(a["alive"][slot] and a["clocked"][slot] and a["key"][slot] == key)

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

    # ---- rates ------------------------------------------------------------------------------
    def recompute(self, now: float) -> None:
        """Max-min fair rates after the adds and removes since the last call (exact)."""
        if not self._added and not self._removed_links:
            return  # nothing came or went
        level = self._lowest_removed
        added_links = np.concatenate(self._added_links) if self._added_links else np.zeros(0, dtype=np.int64)
        changed = np.concatenate(self._removed_links + [added_links])  # links where flows came or went
        self._added, self._added_links, self._lowest_removed, self._removed_links = [], [], np.inf, []
        if len(added_links):
            with np.errstate(divide="ignore"):
                level = min(level, float((self.capacity[added_links] / self.link_weight[added_links]).min()))
        if level == np.inf or not self.n_alive:
            self._compact()
            return
        no_clocks = np.zeros(0, dtype=np.int64)
        if self.plain:
            if self.clocks.members:
                self._unclock(self.clocks.running(-np.inf), now)
            flows, clocks = self.slots(), no_clocks
        else:
            low = level * (1 - _SLACK)
            loose = self._loose
            flows = self._affected(loose[self.fresh[loose] | (self.rate[loose] >= low)], changed)
            clocks = self.clocks.running(low)
        attempt = not self.plain and self._backoff == 0  # try bundled filling
        if not self.plain and self._backoff > 0:
            self._backoff -= 1
        if len(clocks) and not attempt:  # row by row: clocks back to per-flow rows
            flows, clocks = np.concatenate([flows, self._unclock(clocks, now)]), no_clocks
        parts, old, old_load, residual = self._prepare(flows, clocks)
        rate = self._bundled(parts, residual) if attempt else None
        if rate is None and len(clocks):  # the check failed: the same, row by row
            flows, clocks = np.concatenate([parts["flows"], self._unclock(clocks, now)]), no_clocks
            parts, old, old_load, residual = self._prepare(flows, clocks)
        bundled = rate is not None
        if rate is None:
            rate = self._row_level(parts, residual)
        new_load = self._load(parts, rate)
        self.link_rate = new_load if old_load is None else self.link_rate - old_load + new_load
        flows, c = parts["flows"], len(clocks)
        old, rate_f = old[c:], rate[c:]
        left = np.maximum(self.left[flows] - old * (now - self.t_ref[flows]), 0.0)
        a = self._slots.arrays
        a["left"][flows] = left
        a["t_ref"][flows] = now
        a["rate"][flows] = rate_f
        a["fresh"][flows] = False
        a["finish"][flows], a["due"][flows] = finish_and_due(left, rate_f, now)
        if c:
            self.clocks.advance(clocks, now)
            self.clocks.rate[clocks] = rate[:c]
        if bundled:
            self._join(flows, left, rate_f, clocks, now)
        if c:
            self.clocks.retime(clocks)
        self.refills += 1
        self.refilled_rows += len(flows) + c
        self._compact()

    def _prepare(self, flows: np.ndarray, clocks: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray | None, np.ndarray]:
        """(parts, old rates, old load (None: the region is everything), residual capacity) of a
        refill of `flows` and `clocks`."""
        bundled = self.bundle[flows] >= 0
        flows = np.concatenate([flows[bundled], flows[~bundled]])  # bundled flows first
        parts = self._parts(flows, clocks)
        old = np.concatenate([self.clocks.rate[clocks], np.where(self.fresh[flows], 0.0, self.rate[flows])])
        if len(flows) + int(self.clocks.count[clocks].sum()) == self.n_alive:
            return parts, old, None, self.capacity
        old_load = self._load(parts, old)
        return parts, old, old_load, self.capacity - (self.link_rate - old_load)

    def _affected(self, region: np.ndarray, changed: np.ndarray) -> np.ndarray:
        """The flows of `region` whose rate can change: those connected (through shared links, by
        flows of `region`) to a link where flows started or finished or where bundled flows run.
        A group of flows connected to none of these sees the same capacity as before and keeps
        its (max-min fair) rates, e.g. the NVLink flows of a host while only network flows change."""
        single = self.bundle[region] < 0
        if not single.any():
            return region
        dirty = self.link_bundled > 0
        dirty[changed] = True
        flows = region[single]
        lengths = self.length[flows]
        link = self._entries.arrays["link"][ranges(self.start[flows], lengths)]
        row = owners(lengths)
        hit = np.zeros(len(flows), dtype=bool)
        while True:
            new = np.zeros(len(flows), dtype=bool)
            new[row[dirty[link]]] = True
            new &= ~hit
            if not new.any():
                break
            hit |= new
            dirty[link[new[row]]] = True
        keep = ~single
        keep[single] = hit
        return region[keep]

    def _parts(self, flows: np.ndarray, clocks: np.ndarray) -> dict:
        """The rows of a refill: `clocks` (bundle ids), then `flows` (bundled ones first). Their
        bundles (`unit`: compact id per bundled row, `mult`: flows per row, None if all one;
        shared entries per unit) and edge entries (a clock's pairs, the flows' own; those of
        bundled rows first, `split` of them)."""
        bundle = self.bundle[flows]
        n_bundled = int((bundle >= 0).sum())  # they come first
        c = len(clocks)
        row_bundle = np.concatenate([clocks, bundle[:n_bundled]]) if c else bundle[:n_bundled]
        count = np.bincount(row_bundle, minlength=self.bundles.store.size)
        ids = np.flatnonzero(count)
        compact = np.zeros(self.bundles.store.size, dtype=np.int64)
        compact[ids] = np.arange(len(ids))
        e_row, e_link, e_weight = self._edge(flows)
        split, mult, represented = int(self.length[flows[:n_bundled]].sum()), None, n_bundled
        if c:
            in_region = np.zeros(self.clocks.state.size, dtype=bool)
            in_region[clocks] = True
            p_bundle, p_link, p_weight = self.clocks.region_pairs(in_region)
            row_of = np.zeros(self.clocks.state.size, dtype=np.int64)
            row_of[clocks] = np.arange(c)
            e_row = np.concatenate([row_of[p_bundle], e_row + c])
            e_link, e_weight = np.concatenate([p_link, e_link]), np.concatenate([p_weight, e_weight])
            split += len(p_link)
            members = self.clocks.count[clocks]
            mult = np.concatenate([members.astype(float), np.ones(n_bundled)])
            represented += int(members.sum())
        return {
            "flows": flows,
            "clocks": c,
            "unit": compact[row_bundle],
            "units": len(ids),
            "mult": mult,
            "represented": represented,
            "shared": self.bundles.of(ids),
            "edge": (e_row, e_link, e_weight),
            "split": split,
            "rows": c + len(flows),
        }

    def _load(self, parts: dict, rate: np.ndarray) -> np.ndarray:
        """Per link: summed entries x rate of the rows (shared entries once per bundle, times the
        flows of each row)."""
        unit, mult = parts["unit"], parts["mult"]
        unit_rate = rate[: len(unit)] if mult is None else rate[: len(unit)] * mult
        per_unit = np.bincount(unit, unit_rate, minlength=parts["units"])
        u_row, u_link, u_weight = parts["shared"]
        e_row, e_link, e_weight = parts["edge"]
        return np.bincount(u_link, u_weight * per_unit[u_row], minlength=self.num_links) + np.bincount(
            e_link, e_weight * rate[e_row], minlength=self.num_links
        )

    def _bundled(self, parts: dict, residual: np.ndarray) -> np.ndarray | None:
        """Bundled filling where it pays off (at least two flows per bundle) and its check holds."""
        unit, k = parts["unit"], parts["split"]
        bundled = len(unit)
        if not bundled or parts["units"] * 2 > parts["represented"]:
            return None
        e_row, e_link, e_weight = parts["edge"]
        rate = bundled_filling(
            unit,
            parts["shared"],
            (e_row[:k], e_link[:k], e_weight[:k]),
            (e_row[k:] - bundled, e_link[k:], e_weight[k:]),
            parts["rows"] - bundled,
            residual,
            parts["mult"],
        )
        if rate is None:
            self._failures += 1
            self._backoff = min(2**self._failures, _BACKOFF_MAX)
            return None
        self._failures = 0
        self.bundled_refills += 1
        return rate

    def _row_level(self, parts: dict, residual: np.ndarray) -> np.ndarray:
        """Progressive filling of the flows one by one (no clocks among the rows)."""
        unit = parts["unit"]
        bundled = len(unit)
        u_row, u_link, u_weight = parts["shared"]
        e_row, e_link, e_weight = parts["edge"]
        # expand each bundle's shared entries to its flows
        u_len = np.bincount(u_row, minlength=parts["units"])  # u_row is sorted (Bundles.of)
        idx = ranges((np.cumsum(u_len) - u_len)[unit], u_len[unit])
        row = np.concatenate([np.repeat(np.arange(bundled), u_len[unit]), e_row])
        link, weight = np.concatenate([u_link[idx], e_link]), np.concatenate([u_weight[idx], e_weight])
        if self.plain:
            order = np.argsort(row, kind="stable")
            matrix = flow_matrix(np.bincount(row, minlength=parts["rows"]), link[order], self.num_links, weight[order])
            return max_min_fair(matrix, residual)
        return progressive_filling(row, link, weight, parts["rows"], residual)

    # ---- clocks -----------------------------------------------------------------------------
    def _join(self, flows: np.ndarray, left: np.ndarray, rate: np.ndarray, clocks: np.ndarray, now: float) -> None:
        """After a bundled refill: its bundled flows join their bundle's clock, if that clock was
        refilled with them or has no members yet (then it starts now at their rate)."""
        bundle = self.bundle[flows]
        joining = np.flatnonzero(bundle >= 0)
        if not len(joining):
            return
        b = bundle[joining]
        in_region = np.zeros(self.clocks.state.size, dtype=bool)
        in_region[clocks] = True
        new = self.clocks.count[b] == 0
        ok = in_region[b] | new
        joining, b, new = joining[ok], b[ok], new[ok]
        if not len(joining):
            return
        starting, first = np.unique(b[new], return_index=True)
        if len(starting):
            self.clocks.start(starting, rate[joining[new][first]], now)
        slots = flows[joining]
        keys = self.clocks.join(slots, b, left[joining], self._edge(slots))
        a = self._slots.arrays
        a["clocked"][slots] = True
        a["key"][slots] = keys
        a["finish"][slots] = np.inf
        a["due"][slots] = np.inf
        self._loose = self._loose[~a["clocked"][self._loose]]
        self.clocks.retime(np.unique(b))

    def _unclock(self, clocks: np.ndarray, now: float) -> np.ndarray:
        """Turn these clocks' members back into per-flow rows (bytes left and rate as of `now`);
        returns their slots."""
        slots, keys = self.clocks.member_slots(clocks, self._is_member)
        if len(slots):
            bundle = self.bundle[slots]
            left, rate = self.clocks.left(bundle, keys, now), self.clocks.rate[bundle]
            a = self._slots.arrays
            a["left"][slots], a["t_ref"][slots], a["rate"][slots], a["clocked"][slots] = left, now, rate, False
            a["finish"][slots], a["due"][slots] = finish_and_due(left, rate, now)
        self.clocks.stop(clocks)
        self._loose = np.sort(np.concatenate([self._loose, slots]))
        return slots

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
            self.clocks.rebuild(mine, self.bundle[mine], self.key[mine])
