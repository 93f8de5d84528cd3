"""The cost of running a scenario, counted before it runs: `Estimate` and its per-item costs.

An `Estimate` counts what a run will create - SimPy events, network flows (started, simulated, at
once, held in schedule lists), kernels, recorded spans, topology links - and turns them into a
memory figure with the per-item costs below. Every workload kind counts its own part in closed form
(`Workload.estimate`, sim/workloads/base.py; a kind's `sizing` module); sim/scenario/estimate.py adds
the topology and trace terms and enforces the limits. Figures are orders of magnitude, meant to tell
a minute-long run from one that would exhaust memory or run for days:

- `flows`: transfers started over the run, replayed steps included; `simulated_flows`: those whose
  rates the flow network actually computes (a repeated collective step with its links to itself is
  replayed after its first run, sim/network/replay.py); `peak_flows`: flows active at once (they
  size the max-min incidence matrices); `listed_flows`: flow tuples held at once in collective
  schedules (only distinct steps: a ring's identical steps share one list).
- `events`: SimPy events. `kernels`, `spans` (kept up to `trace_limit`), `links` (directed
  topology links).
- `memory_bytes` = interpreter and libraries + per link + per active flow + per listed flow + per
  kept span + per-kind extras (`extra_bytes`).

The per-item costs were measured on this repository's shipped scenarios and benchmarks (peak RSS
of one process, 2-core CI machine): about 200 MB after imports; ~1.7 KB per directed link (16K-GPU
clos3: 100K links); ~700 B per concurrently active flow including its schedule tuple (1,024-GPU
all-to-all: 1.05M flows, +700 MB); up to ~2 KB per kept span. Event counts per kernel, flow, batch
and step are rounded from the same runs. They are capacity estimates, not results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from hardware_models.units import format_bytes

BASE_BYTES = 250e6  # interpreter, numpy/scipy/pandas/simpy/networkx, catalog (measured ~200 MB)
BYTES_PER_LINK = 2e3  # networkx edge + link arrays + routing caches (measured ~1.7 KB)
BYTES_PER_ACTIVE_FLOW = 500.0  # flat route arrays, incidence matrix entries, rate/remaining arrays
BYTES_PER_LISTED_FLOW = 200.0  # a (src, dst, bytes) tuple in a schedule list
BYTES_PER_SPAN = 2e3  # a recorded span row and what the trace/energy accounting keeps for it
EVENTS_PER_KERNEL = 3.0  # timeout + stream request/release (rounded from cp/embedding runs)
# a kernel run as its own process on a device stream (Device.run; embedding's dense kernels): its start,
# stream request and release, timeout and end (measured: the 1,024-GPU embedding iteration's 80,896)
EVENTS_PER_DEVICE_KERNEL = 5.0
EVENTS_PER_FLOW = 2.0  # admission + completion, amortised over batched updates
EVENTS_PER_STEP = 4.0  # a collective step: its transfer event, kick, timers


@dataclass
class Estimate:
    """What one run (or one part of it) creates; `memory_bytes` prices it."""

    events: float = 0.0
    flows: float = 0.0
    simulated_flows: float = 0.0
    peak_flows: float = 0.0
    listed_flows: float = 0.0
    kernels: float = 0.0
    spans: float = 0.0
    links: float = 0.0
    extra_bytes: float = 0.0
    route_factor: float = 1.0  # routed paths per flow (ECMP over explicit spines, tori): scales per-flow memory
    # wall time of one of these events relative to the median run's (a kind whose events carry less or
    # more work, measured): scales the wall-time figure (sim/scenario/estimate.py)
    event_cost: float = 1.0
    # wall seconds (on the machine the rates were measured on) of work that grows with something other
    # than events, e.g. simulated flows whose rate updates touch many others (sim/scenario/estimate.py)
    extra_work_s: float = 0.0
    trace_limit: float = 200_000
    notes: list[str] = field(default_factory=list)
    hint: str = ""  # what to change when refused
    path: str = "workload"  # the key that drives the cost

    @property
    def memory_bytes(self) -> float:
        return (
            BASE_BYTES
            + self.links * BYTES_PER_LINK
            + self.peak_flows * BYTES_PER_ACTIVE_FLOW * self.route_factor
            + self.listed_flows * BYTES_PER_LISTED_FLOW
            + min(self.spans, self.trace_limit) * BYTES_PER_SPAN
            + self.extra_bytes
        )

    def add(self, other: Estimate, times: float = 1.0) -> None:
        """Accumulate `other` run `times` times (peaks and lists do not add up over time; the cost
        per event is the events' mean)."""
        events = self.events + times * other.events
        if events > 0:
            self.event_cost = (self.events * self.event_cost + times * other.events * other.event_cost) / events
        for name in ("events", "flows", "simulated_flows", "kernels", "spans", "extra_work_s"):
            setattr(self, name, getattr(self, name) + times * getattr(other, name))
        self.peak_flows = max(self.peak_flows, other.peak_flows)
        self.listed_flows = max(self.listed_flows, other.listed_flows)
        self.extra_bytes = max(self.extra_bytes, other.extra_bytes)

    def as_dict(self) -> dict:
        out = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("hint", "path", "trace_limit", "route_factor", "event_cost", "extra_work_s")
        }
        out["memory_bytes"] = self.memory_bytes
        return out

    def lines(self) -> list[str]:
        return [
            f"estimate: {self.events:.3g} events, {self.flows:.3g} flows ({self.simulated_flows:.3g} simulated, "
            f"{self.peak_flows:.3g} at once), {self.kernels:.3g} kernels, {self.links:.3g} links, "
            f"memory ~{format_bytes(self.memory_bytes)}",
            *(f"  note: {n}" for n in self.notes),
        ]
