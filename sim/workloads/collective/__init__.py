"""`kind: collective`: nccl-tests-like collective benchmarks on the simulated cluster."""
from sim.workloads.collective.workload import Config, simulate

__all__ = ["Config", "simulate"]
