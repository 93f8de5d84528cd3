"""Max-min fair rates of flows over links: the reference computation and the fast fillings.

A flow is a row of link entries: the fraction of the flow's rate that crosses each link (1 on a
single path; 1/k on each path's own links when a flow is sprayed evenly over k paths). Max-min
fairness is computed by *progressive filling*: all unfrozen flows grow at one common rate (the
water level); the link that fills first (smallest remaining capacity / summed entries of its
unfrozen flows) is a bottleneck: its unfrozen flows freeze at that level and their load stays on
their links. Links whose level is within a relative 1e-9 of the smallest fill at the same level.

- `max_min_fair(matrix, capacity)`: the straightforward path (three sparse mat-vecs over all flows
  per level): the reference the fast paths are tested against.
- `progressive_filling(row, link, weight, n, capacity)`: the same filling, in O(entries + levels x
  links used): per level only the entries of still-unfrozen flows are looked at, and a frozen
  flow's load leaves its links once, instead of mat-vecs over all flows at every level. Compiled
  (sim/network/filling_kernel.py, numba); a few entries (at most `_TINY`) are filled in plain
  Python instead, to the last bit the same (a small run then never loads the compiler: start-up).
- `bundled_filling(...)`: flows with the same switch-to-switch links (a bundle) filled as one, with
  an exactness check; None when the check fails.

The flow network's incremental state (which flows a change can affect, bundles and their clocks)
is `FlowTable` (sim/network/flow_table.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy.sparse is imported by the reference path only (start-up: issue 26)
    import scipy.sparse as sp

REL_TOL = 1e-9  # links within this relative distance of the lowest level fill together
DONE_BYTES = 1e-3  # a flow with fewer bytes left than this is complete
_TINY = 32  # progressive filling of at most this many entries runs in plain Python


def finish_and_due(left: np.ndarray, rate: np.ndarray, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(finish, due) times of flows with `left` bytes at time `t` going at `rate`: due is when fewer
    than DONE_BYTES are left (the flow then counts as complete); inf at rate 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(left > 0, t + left / rate, t), np.where(left > DONE_BYTES, t + (left - DONE_BYTES) / rate, t)


def flow_matrix(
    lengths: np.ndarray, flat_links: np.ndarray, num_links: int, weights: np.ndarray | None = None
) -> sp.csr_matrix:
    """(links x flows) incidence from flows given as concatenated link ids and entries per flow.

    An entry is the fraction of the flow's rate that crosses the link: 1 on a single path; with
    ECMP even splitting over k paths, 1/k on each path's own links (repeated links add up, so the
    shared NIC links get 1)."""
    import scipy.sparse as sp

    n = len(lengths)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    data = np.ones(len(flat_links)) if weights is None else weights.copy()
    flows_by_links = sp.csr_matrix((data, flat_links.copy(), indptr), shape=(n, num_links))
    flows_by_links.sum_duplicates()  # in place: hence the copies above
    return flows_by_links.T.tocsr()


def max_min_fair(matrix: sp.csr_matrix, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates by progressive filling (exact; the straightforward reference path).

    `matrix` is the (links x flows) incidence, `capacity` the links' capacities. Flows that cross
    no link are unconstrained (rate inf)."""
    n_links, n = matrix.shape
    transpose = matrix.T.tocsr()
    remaining = capacity.astype(float).copy()
    rate = np.full(n, np.inf)
    frozen = np.diff(transpose.indptr) == 0
    while not frozen.all():
        counts = matrix @ (~frozen).astype(float)
        active = counts > 1e-12
        share = np.full(n_links, np.inf)
        share[active] = np.maximum(remaining[active], 0.0) / counts[active]
        level = share.min()
        bottleneck = active & (share <= level * (1 + REL_TOL) + 1e-12)
        newly = (transpose @ bottleneck.astype(float) > 0) & ~frozen
        rate[newly] = level
        frozen |= newly
        remaining -= matrix @ np.where(newly, level, 0.0)
    return rate


