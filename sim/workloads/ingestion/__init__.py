"""`kind: ingestion`: training-data ingestion (disaggregated preprocessing, RecD dedup, video curation).

- `config`, `checks`: the scenario fields and their cross-checks.
- `parts`, `pipeline`, `ledger`, `control`: the storage -> master -> workers -> trainers machinery,
  exactly-once accounting, buffer trace and the worker autoscaler.
- `data`, `media`: the tabular (DLRM) dataset and the video curation pipeline.
- `workload`: `simulate`.
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate; `plots`: trainer buffers over time.
"""

from sim.workloads.ingestion.workload import Config, simulate

__all__ = ["Config", "simulate"]
