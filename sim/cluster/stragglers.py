"""Stragglers: one slow GPU or one slow link in an otherwise healthy cluster (`hardware.stragglers`).

    hardware:
      stragglers:
        - {gpu: 5, compute_slowdown: 1.25}       # rank 5 runs every kernel 1.25x longer (thermal throttle,
                                                 #   a bad HBM stack, a noisy neighbour process)
        - {gpu: 9, bandwidth_factor: 0.5}        # rank 9's NIC delivers half its bandwidth, both directions
                                                 #   (a flapping port retrained at a lower rate)
        - {link: "tor0->pod0", bandwidth_factor: 0.25}   # one named directed link (names: `dcsim run --links`)

Applied when the Cluster is built: a slow GPU's `Device.slowdown` multiplies the duration of every
kernel it runs; a slow link's capacity is scaled in the topology, so the flow network's max-min
sharing gives every flow crossing it less bandwidth. Nothing else changes: the delay a straggler
causes comes out of the simulation - a collective in lock-step waits for its slowest flow, a TP
all-reduce waits for the slowest GPU's kernels - so "a straggler delays every collective it joins"
is a result, not an input. (Only work that runs as kernels on `Device.run` sees a compute slowdown.)
"""

from __future__ import annotations

from pydantic import Field, model_validator

from hardware_models.strict import StrictModel
from sim.errors import ScenarioError


class Straggler(StrictModel):
    gpu: int | None = Field(None, ge=0, description="global rank of the slow GPU")
    link: str | None = Field(None, description="a directed link 'src->dst' (as in the links table)")
    compute_slowdown: float = Field(1.0, ge=1.0, description="kernel time multiplier on this GPU (>= 1)")
    bandwidth_factor: float = Field(
        1.0, gt=0.0, le=1.0, description="fraction of capacity left: the GPU's NIC (both directions) or the link"
    )

    @model_validator(mode="after")
    def _one_target(self) -> Straggler:
        if (self.gpu is None) == (self.link is None):
            raise ValueError("a straggler names either gpu (a rank) or link ('src->dst')")
        if self.link is not None and self.compute_slowdown != 1.0:
            raise ValueError("compute_slowdown applies to a gpu, not a link")
        if self.compute_slowdown == 1.0 and self.bandwidth_factor == 1.0:
            raise ValueError("a straggler needs compute_slowdown > 1 or bandwidth_factor < 1")
        return self


def check_stragglers(stragglers: list[Straggler], num_gpus: int) -> None:
    for i, s in enumerate(stragglers):
        if s.gpu is not None and s.gpu >= num_gpus:
            raise ScenarioError(f"rank must be in 0..{num_gpus - 1}", path=f"hardware.stragglers.{i}.gpu", value=s.gpu)


def _nic_links(topology, node: str) -> list[int]:
    return [
        i
        for i, (s, d, k) in enumerate(zip(topology.link_src, topology.link_dst, topology.link_kind))
        if k == "nic" and node in (s, d)
    ]


def apply_stragglers(topology, devices, stragglers: list[Straggler]) -> None:
    """Slow the named devices and scale the named links' capacities (in place, before any flow runs)."""
    for i, s in enumerate(stragglers):
        if s.gpu is not None:
            device = devices[s.gpu]
            device.slowdown = s.compute_slowdown
            links = _nic_links(topology, device.node) if s.bandwidth_factor < 1.0 else []
        else:
            src, sep, dst = s.link.partition("->")
            if not sep or not topology.has_link(src.strip(), dst.strip()):
                raise ScenarioError(
                    "no such link; names are 'src->dst' as in `dcsim run --links N`",
                    path=f"hardware.stragglers.{i}.link",
                    value=s.link,
                )
            links = [topology.link_id(src.strip(), dst.strip())]
        for link in links:
            topology.capacity[link] *= s.bandwidth_factor
