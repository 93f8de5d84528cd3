"""`kind: tiered_memory` — a program's pages on host DRAM + CXL under a placement policy.

A CPU application on host 0 (node `h0/cpu`) touches `footprint` bytes of pages (`page_bytes`, its
resident working set, anonymous, allocated at first touch) and allocates and frees more memory
over time (`allocations`: bursts and steady churn, anonymous or page cache; sim/memory/lifecycle.py),
spread over a fast tier (`fast_tier`, e.g. ddr5-host) and a slow tier (`slow_tier`, e.g.
cxl-expander); `ratio` "a:b" lets the fast tier hold a/(a+b) of the address space (the footprint
plus every allocation stream's pages; TPP's local:CXL ratio). The `policy` (static | lru |
numa_balancing | tpp; sim/memory/policies.py) places new pages under the kernel's watermarks and
moves pages between the tiers as the run goes. The footprint's stream (`access`: a Zipf or hot-set
popularity law with phase changes, or a CSV trace; sim/memory/access.py) and the allocations' live
pages (each its `access_share` of the accesses) are replayed in epochs of `epoch_accesses`
accesses of `access.access_bytes` each, seeded from the simulation's substreams.

Every epoch (sim/memory/placement.py decides where each page goes and what moves):
- frees and allocations due by the epoch's start happen first, then the accesses;
- the accesses are flows on the topology: local bytes from `h0/{fast}` to `h0/cpu`, remote bytes
  from `h0/{slow}` to `h0/cpu`; migrations are flows from one tier node to the other (through the
  CPU node), so they take bandwidth on both tiers' links and compete with the accesses;
- the CPU side: `threads` threads keep `outstanding_accesses` loads in flight (memory-level
  parallelism) and compute `compute_per_access` between two of their accesses. By Little's law
  the accesses' latency takes M = (local x fast latency + remote x slow latency) /
  outstanding_accesses, the compute C = accesses x compute_per_access / threads, and the epoch
  needs at least C + M - `compute_overlap` x min(C, M) + the threads' stalls: (hint faults x
  `hint_fault_cost` + synchronous migrations x `migration_page_cost`) / threads, where a
  promotion is synchronous (the hint-fault handler migrates the page) and so is an LRU cache's
  direct-reclaim demotion; kswapd's demotions run beside the program, one page per
  `migration_page_cost` at most (its budget for an epoch: the previous epoch's duration);
- the epoch ends when both its flows (accesses and migrations) and that CPU bound are done.
The all-local reference runs the same accesses on the fast tier alone (the same CPU bound without
stalls, and the uncontended flow time of `h0/{fast}` -> `h0/cpu`).

The run lasts `duration_s` of simulated time (a trace may end sooner; a trace without
`duration_s` runs to its end).

Metrics: `local_traffic_fraction` (accesses served by the fast tier), `throughput_relative_to_all_local`,
`promotions_per_s`, `demotions_per_s` (pages), plus `accesses_per_s`, `migration_bytes_per_s`,
`hint_faults_per_s`, `local_traffic_fraction_by_phase` / `_by_interval`, the page lifecycle
(`allocation_local_fraction`, `file_allocation_local_fraction`, `pages_allocated`, `pages_freed`,
`pages_resident_fast`, `pages_resident_slow`, `ping_pong_pages`: promoted pages demoted before
they were accessed again), `stall_fraction`, `kswapd_busy_fraction`, `fast_pages`, `pages`, `epochs`.
"""

from __future__ import annotations

import math

import numpy as np

from sim.engine.replay import delay_to
from sim.memory.access import PhasedPopularity, TraceReplay, load_trace
from sim.memory.lifecycle import Lifecycle
from sim.memory.tiers import PageState, advance, placement_policy
from sim.workloads.tiered_memory.config import (  # noqa: F401 - Config is the kind's config (registry)
    MAX_PAGES,
    AccessConfig,
    AllocationConfig,
    Config,
    TuningConfig,
)


def _stream(sim, config: Config):
    """(the access stream, pages in the footprint)."""
    a = config.access
    if a.trace:
        page, count = load_trace(a.trace, config.pages() if config.footprint else None)
        pages = config.pages(int(page.max()) + 1)
        return TraceReplay(page, count, pages), pages
    pages = config.pages()
    kw = {
        "phase_s": a.phase_s,
        "access_rng": sim.rng("tiered_memory.accesses"),
        "phase_rng": sim.rng("tiered_memory.phases"),
    }
    if a.distribution == "zipf":
        return PhasedPopularity.zipf(pages, a.zipf_alpha, **kw), pages
    return PhasedPopularity.hot_set(pages, a.hot_fraction, a.hot_access_fraction, **kw), pages


