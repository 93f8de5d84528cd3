"""`kind: tiered_memory`: a page-access stream on host DRAM + CXL under a placement policy.

- `workload`: the config and `simulate`.
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate.
"""

from sim.workloads.tiered_memory.workload import Config, simulate

__all__ = ["Config", "simulate"]