def max_min_rates(paths: list, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows given as link-id sequences over links of `capacity`."""
    if not len(paths):
        return np.zeros(0)
    lengths = np.array([len(p) for p in paths], dtype=np.int64)
    flat = np.concatenate([np.asarray(p, dtype=np.int64) for p in paths]) if lengths.sum() else np.zeros(0, np.int64)
    return max_min_fair(flow_matrix(lengths, flat, len(capacity)), capacity)


def progressive_filling(
    row: np.ndarray,
    link: np.ndarray,
    weight: np.ndarray,
    n: int,
    capacity: np.ndarray,
    link_level: np.ndarray | None = None,
    compiled: bool = True,
) -> np.ndarray:
    """Max-min fair rates of `n` flows given as entries (flow `row`, `link`, `weight`) over links
    of `capacity`; the same filling as `max_min_fair`, with per level only the entries of unfrozen
    flows. `link_level` (optional, per link, filled with inf by the caller) receives the level at
    which each link filled and froze flows. `compiled`: False fills in plain Python whatever the
    size (the same rates; for a caller whose fillings so far do not pay for loading numba)."""
    if len(link) <= _TINY:
        return _python_filling(row.tolist(), link.tolist(), weight.tolist(), n, capacity, link_level)
    if not compiled:
        rate = _one_level_filling(row, link, weight, n, capacity, link_level)
        if rate is not None:
            return rate
        return _python_filling(row.tolist(), link.tolist(), weight.tolist(), n, capacity, link_level)
    from sim.network.filling_kernel import fill  # numba: imported when first needed

    rate = np.empty(n)
    fill(
        np.ascontiguousarray(row, dtype=np.int64),  # one compiled signature
        np.ascontiguousarray(link, dtype=np.int64),
        np.ascontiguousarray(weight, dtype=float),
        n,
        np.ascontiguousarray(capacity, dtype=float),
        rate,
        np.empty(0) if link_level is None else link_level,
        link_level is not None,
    )
    return rate


def _one_level_filling(
    row: np.ndarray, link: np.ndarray, weight: np.ndarray, n: int, capacity: np.ndarray, link_level: np.ndarray | None
) -> np.ndarray | None:
    """`progressive_filling`'s first level in numpy, or None when it leaves flows unfrozen (then the
    filling goes on level by level in plain Python). Symmetric traffic (a ring's or a collective's
    slices, all at one rate) fills in one level. The same operations as `_python_filling`'s first
    level: per link the entries' weights summed in entry order (`np.bincount` adds them one by one,
    as the dict does), its share, the lowest share, the rows on a link within `REL_TOL` of it."""
    links, inverse = np.unique(link, return_inverse=True)
    count = np.bincount(inverse, weight, minlength=len(links))
    share = np.maximum(capacity[links].astype(float), 0.0) / count
    level = float(share.min())
    limit = level * (1 + REL_TOL) + 1e-12
    on_full = share[inverse] <= limit  # entries on a link that fills at this level
    rows = np.zeros(n, dtype=bool)
    rows[row] = True  # flows with entries (the others keep rate inf)
    frozen = np.zeros(n, dtype=bool)
    frozen[row[on_full]] = True
    if (frozen != rows).any():
        return None  # a second level: some flows go on filling
    if link_level is not None:
        link_level[links[share <= limit]] = level
    rate = np.full(n, np.inf)
    rate[rows] = level
    return rate


def _python_filling(
    row: list, link: list, weight: list, n: int, capacity: np.ndarray, link_level: np.ndarray | None
) -> np.ndarray:
    """`progressive_filling` in plain Python, for a few entries (a compiled call's overhead would
    dominate) or before a run has filled enough to pay for loading numba: the compiled kernel's
    operations in the same order, so the same rates to the last bit."""
    count: dict[int, float] = {}
    entries: dict[int, int] = {}
    for l, w in zip(link, weight):
        count[l] = count.get(l, 0.0) + w
        entries[l] = entries.get(l, 0) + 1
    remaining = {l: float(capacity[l]) for l in count}
    rate = [np.inf] * n
    live = list(range(len(link)))  # entries of unfrozen flows
    unfrozen = len(set(row))  # their flows
    while live:
        share = {l: max(remaining[l], 0.0) / count[l] for l in count if entries[l] > 0}
        level = min(share.values())
        limit = level * (1 + REL_TOL) + 1e-12
        newly = {row[i] for i in live if share[link[i]] <= limit}
        if link_level is not None:
            for i in live:
                if share[link[i]] <= limit:
                    link_level[link[i]] = level
        unfrozen -= len(newly)
        if not unfrozen:  # the last level (often the only one): nothing left to update
            for r in newly:
                rate[r] = level
            break
        frozen_sum: dict[int, float] = {}
        kept = []
        for i in live:
            if row[i] in newly:
                l = link[i]
                frozen_sum[l] = frozen_sum.get(l, 0.0) + weight[i]
                entries[l] -= 1
            else:
                kept.append(i)
        for l, w in frozen_sum.items():
            remaining[l] -= w * level
            count[l] -= w
        for r in newly:
            rate[r] = level
        live = kept
    return np.array(rate, dtype=float)


def bundled_filling(
    unit: np.ndarray,
    unit_entries: tuple,
    bundled_edge: tuple,
    single_edge: tuple,
    n_single: int,
    capacity: np.ndarray,
    multiplicity: np.ndarray | None = None,
    edge_load: np.ndarray | None = None,
    compiled: bool = True,
) -> np.ndarray | None:
    """Max-min fair rates of flows grouped into *bundles* (flows with the same entries on shared
    links, i.e. links between switches), or None when the shortcut does not apply.

    Flows 0..F-1 are bundled: `unit[i]` is the bundle of flow i, `unit_entries` = (bundle, link,
    weight) each bundle's shared entries (per flow), `bundled_edge` = (flow, link, weight) their
    other entries (NIC, host and scale-up links). Flows F..F+n_single-1 cross no shared link:
    `single_edge` = (flow - F, link, weight) their entries. `multiplicity` (optional, per bundled
    row): the number of flows a row stands for (a bundle clock, sim/network/flow_clocks.py: its edge
    entries are then its flows' entries summed per link); default 1. `edge_load` (optional, per
    link) receives the bundled flows' load from `bundled_edge`: summed weight x rate, in entry order.
    `compiled`: as in `progressive_filling`.

    1. The bundles are filled on the shared links, a bundle of k flows as one flow of k-fold
       entries: their rates, were no edge link limiting.
    2. The other flows are filled on the edge links, on the capacity the bundles leave there.
    3. Check: no edge link is over capacity, and on every edge link that filled in step 2 no
       bundled flow is faster than the level it filled at.
    When the check holds, every flow has a bottleneck (a full link on which no flow is faster):
    bundled flows their shared link from step 1, the others their edge link from step 2, flows left
    out of the computation their old one. A feasible allocation in which every flow has a
    bottleneck is the max-min fair one (Bertsekas & Gallager, Data Networks, 6.5.2), so the result
    is exact."""
    u_row, u_link, u_weight = unit_entries
    b_row, b_link, b_weight = bundled_edge
    n_bundled = len(unit)
    if compiled:  # the same operations in one compiled call
        return _compiled_bundled_filling(
            unit, unit_entries, bundled_edge, single_edge, n_single, capacity, multiplicity, edge_load
        )
    n_units = int(unit.max()) + 1 if n_bundled else 0
    size = (
        np.bincount(unit, minlength=n_units)
        if multiplicity is None
        else np.bincount(unit, multiplicity, minlength=n_units)
    )
    rate = np.empty(n_bundled + n_single)
    unit_rate = progressive_filling(u_row, u_link, u_weight * size[u_row], n_units, capacity, compiled=compiled)
    rate[:n_bundled] = unit_rate[unit]
    bundled_load = np.bincount(b_link, b_weight * rate[b_row], minlength=len(capacity))
    if edge_load is not None:
        edge_load[:] = bundled_load
    residual = capacity - bundled_load
    if ((residual < -REL_TOL * capacity) & (bundled_load > 0)).any():
        return None  # the bundles overfill an edge link
    level = np.full(len(capacity), np.inf)
    s_row, s_link, s_weight = single_edge
    rate[n_bundled:] = progressive_filling(s_row, s_link, s_weight, n_single, residual, level, compiled)
    filled = level < np.inf  # edge links where other flows froze
    if filled.any():
        on_filled = filled[b_link]
        if (rate[b_row[on_filled]] > level[b_link[on_filled]] * (1 + REL_TOL)).any():
            return None  # an edge link fills below a bundle's rate
    return rate


def _compiled_bundled_filling(
    unit: np.ndarray,
    unit_entries: tuple,
    bundled_edge: tuple,
    single_edge: tuple,
    n_single: int,
    capacity: np.ndarray,
    multiplicity: np.ndarray | None,
    edge_load: np.ndarray | None,
) -> np.ndarray | None:
    """`bundled_filling` by sim/network/filling_kernel.py's `bundled_fill` (the same rates)."""
    from sim.network.filling_kernel import bundled_fill  # numba: imported when first needed

    def int64(a):
        return np.ascontiguousarray(a, dtype=np.int64)

    def real(a):
        return np.ascontiguousarray(a, dtype=float)

    (u_row, u_link, u_weight), (b_row, b_link, b_weight) = unit_entries, bundled_edge
    s_row, s_link, s_weight = single_edge
    rate = np.empty(len(unit) + n_single)
    load = np.empty(len(capacity)) if edge_load is None else edge_load
    ok = bundled_fill(
        int64(unit),
        int64(u_row),
        int64(u_link),
        real(u_weight),
        int64(b_row),
        int64(b_link),
        real(b_weight),
        int64(s_row),
        int64(s_link),
        real(s_weight),
        n_single,
        real(capacity),
        real(np.zeros(0) if multiplicity is None else multiplicity),
        multiplicity is not None,
        rate,
        load,
        np.zeros(0, dtype=np.int64),
        True,  # every link
        np.full(len(capacity), -1, dtype=np.int64),
        np.empty(len(capacity)),
        np.empty(len(capacity)),
    )
    return rate if ok else None