def _latency(sim, cpu: str, parts: list[tuple[str, float]], end_s: float):
    """The epoch's time on the CPU as spans, one per part: compute (category `compute`), the
    latency of each tier (category `memory:<tier>`: the tier that bounded that part), hint faults
    and promotions (category `page_fault`); ends exactly at `end_s`."""
    parts = [p for p in parts if p[1] > 0] or parts[:1]
    for k, (what, seconds) in enumerate(parts):
        t0 = sim.now
        yield sim.timeout(delay_to(sim.now, end_s) if k == len(parts) - 1 else seconds)
        if sim.now > t0:
            category = what if what in ("compute", "page_fault") else f"memory:{what}"
            sim.span(cpu, "memory latency", f"latency {what}", t0, category=category)


def cpu_time_s(config: Config, accesses: float, memory_s: float, stall_s: float) -> float:
    """An epoch's time on the CPU: compute + memory latency (Little's law, `memory_s`) - the
    overlapped part of the shorter of the two + the threads' stalls (faults, promotions)."""
    compute_s = accesses * config.compute_per_access / config.threads
    return compute_s + memory_s - config.compute_overlap * min(compute_s, memory_s) + stall_s


def simulate(sim, cluster, config: Config):
    fast, slow = config.tiers(cluster.hardware)
    stream, base_pages = _stream(sim, config)
    lifecycle = Lifecycle(config.streams(), base_pages)
    pages = lifecycle.end_page
    state = PageState(pages, config.fast_pages(pages), float(config.page_bytes))
    for first, slots, page_type in lifecycle.page_types():
        state.kind[first : first + slots] = page_type
    rules = placement_policy(config.policy, config.tuning.tuning()).rules(state.fast_pages)
    fault_rng, alloc_rng = sim.rng("tiered_memory.hint_faults"), sim.rng("tiered_memory.allocations")
    net = cluster.network
    cpu, fast_node, slow_node = cluster.cpu_node(0), cluster.tier_node(0, fast.name), cluster.tier_node(0, slow.name)
    bytes_fast, bytes_slow = fast.bytes_moved(config.access.access_bytes), slow.bytes_moved(config.access.access_bytes)
    mlp, page, threads = config.outstanding_accesses, config.page_bytes, config.threads
    keys: tuple[str, ...] = ("local", "remote", "promoted", "demoted", "hint_faults", "freed", "ping_pong")
    keys += ("kswapd_demoted", "allocated_fast", "allocated_slow", "allocated_file_fast", "allocated_file_slow")
    totals = dict.fromkeys(keys, 0.0) | {"all_local_s": 0.0, "stall_s": 0.0}
    by_phase: dict[int, list[float]] = {}
    by_interval: dict[int, list[float]] = {}
    start, end = sim.now, math.inf if config.duration_s is None else config.duration_s
    # kswapd demotes at most one page per migration_page_cost; its budget for an epoch is the
    # previous epoch's duration (the first: the epoch's accesses at the fast tier's latency)
    # (+ what is left of a page from before: epochs may be shorter than one page's migration)
    last_epoch_s, credit = config.epoch_accesses * fast.latency / mlp, 0.0
    epochs = 0
    while sim.now - start < end:
        now = sim.now - start
        freed, allocated = lifecycle.step(now)
        extra, share = lifecycle.counts(config.epoch_accesses, alloc_rng, pages)
        base = stream.counts(now, round(config.epoch_accesses * max(0.0, 1.0 - share)))
        if base is None:
            break
        counts = extra
        counts[:base_pages] += base.astype(np.int64)
        epoch_start = sim.now
        kswapd_pages = (
            credit + last_epoch_s / config.migration_page_cost if config.migration_page_cost > 0 else math.inf
        )
        out = advance(state, rules, counts, fault_rng, now, allocate=allocated, free=freed, kswapd_pages=kswapd_pages)
        accesses = out.local + out.remote
        flows = [(fast_node, cpu, out.local * bytes_fast), (slow_node, cpu, out.remote * bytes_slow)]
        moves = [(slow_node, fast_node, out.promoted * page), (fast_node, slow_node, out.demoted * page)]
        memory_s = (out.local * fast.latency + out.remote * slow.latency) / mlp
        # a hint fault stalls its thread; so does a promotion (migrated in the fault handler) and a
        # direct-reclaim demotion (an LRU cache); kswapd's demotions run beside the program
        synchronous = out.promoted + out.demoted - out.kswapd_demoted
        fault_s = out.hint_faults * config.hint_fault_cost / threads
        migrate_s = synchronous * config.migration_page_cost / threads
        cpu_s = cpu_time_s(config, accesses, memory_s, fault_s + migrate_s)
        compute_s = accesses * config.compute_per_access / threads
        hidden = config.compute_overlap * min(compute_s, memory_s)
        scale = (memory_s - hidden) / memory_s if memory_s > 0 else 0.0
        parts = [  # (tier or cause, seconds): the epoch's time on the CPU
            ("compute", compute_s),
            (fast.name, out.local * fast.latency / mlp * scale),
            (slow.name, out.remote * slow.latency / mlp * scale),
            ("page_fault", fault_s + migrate_s),
        ]
        yield sim.all_of(
            [
                net.transfer_many([f for f in flows if f[2] > 0], name="tiered_memory.access"),
                net.transfer_many([f for f in moves if f[2] > 0], name="tiered_memory.migration"),
                sim.process(_latency(sim, cpu, parts, epoch_start + cpu_s)),
            ]
        )
        sim.span(
            cpu,
            "memory",
            config.policy,
            epoch_start,
            nbytes=out.local * bytes_fast + out.remote * bytes_slow,
            category="memory",
        )
        epochs += 1
        last_epoch_s = sim.now - epoch_start
        credit = min(1.0, kswapd_pages - out.kswapd_demoted)  # a part-page of kswapd time carries over
        for k in keys:
            totals[k] += getattr(out, k)
        totals["stall_s"] += fault_s + migrate_s
        totals["all_local_s"] += max(
            net.estimate_time_s(fast_node, cpu, accesses * bytes_fast) if accesses else 0.0,
            cpu_time_s(config, accesses, accesses * fast.latency / mlp, 0.0),
        )
        for table, key in ((by_phase, stream.phase(now)), (by_interval, _interval(config, now))):
            row = table.setdefault(key, [0.0, 0.0])
            row[0] += out.local
            row[1] += accesses
    return _metrics(config, state, totals, by_phase, by_interval, sim.now - start, epochs)


