"""What every workload kind shares: its config base class and the interface the runner calls.

A workload is one module in sim/workloads/ with
- `Config`: a frozen pydantic model with a `kind` literal (one member of the scenario's
  discriminated union), optional `check(hardware)` cross-checks that raise `ScenarioError` with a
  key path, and optional `host_pools(hardware)` (extra hosts it attaches to the network);
- `simulate(sim, cluster, config)`: a SimPy generator that runs the workload on the cluster and
  returns its metrics dict.
The runner starts `simulate` as a process and runs the clock until it returns. Nothing in a workload
may assume it is the only job on the cluster.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WorkloadBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def check(self, hardware) -> None:          # noqa: D401 - hook
        """Cross-checks against the hardware; raise ScenarioError(path=..., value=...) on failure."""

    def host_pools(self, hardware) -> list:
        """Extra host pools (hardware_models.topology.HostPool) this workload attaches."""
        return []
