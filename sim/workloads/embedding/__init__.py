"""`kind: embedding_training`: DLRM training with sharded embedding tables over tiered memory.

- `workload`: the config and `simulate` (index / pooled / gradient all-to-alls, lookups on tiers).
- `cost`: the cost model the planners and the simulation share.
- `planner`: sharding planners (size_greedy, recshard, manual); `recshard`, `milp`: RecShard's search.
- `estimate`: the planner's estimate of one iteration and the plan as rows (`dcsim plan`).
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate (limits, `dcsim check`); `plots`: load per GPU.
"""

from sim.workloads.embedding.workload import Config, simulate

__all__ = ["Config", "simulate"]
