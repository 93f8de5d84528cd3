"""`kind: tiered_memory`: a page-access stream on host DRAM + CXL under a placement policy."""
from sim.workloads.tiered_memory.workload import Config, simulate

__all__ = ["Config", "simulate"]
