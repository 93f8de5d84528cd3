"""Network interfaces and scale-up fabrics: links with a bandwidth per direction, a latency and an
efficiency (the fraction of line rate a transport achieves: RDMA near line rate, TCP much less).

The same spec describes a per-GPU NIC (`kind: nic`) and a scale-up fabric such as NVLink through
NVSwitch (`kind: scale_up`, bandwidth = per GPU per direction). The achieved rate of one link is
`bandwidth * efficiency`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hardware_models.spec import PowerSpec, Spec
from hardware_models.units import BytesPerS, Seconds


class LinkSpec(Spec):
    name: str
    kind: Literal["nic", "scale_up", "switch"] = "nic"
    bandwidth: BytesPerS = Field(gt=0, description="per direction, bytes/s")
    latency: Seconds = Field(0.0, ge=0, description="per-hop/per-message latency, s")
    efficiency: float = Field(1.0, gt=0, le=1, description="fraction of bandwidth achieved")
    transport: Literal["rdma", "tcp", "nvlink", "pcie", "ethernet"] = "rdma"
    power: PowerSpec = PowerSpec()
    source: str = ""

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bandwidth * self.efficiency
