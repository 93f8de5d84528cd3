"""The flow network's active flows, with max-min fair rates kept up to date incrementally (exact).

`FlowTable` is a `FlowSlots` (sim/network/flow_slots.py: the flows as slot arrays, their link
entries, shared ones stored once per bundle, and per-link sums) that refills rates after flows come
and go.

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

Once the table fills compiled, a refill runs in one compiled call (sim/network/refill_kernel.py), back
here only where clocks must first be turned into per-flow rows.

After a bundled refill the bundled flows of the region join their bundle's *clock*
(sim/network/flow_clocks.py): flows that share the bundle's rate, kept as one row (their number on the
bundle's shared links, their edge entries summed per link) with bytes left read off the clock.
Refills then cost per bundle, not per flow. A refill that must go row by row first turns the
clocks of its region back into per-flow rows.
"""

from __future__ import annotations

import numpy as np

from sim.engine.codes import distinct, ranges
from sim.network.flow_bundles import owners
from sim.network.flow_slots import FlowSlots
from sim.network.max_min import (
    DONE_BYTES,
    bundled_filling,
    finish_and_due,
    flow_matrix,
    max_min_fair,
    progressive_filling,
)

_SLACK = 1e-9  # flows within this relative distance above/below L are refilled too
_BACKOFF_MAX = 64  # after a failed bundle check, row-level refills for up to this many updates
# Entries a table fills in plain Python before it switches to the compiled filling (the same rates):
# loading numba costs ~0.35 s, about what filling this many entries in Python costs, so a small run
# (the README's 2-host all-reduce fills ~0.1M) never pays it and a large one pays it once.
PYTHON_FILLING_ENTRIES = 150_000
_NO_LINKS = np.zeros(0, dtype=np.int64)
_NO_RATES = np.zeros(0)


