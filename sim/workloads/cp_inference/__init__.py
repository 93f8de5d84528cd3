"""`kind: cp_inference`: context-parallel LLM inference with ring attention (pass-KV / pass-Q).

- `workload`: the config, requests and `simulate`.
- `ring_attention`: sharding, work per ring step, the pass-KV / pass-Q choice.
- `plan`: what one GPU does in one layer of a phase (kernels, ring sends, all-to-all, TP all-reduce).
- `layers`: running one phase on the cluster; `replay`: exact replay of identical layers.
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate; `plots`: prefill breakdown, TTFT scaling.
"""

from sim.workloads.cp_inference.workload import Config, simulate

__all__ = ["Config", "simulate"]
