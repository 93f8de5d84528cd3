"""`kind: collective`: nccl-tests-like collective benchmarks on the simulated cluster.

- `workload`: the config and `simulate`.
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate.
"""

from sim.workloads.collective.workload import Config, simulate

__all__ = ["Config", "simulate"]
