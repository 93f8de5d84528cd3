"""`kind: tiered_memory` as a `Workload` (sim/workloads/base.py): a page-access stream on host DRAM
+ CXL under a placement policy."""

from __future__ import annotations

from sim.workloads.base import Workload
from sim.workloads.tiered_memory.sizing import tiered_memory_estimate
from sim.workloads.tiered_memory.workload import Config, simulate

METRICS = {
    "local_traffic_fraction": "accesses served by the fast tier, fraction",
    "throughput_relative_to_all_local": "access throughput over that of the same accesses all on the fast tier, ratio",
    "promotions_per_s": "pages moved slow -> fast per second, pages/s",
    "demotions_per_s": "pages moved fast -> slow per second, pages/s",
    "promotions": "pages moved slow -> fast, count",
    "demotions": "pages moved fast -> slow, count",
    "accesses": "accesses replayed, count",
    "accesses_per_s": "accesses per second of simulated time, accesses/s",
    "migration_bytes_per_s": "bytes migrated between the tiers per second, bytes/s",
    "hint_faults_per_s": "NUMA hint faults taken per second, faults/s",
    "local_traffic_fraction_by_phase": "local_traffic_fraction per access phase, list of fractions",
    "local_traffic_fraction_by_interval": "local_traffic_fraction per interval_s, list of fractions",
    "ping_pong_pages": "pages demoted before they were accessed again after their promotion, count",
    "ping_pong_per_s": "ping_pong_pages per second, pages/s",
    "allocation_local_fraction": "new pages (allocations and first touches) placed on the fast tier, fraction",
    "file_allocation_local_fraction": "new page-cache (file) pages placed on the fast tier, fraction",
    "pages_allocated": "pages allocated (allocations and first touches), count",
    "pages_freed": "pages freed, count",
    "pages_resident_fast": "pages on the fast tier at the end, count",
    "pages_resident_slow": "pages on the slow tier at the end, count",
    "stall_fraction": "threads' time stalled in hint faults and synchronous migrations per second, fraction",
    "kswapd_busy_fraction": "kswapd's demotion time (migration_page_cost per page) per second, fraction",
    "fast_pages": "pages the fast tier holds, count",
    "pages": "pages of the footprint, count",
    "epochs": "epochs replayed, count",
    "policy": "the placement policy, name",
}


class TieredMemoryWorkload(Workload):
    kind = "tiered_memory"
    config_class = Config
    metrics = METRICS

    def simulate(self, sim, cluster, config):
        return simulate(sim, cluster, config)

    def estimate(self, config, hardware, network_model: str):
        return tiered_memory_estimate(config, hardware, network_model)


WORKLOAD = TieredMemoryWorkload()
