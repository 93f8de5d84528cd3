"""`kind: training`: large-model training with 4D parallelism (TP x CP x PP x DP).

- `workload`: the config and `simulate`; `schedule`: pipeline schedules (1F1B, interleaved).
- `layout`: where ranks sit and which are interchangeable; `memory`: memory per GPU per stage.
- `plan`: the static plan (layer split, op lists, kernels); `run`: the run on the cluster.
- `accounting`, `metrics`: where the time went and the metrics.
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate.
"""

from sim.workloads.training.workload import Config, simulate

__all__ = ["Config", "simulate"]