class FlowTable(FlowSlots):
    """Active flows with max-min fair rates (see the module docstring). `shared`: per link, True
    for links between switches (entries on them are stored per bundle). `plain`: the
    straightforward path instead (every flow refilled by `max_min_fair` at every change)."""

    def __init__(self, capacity: np.ndarray, shared: np.ndarray | None = None, plain: bool = False) -> None:
        self.plain = plain  # refill all flows with `max_min_fair` (for checks)
        super().__init__(capacity, shared)
        self._backoff = 0
        self._failures = 0
        self._python_entries = 0  # filled in plain Python so far (`_compiled`)
        self._scratch: tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray] | None = None  # `_refill_scratch`
        self.refills = 0  # statistics
        self.refilled_rows = 0
        self.bundled_refills = 0

    # ---- rates ------------------------------------------------------------------------------
    def recompute(self, now: float) -> bool:
        """Max-min fair rates after the adds and removes since the last call (exact). Returns whether
        any flow came or went (else no rate, and no link's rate, changed)."""
        if not self._added and not self._removed_links:
            return False  # nothing came or went
        level = self._lowest_removed
        added_links = np.concatenate(self._added_links) if self._added_links else np.zeros(0, dtype=np.int64)
        changed = np.concatenate(self._removed_links + [added_links])  # links where flows came or went
        self._added, self._added_links, self._lowest_removed, self._removed_links = [], [], np.inf, []
        if len(added_links):
            with np.errstate(divide="ignore"):
                level = min(level, float((self.capacity[added_links] / self.link_weight[added_links]).min()))
        if level == np.inf or not self.n_alive:
            self._compact()
            return True
        no_clocks = np.zeros(0, dtype=np.int64)
        attempt = not self.plain and self._backoff == 0  # try bundled filling
        if not self.plain and self._backoff > 0:
            self._backoff -= 1
        if self.plain:
            if self.clocks.members:
                self._unclock(self.clocks.running(-np.inf), now)
            flows, clocks = self.slots(), no_clocks
        elif self.compiled:  # the steps below in one compiled call, where no clock must be unclocked
            region = self._compiled_refill(level * (1 - _SLACK), changed, attempt, now)
            if region is None:
                return True
            flows, clocks, attempt = region
        else:
            low = level * (1 - _SLACK)
            loose = self._loose
            flows = self._affected(loose[self.fresh[loose] | (self.rate[loose] >= low)], changed)
            clocks = self.clocks.running(low)
        if not len(flows) and not len(clocks):  # no rate can change (flows left below the level)
            self.refills += 1
            self._compact()
            return True
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
        left, rate_f = self._settle_rows(flows, clocks, old, rate, now), rate[c:]
        if bundled:
            self._join(flows, left, rate_f, clocks, now)
        if c:
            self.clocks.retime(clocks, self.compiled)
        self.refills += 1
        self.refilled_rows += len(flows) + c
        self._compact()
        return True

    def _compiled_refill(
        self, low: float, changed: np.ndarray, attempt: bool, now: float
    ) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """`recompute`'s refill from the level `low` in one compiled call (sim/network/refill_kernel.py:
        the same rates, loads and times to the last bit). Returns None when it is done, else the
        region (flows, clocks, whether to try the bundled filling) for `recompute` to refill row by
        row, after turning its clocks back into per-flow rows."""
        from sim.network.refill_kernel import FAILED, NOTHING, UNCLOCK, refill

        s, e, cs = self._slots.arrays, self._entries.arrays, self.clocks.state.arrays
        p, store = self.clocks.pairs.arrays, self.bundles.store
        outcome, flows, clocks, rate, left, link_rate, bundled, failed = refill(
            self._loose, changed, low, attempt, self.n_alive, self.clocks.members,
            s["bundle"], s["start"], s["length"], s["fresh"], s["rate"], s["left"], s["t_ref"], s["finish"], s["due"],
            e["link"], e["weight"], self.link_bundled, self.capacity, self.link_rate,
            self.clocks.state.size, cs["count"], cs["rate"], cs["v"], cs["t"],
            p["bundle"], p["link"], p["weight"], p["count"], self.clocks.pairs.size, *self.clocks.pairs_by_bundle(),
            store.arrays["start"][: store.size], store.arrays["length"][: store.size],
            self.bundles.entries.arrays["link"], self.bundles.entries.arrays["weight"],
            float(now), DONE_BYTES, *self._refill_scratch(),
        )  # fmt: skip
        if failed:  # as `_bundled` counts a failed check
            self._failures += 1
            self._backoff = min(2**self._failures, _BACKOFF_MAX)
        if outcome == UNCLOCK:
            return flows, clocks, attempt
        if outcome == FAILED:  # the flows (bundled first) and the clocks, row by row
            return flows, clocks, False
        self.refills += 1
        if outcome == NOTHING:
            self._compact()
            return None
        self.link_rate = link_rate
        c = len(clocks)
        if bundled:
            self._failures = 0
            self.bundled_refills += 1
            self._join(flows, left, rate[c:], clocks, now)
        if c:
            self.clocks.retime(clocks, True)
        self.refilled_rows += len(flows) + c
        self._compact()
        return None

    def _refill_scratch(self) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
        """The compiled refill's per-link working arrays, made once: a link map (-1 on every link
        between refills), seven arrays of per-link values and per-link flags (written and read on a
        refill's links only), so a refill of a few flows costs the links its entries touch, not every
        link (a 16K-GPU Clos has 100K), and none makes arrays of every link."""
        if self._scratch is None:
            n = self.num_links
            self._scratch = (
                np.full(n, -1, dtype=np.int64),
                tuple(np.empty(n) for _ in range(7)),  # apart: a row of a 2-d array is not contiguous to numba
                np.zeros(n, dtype=bool),
            )
        return self._scratch

    def _settle_rows(
        self, flows: np.ndarray, clocks: np.ndarray, old: np.ndarray, rate: np.ndarray, now: float
    ) -> np.ndarray:
        """A refill's new `rate`s (per row: `clocks`, then `flows`; `old`: their old rates) onto its
        rows: the flows' bytes left as of `now`, their rates, finish and due times; the clocks moved
        to `now`, then given their rates. Returns the flows' bytes left. Compiled once the table fills
        compiled (sim/network/region_kernel.py `settle_rows`: the same arithmetic, to the bit)."""
        a, c = self._slots.arrays, len(clocks)
        if self.compiled:
            from sim.network.region_kernel import settle_rows

            s = self.clocks.state.arrays
            return settle_rows(
                flows, clocks, old, rate, float(now), a["left"], a["t_ref"], a["rate"], a["fresh"], a["finish"],
                a["due"], s["v"], s["t"], s["rate"], DONE_BYTES,
            )  # fmt: skip
        old, rate_f = old[c:], rate[c:]
        left = np.maximum(self.left[flows] - old * (now - self.t_ref[flows]), 0.0)
        a["left"][flows] = left
        a["t_ref"][flows] = now
        a["rate"][flows] = rate_f
        a["fresh"][flows] = False
        a["finish"][flows], a["due"][flows] = finish_and_due(left, rate_f, now)
        if c:
            self.clocks.advance(clocks, now)
            self.clocks.rate[clocks] = rate[:c]
        return left

    def _prepare(self, flows: np.ndarray, clocks: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray | None, np.ndarray]:
        """(parts, old rates, old load (None: the region is everything), residual capacity) of a
        refill of `flows` and `clocks`; compiled once the table fills compiled (the same arrays:
        sim/network/region_kernel.py)."""
        if self.compiled:
            parts, old, members = self._compiled_parts(flows, clocks)
        else:
            bundled = self.bundle[flows] >= 0
            flows = np.concatenate([flows[bundled], flows[~bundled]])  # bundled flows first
            parts = self._parts(flows, clocks)
            old = np.concatenate([self.clocks.rate[clocks], np.where(self.fresh[flows], 0.0, self.rate[flows])])
            members = int(self.clocks.count[clocks].sum())
        if len(flows) + members == self.n_alive:
            return parts, old, None, self.capacity
        old_load = self._load(parts, old)
        return parts, old, old_load, self.capacity - (self.link_rate - old_load)

    def _affected(self, region: np.ndarray, changed: np.ndarray) -> np.ndarray:
        """The flows of `region` whose rate can change: those connected (through shared links, by
        flows of `region`) to a link where flows started or finished or where bundled flows run.
        A group of flows connected to none of these sees the same capacity as before and keeps
        its (max-min fair) rates, e.g. the NVLink flows of a host while only network flows change. (A
        table that fills compiled picks them in its one-call refill: sim/network/refill_kernel.py.)"""
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
        if not n_bundled and not c:  # no bundle among the rows (e.g. on a one-switch network)
            none = np.zeros(0, dtype=np.int64)
            return {
                "flows": flows,
                "clocks": 0,
                "unit": none,
                "units": 0,
                "mult": None,
                "represented": 0,
                "shared": (none, none, np.zeros(0)),
                "edge": self._edge(flows),
                "split": 0,
                "rows": len(flows),
            }
        row_bundle = np.concatenate([clocks, bundle[:n_bundled]]) if c else bundle[:n_bundled]
        count = np.bincount(row_bundle, minlength=self.bundles.store.size)
        ids = np.flatnonzero(count != 0)
        compact = np.zeros(self.bundles.store.size, dtype=np.int64)
        compact[ids] = np.arange(len(ids))
        e_row, e_link, e_weight = self._edge(flows)
        split, mult, represented = int(self.length[flows[:n_bundled]].sum()), None, n_bundled
        if c:
            p_bundle, p_link, p_weight = self.clocks.region_pairs(clocks)
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

    def _compiled_parts(self, flows: np.ndarray, clocks: np.ndarray) -> tuple[dict, np.ndarray, int]:
        """`_parts` of `flows` put bundled first, with the rows' old rates and the clocks' members, in
        one compiled call (sim/network/region_kernel.py)."""
        from sim.network.region_kernel import prepare

        s, cs, p = self._slots.arrays, self.clocks.state.arrays, self.clocks.pairs.arrays
        store, entries = self.bundles.store, self.bundles.entries.arrays
        rows = prepare(
            flows,
            clocks,
            s["bundle"],
            s["start"],
            s["length"],
            s["fresh"],
            s["rate"],
            self._entries.arrays["link"],
            self._entries.arrays["weight"],
            cs["count"],
            cs["rate"],
            p["bundle"],
            p["link"],
            p["weight"],
            p["count"],
            self.clocks.pairs.size,
            *self.clocks.pairs_by_bundle(),
            store.arrays["start"][: store.size],
            store.arrays["length"][: store.size],
            entries["link"],
            entries["weight"],
        )
        ordered, n_bundled, unit, ids, mult, u_row, u_link, u_weight, e_row, e_link, e_weight, split, old, members = (
            rows
        )
        c = len(clocks)
        parts = {
            "flows": ordered,
            "clocks": c,
            "unit": unit,
            "units": len(ids),
            "mult": mult if c else None,
            "represented": int(n_bundled) + int(members),
            "shared": (u_row, u_link, u_weight),
            "edge": (e_row, e_link, e_weight),
            "split": int(split),
            "rows": c + len(ordered),
        }
        return parts, old, int(members)

    def _load(self, parts: dict, rate: np.ndarray) -> np.ndarray:
        """Per link: summed entries x rate of the rows (shared entries once per bundle, times the
        flows of each row); compiled once the table fills compiled (the same sums:
        sim/network/region_kernel.py)."""
        unit, mult = parts["unit"], parts["mult"]
        if self.compiled:
            from sim.network.region_kernel import load

            bundled_load = parts.get("bundled_load")
            edge, start = (
                (np.zeros(self.num_links), 0) if bundled_load is None else (bundled_load.copy(), parts["split"])
            )
            (u_row, u_link, u_weight), (e_row, e_link, e_weight) = parts["shared"], parts["edge"]
            return load(
                unit,
                _NO_RATES if mult is None else mult,
                mult is not None,
                parts["units"],
                u_row,
                u_link,
                u_weight,
                e_row,
                e_link,
                e_weight,
                np.ascontiguousarray(rate, dtype=float),
                start,
                edge,
                _NO_LINKS,
                True,  # every link
                np.empty(self.num_links),
            )
        if not len(unit):
            return self._edge_load(parts, rate)
        unit_rate = rate[: len(unit)] if mult is None else rate[: len(unit)] * mult
        per_unit = np.bincount(unit, unit_rate, minlength=parts["units"])
        u_row, u_link, u_weight = parts["shared"]
        return np.bincount(u_link, u_weight * per_unit[u_row], minlength=self.num_links) + self._edge_load(parts, rate)

    def _edge_load(self, parts: dict, rate: np.ndarray) -> np.ndarray:
        """Per link: summed edge entries x rate of the rows. After a bundled refill the bundled rows'
        part is known (`bundled_load`: their entries come first, `split` of them): the other rows'
        entries continue its per-link sums, one by one in entry order, as one pass over all would."""
        e_row, e_link, e_weight = parts["edge"]
        bundled_load = parts.get("bundled_load")
        if bundled_load is None:
            return np.bincount(e_link, e_weight * rate[e_row], minlength=self.num_links)
        k = parts["split"]
        load = bundled_load.copy()
        np.add.at(load, e_link[k:], e_weight[k:] * rate[e_row[k:]])
        return load

    def _bundled(self, parts: dict, residual: np.ndarray) -> np.ndarray | None:
        """Bundled filling where it pays off (at least two flows per bundle) and its check holds."""
        unit, k = parts["unit"], parts["split"]
        bundled = len(unit)
        if not bundled or parts["units"] * 2 > parts["represented"]:
            return None
        e_row, e_link, e_weight = parts["edge"]
        bundled_load = np.empty(self.num_links)
        rate = bundled_filling(
            unit,
            parts["shared"],
            (e_row[:k], e_link[:k], e_weight[:k]),
            (e_row[k:] - bundled, e_link[k:], e_weight[k:]),
            parts["rows"] - bundled,
            residual,
            parts["mult"],
            bundled_load,
            self._compiled(len(parts["shared"][1]) + len(e_link) - k),
        )
        if rate is None:
            self._failures += 1
            self._backoff = min(2**self._failures, _BACKOFF_MAX)
            return None
        parts["bundled_load"] = bundled_load  # the new load's bundled part (`_edge_load`)
        self._failures = 0
        self.bundled_refills += 1
        return rate

    def _row_level(self, parts: dict, residual: np.ndarray) -> np.ndarray:
        """Progressive filling of the flows one by one (no clocks among the rows); compiled, the
        bundled rows' shared entries counted per unit where that gives the same rates
        (sim/network/filling_kernel.py `fill_units`), else over the expanded entries."""
        if self.compiled and not self.plain and len(parts["unit"]):
            from sim.network.filling_kernel import fill_units

            rate = np.empty(parts["rows"])
            (u_row, u_link, u_weight), (e_row, e_link, e_weight) = parts["shared"], parts["edge"]
            compact = self._refill_scratch()[0]
            if fill_units(
                parts["unit"], parts["units"], u_row, u_link, u_weight, e_row, e_link, e_weight, parts["rows"],
                np.ascontiguousarray(residual, dtype=float), rate, compact,
            ):  # fmt: skip
                return rate
        row, link, weight = self._expanded(parts)
        if self.plain:
            order = np.argsort(row, kind="stable")
            matrix = flow_matrix(np.bincount(row, minlength=parts["rows"]), link[order], self.num_links, weight[order])
            return max_min_fair(matrix, residual)
        return progressive_filling(row, link, weight, parts["rows"], residual, compiled=self._compiled(len(link)))

    @staticmethod
    def _expanded(parts: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, link, weight) of every entry of the rows: each bundle's shared entries repeated for
        each of its flows, then the edge entries."""
        unit = parts["unit"]
        e_row, e_link, e_weight = parts["edge"]
        if not len(unit):
            return e_row, e_link, e_weight
        u_row, u_link, u_weight = parts["shared"]
        u_len = np.bincount(u_row, minlength=parts["units"])  # u_row is sorted (Bundles.of)
        idx = ranges((np.cumsum(u_len) - u_len)[unit], u_len[unit])
        row = np.concatenate([np.repeat(np.arange(len(unit)), u_len[unit]), e_row])
        return row, np.concatenate([u_link[idx], e_link]), np.concatenate([u_weight[idx], e_weight])

    @property
    def compiled(self) -> bool:
        """Whether the table fills compiled by now (numba loaded: `_compiled`)."""
        return self._python_entries >= PYTHON_FILLING_ENTRIES

    def _compiled(self, entries: int) -> bool:
        """Whether a filling of `entries` entries runs compiled: once the table has filled
        `PYTHON_FILLING_ENTRIES` in plain Python (see there)."""
        if self._python_entries >= PYTHON_FILLING_ENTRIES:
            return True
        self._python_entries += entries
        return False

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
        keys = self.clocks.join(slots, b, left[joining], self._edge(slots), self.compiled)
        a = self._slots.arrays
        a["clocked"][slots] = True
        a["key"][slots] = keys
        a["finish"][slots] = np.inf
        a["due"][slots] = np.inf
        self._loose = self._loose[~a["clocked"][self._loose]]
        self.clocks.retime(distinct(b), self.compiled)

    def _unclock(self, clocks: np.ndarray, now: float) -> np.ndarray:
        """Turn these clocks' members back into per-flow rows (bytes left and rate as of `now`);
        returns their slots."""
        slots, keys = self.clocks.member_slots(clocks, self._are_members, self.compiled)
        if len(slots):
            bundle = self.bundle[slots]
            left, rate = self.clocks.left(bundle, keys, now), self.clocks.rate[bundle]
            a = self._slots.arrays
            a["left"][slots], a["t_ref"][slots], a["rate"][slots], a["clocked"][slots] = left, now, rate, False
            a["finish"][slots], a["due"][slots] = finish_and_due(left, rate, now)
        self.clocks.stop(clocks, self.compiled)
        self._loose = np.sort(np.concatenate([self._loose, slots]))
        return slots
