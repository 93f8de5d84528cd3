"""The bundle clocks' member heaps compiled (numba): sim/network/flow_clocks.py's heaps of (key, slot)
entries as blocks of two flat arrays, once its flow table fills compiled.

Each clock's heap is a block of a shared pool (`key`, `slot`): its start, size and room per bundle.
A push into a full block moves the block to the end of the pool with twice the room (the pool
doubles when that does not fit); the blocks left behind are reclaimed when the table compacts and
the heaps are laid out again (`layout`).

The heap operations are CPython's `heapq` (Modules/_heapqmodule.c) on (key, slot) tuples: a push
appends and sifts the new entry toward the root, a pop moves the last entry to the root and sifts it
to a leaf along the smaller children, then back up; an entry is smaller than another when its key is,
or when the keys are equal and its slot is. So each heap's entries sit where `heapq` puts them, and
everything that reads them in heap order (a clock turned back into per-flow rows) sees the same
order (tests/network/test_network_fast_paths.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _less(k1, s1, k2, s2):  # pragma: no cover (compiled)
    """(k1, s1) < (k2, s2), as Python compares tuples of a float and an int."""
    return k1 < k2 or (k1 == k2 and s1 < s2)


@njit(cache=True)
def _sift_down(key, slot, base, start, pos):  # pragma: no cover (compiled)
    """heapq's `_siftdown`: the entry at `pos` moves toward `start` past every larger parent."""
    k, s = key[base + pos], slot[base + pos]
    while pos > start:
        parent = (pos - 1) >> 1
        pk, ps = key[base + parent], slot[base + parent]
        if not _less(k, s, pk, ps):
            break
        key[base + pos], slot[base + pos] = pk, ps
        key[base + parent], slot[base + parent] = k, s
        pos = parent


@njit(cache=True)
def _sift_up(key, slot, base, end, pos):  # pragma: no cover (compiled)
    """heapq's `_siftup`: the entry at `pos` goes down along the smaller children to a leaf, then
    back up to its place."""
    start = pos
    limit = end >> 1
    while pos < limit:
        child = 2 * pos + 1
        if child + 1 < end and not _less(
            key[base + child], slot[base + child], key[base + child + 1], slot[base + child + 1]
        ):
            child += 1
        key[base + pos], key[base + child] = key[base + child], key[base + pos]
        slot[base + pos], slot[base + child] = slot[base + child], slot[base + pos]
        pos = child
    _sift_down(key, slot, base, start, pos)


@njit(cache=True)
def _pop(key, slot, base, size):  # pragma: no cover (compiled)
    """heapq's `heappop` of a heap of `size` entries at `base` (the caller shrinks its size)."""
    last_k, last_s = key[base + size - 1], slot[base + size - 1]
    if size == 1:
        return last_k, last_s
    top_k, top_s = key[base], slot[base]
    key[base], slot[base] = last_k, last_s
    _sift_up(key, slot, base, size - 1, 0)
    return top_k, top_s


@njit(cache=True)
def push(bundles, keys, slots, start, size, room, key, slot, end):  # pragma: no cover (compiled)
    """Push (keys[i], slots[i]) onto the heap of bundles[i], in order (heapq's `heappush`); returns
    the pool (`key`, `slot`: new arrays where it grew) and its end."""
    for i in range(len(bundles)):
        b = bundles[i]
        if size[b] == room[b]:  # full: the block moves to the end with twice the room
            grown = max(8, 2 * room[b])
            if end + grown > len(key):
                bigger = max(2 * len(key), end + grown)
                new_key = np.empty(bigger)
                new_slot = np.empty(bigger, np.int64)
                new_key[:end] = key[:end]
                new_slot[:end] = slot[:end]
                key, slot = new_key, new_slot
            for j in range(size[b]):
                key[end + j] = key[start[b] + j]
                slot[end + j] = slot[start[b] + j]
            start[b], room[b] = end, grown
            end += grown
        base, n = start[b], size[b]
        key[base + n], slot[base + n] = keys[i], slots[i]
        size[b] = n + 1
        _sift_down(key, slot, base, 0, n)
    return key, slot, end


@njit(cache=True)
def _is_member(k, s, alive, clocked, member_key):  # pragma: no cover (compiled)
    """A heap entry is live: its slot is alive, clocked and has this key (`FlowSlots._is_member`)."""
    return alive[s] and clocked[s] and member_key[s] == k


@njit(cache=True, error_model="numpy")
def due_members(  # pragma: no cover (compiled)
    bundles, t, v, rate, start, size, key, slot, alive, clocked, member_key, limit, done_bytes
):
    """`BundleClocks.due_members` of the clocks `bundles` (those due by `limit`): each one's stale
    heap tops popped, and its members due by `limit` popped and returned, in pop order."""
    out = np.empty(16, np.int64)
    n = 0
    for b in bundles:
        tb, vb, rb = t[b], v[b], rate[b]
        base = start[b]
        while size[b]:
            k, s = key[base], slot[base]
            if not _is_member(k, s, alive, clocked, member_key):
                _pop(key, slot, base, size[b])
                size[b] -= 1
                continue
            left = k - vb
            if left > done_bytes and rb > 0:
                due = tb + (left - done_bytes) / rb
            elif left <= done_bytes:
                due = tb
            else:
                due = np.inf
            if due > limit:
                break
            _pop(key, slot, base, size[b])
            size[b] -= 1
            if n == len(out):
                out = np.concatenate((out, np.empty(n, np.int64)))
            out[n] = s
            n += 1
    return out[:n]


@njit(cache=True)
def refresh(
    bundles, count, head, rate, v, start, size, key, slot, alive, clocked, member_key, check
):  # pragma: no cover (compiled)
    """`BundleClocks._refresh`'s heaps: each clock's stale tops popped (with `check`), then an empty
    clock (no members or no heap) reset, the others' head set to their top's key."""
    for b in bundles:
        base = start[b]
        while check and size[b] and not _is_member(key[base], slot[base], alive, clocked, member_key):
            _pop(key, slot, base, size[b])
            size[b] -= 1
        if count[b] == 0 or size[b] == 0:
            size[b] = 0
            head[b], rate[b], v[b] = np.inf, 0.0, 0.0
        else:
            head[b] = key[base]


@njit(cache=True)
def layout(bundles, counts, keys, slots, start, size, room):  # pragma: no cover (compiled)
    """A pool holding, for each of `bundles` (ascending), its `counts` entries of (`keys`, `slots`) as
    given (consecutive, each bundle's run a heap), with room for as many again; every other heap
    empty, without a block. Returns the pool and its end."""
    start[:] = 0
    size[:] = 0
    room[:] = 0
    total = 0
    for i in range(len(bundles)):
        total += max(8, 2 * counts[i])
    key = np.empty(max(total, 64))
    slot = np.empty(max(total, 64), np.int64)
    end = 0
    j = 0
    for i in range(len(bundles)):
        b = bundles[i]
        start[b], size[b], room[b] = end, counts[i], max(8, 2 * counts[i])
        for q in range(counts[i]):
            key[end + q], slot[end + q] = keys[j], slots[j]
            j += 1
        end += room[b]
    return key, slot, end
