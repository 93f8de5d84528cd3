"""`kind: training_campaign`: a long training job under failures, checkpoints and restarts.

- `workload`: the config and `simulate`.
- `faults`: failure processes, checkpoints, detection and restart, simulated event by event.
- `kind`: the `Workload` (WORKLOAD); `sizing`: its resource estimate.
"""

from sim.workloads.campaign.workload import Config, simulate

__all__ = ["Config", "simulate"]