def _interval(config: Config, now_s: float) -> int:
    return 0 if not config.interval_s else int(now_s // config.interval_s)


def _metrics(config: Config, state: PageState, totals, by_phase, by_interval, elapsed: float, epochs: int) -> dict:
    accesses = totals["local"] + totals["remote"]
    page = config.page_bytes

    def rate(x: float) -> float:
        return x / elapsed if elapsed > 0 else 0.0

    def fractions(table) -> list[float]:
        return [loc / n if n else 1.0 for _, (loc, n) in sorted(table.items())]

    allocated = totals["allocated_fast"] + totals["allocated_slow"]
    allocated_file = totals["allocated_file_fast"] + totals["allocated_file_slow"]
    fast_resident, slow_resident = state.resident()
    return {
        "local_traffic_fraction": totals["local"] / accesses if accesses else 1.0,
        "throughput_relative_to_all_local": totals["all_local_s"] / elapsed if elapsed > 0 else 1.0,
        "promotions_per_s": rate(totals["promoted"]),
        "demotions_per_s": rate(totals["demoted"]),
        "accesses_per_s": rate(accesses),
        "migration_bytes_per_s": rate((totals["promoted"] + totals["demoted"]) * page),
        "hint_faults_per_s": rate(totals["hint_faults"]),
        "local_traffic_fraction_by_phase": fractions(by_phase),
        "local_traffic_fraction_by_interval": fractions(by_interval),
        "promotions": int(totals["promoted"]),
        "demotions": int(totals["demoted"]),
        "ping_pong_pages": int(totals["ping_pong"]),
        "ping_pong_per_s": rate(totals["ping_pong"]),
        "allocation_local_fraction": totals["allocated_fast"] / allocated if allocated else 1.0,
        "file_allocation_local_fraction": totals["allocated_file_fast"] / allocated_file if allocated_file else 1.0,
        "pages_allocated": int(allocated),
        "pages_freed": int(totals["freed"]),
        "pages_resident_fast": fast_resident,
        "pages_resident_slow": slow_resident,
        "stall_fraction": rate(totals["stall_s"]),
        "kswapd_busy_fraction": rate(totals["kswapd_demoted"] * config.migration_page_cost),
        "accesses": accesses,
        "policy": config.policy,
        "pages": state.pages,
        "fast_pages": state.fast_pages,
        "epochs": epochs,
    }
