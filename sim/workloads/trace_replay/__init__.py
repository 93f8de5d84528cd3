"""`kind: trace_replay`: a measured PyTorch profiler trace (per rank) or a Chakra-style execution
graph, replayed on the modelled hardware.

- `pytorch_trace`: torch.profiler Chrome/Kineto JSON -> per-rank event trees;
- `chakra_trace`: Chakra execution-graph JSON -> rank graphs;
- `ops`: operation categories (GEMM, attention, embedding, elementwise, collective, other) and their
  device-model times;
- `graph`: the replay graph (nodes on tracks with dependencies) built from an event tree;
- `replay`: the SimPy replay on the cluster; `workload`: config, simulate, metrics;
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate.
"""

from sim.workloads.trace_replay.workload import Config, simulate

__all__ = ["Config", "simulate"]
