"""Cost estimates before running: SimPy events, network flows and memory, and the limits that refuse
a scenario which would explode (`dcsim check` prints them; `run` enforces them first).

Every estimate is counted from the scenario alone, in closed form (nothing is built: estimating a
10^9-flow all-to-all must itself be cheap). Figures are orders of magnitude, meant to tell a
minute-long run from one that would exhaust memory or run for days:

- `flows`: transfers started over the run, replayed steps included; `simulated_flows`: those whose
  rates the flow network actually computes (a repeated collective step on an idle network is
  replayed after its first run, sim/network/replay.py); `peak_flows`: flows active at once (they
  size the max-min incidence matrices); `listed_flows`: flow tuples held at once in collective
  schedules (only distinct steps: a ring's identical steps share one list).
- `events`: SimPy events. `kernels`, `spans` (kept up to `trace_limit`), `links` (directed
  topology links, counted from the shape: every GPU has NVSwitch, NIC and host-link duplexes).
- `memory_bytes` = interpreter and libraries + per link + per active flow + per listed flow + per
  kept span + per-kind extras, with the per-item costs below.

Per kind: collective - steps x flows per step of each algorithm's schedule (`auto` counts every
candidate, as `choose` builds them all); cp_inference - kernels and flows per layer from the layer
plan x simulated layers x simulated CP ranks x phases (one prefill + one per decode token per
request); embedding_training - per iteration the three all-to-alls (PXN: n(L+H-2) flows, direct:
n(n-1)), two bucketed all-reduces and the kernels of every GPU; ingestion - per batch and per split
(partition) handled over `duration_s` at the trainers' demand; training_campaign - one event per
checkpoint cycle and a few per failure, per replica and compared interval, plus the checkpoint
flows (and the training run that gives the iteration time); training - forward/backward ops of the
simulated stage groups (one replica per equivalence class where representative), with replay one
layer per op shape kernel by kernel, plus pipeline sends and the DP rings; tiered_memory - the
pages' state and one transfer group per epoch (an epoch lasts at least its accesses x the fastest
tier's latency / outstanding accesses); several jobs (`workloads:`) - the sum over jobs, run twice
(together and each alone), their flows at once adding up. A kind without an estimator here gets
the topology and trace terms only (noted in `notes`).

The per-item costs were measured on this repository's shipped scenarios and benchmarks (peak RSS
of one process, 2-core CI machine): about 200 MB after imports; ~1.7 KB per directed link (16K-GPU
clos3: 100K links); ~700 B per concurrently active flow including its schedule tuple (1,024-GPU
all-to-all: 1.05M flows, +700 MB); up to ~2 KB per kept span. Event counts per kernel, flow, batch
and cycle are rounded from the same runs. They are capacity estimates, not results.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from sim.errors import ScenarioError

BASE_BYTES = 250e6                 # interpreter, numpy/scipy/pandas/simpy/networkx, catalog (measured ~200 MB)
BYTES_PER_LINK = 2e3               # networkx edge + link arrays + routing caches (measured ~1.7 KB)
BYTES_PER_ACTIVE_FLOW = 500.0      # flat route arrays, incidence matrix entries, rate/remaining arrays
BYTES_PER_LISTED_FLOW = 200.0      # a (src, dst, bytes) tuple in a schedule list
BYTES_PER_SPAN = 2e3               # a recorded span row and what the trace/energy accounting keeps for it
BYTES_PER_TABLE = 1e4              # assumption: an embedding table, its shards and planner arrays
EVENTS_PER_KERNEL = 3.0            # timeout + stream request/release (rounded from cp/embedding runs)
EVENTS_PER_FLOW = 2.0              # admission + completion, amortised over batched updates
EVENTS_PER_STEP = 4.0              # a collective step: its transfer event, kick, timers
EVENTS_PER_BATCH = 25.0            # ingestion: read, stages, send, trainer pull (measured 21-22)
EVENTS_PER_SPLIT = 50.0            # ingestion: master hand-out, storage accesses, ledger
GIB = 2.0**30


@dataclass(frozen=True)
class Limits:
    """What `run` refuses up front. None disables a limit."""
    memory_bytes: float | None = 8 * GIB
    events: float | None = 1e9
    simulated_flows: float | None = 1e9


DEFAULT_LIMITS = Limits()


@dataclass
class Estimate:
    events: float = 0.0
    flows: float = 0.0
    simulated_flows: float = 0.0
    peak_flows: float = 0.0
    listed_flows: float = 0.0
    kernels: float = 0.0
    spans: float = 0.0
    links: float = 0.0
    extra_bytes: float = 0.0
    route_factor: float = 1.0   # routed paths per flow (ECMP over explicit spines, tori): scales per-flow memory
    trace_limit: float = 200_000
    notes: list[str] = field(default_factory=list)
    hint: str = ""              # what to change when refused
    path: str = "workload"      # the key that drives the cost

    @property
    def memory_bytes(self) -> float:
        return (BASE_BYTES + self.links * BYTES_PER_LINK + self.peak_flows * BYTES_PER_ACTIVE_FLOW * self.route_factor
                + self.listed_flows * BYTES_PER_LISTED_FLOW + min(self.spans, self.trace_limit) * BYTES_PER_SPAN
                + self.extra_bytes)

    def add(self, other: "Estimate", times: float = 1.0) -> None:
        """Accumulate `other` run `times` times (peaks and lists do not add up over time)."""
        for name in ("events", "flows", "simulated_flows", "kernels", "spans"):
            setattr(self, name, getattr(self, name) + times * getattr(other, name))
        self.peak_flows = max(self.peak_flows, other.peak_flows)
        self.listed_flows = max(self.listed_flows, other.listed_flows)
        self.extra_bytes = max(self.extra_bytes, other.extra_bytes)

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("hint", "path", "trace_limit", "route_factor")}
        out["memory_bytes"] = self.memory_bytes
        return out

    def lines(self) -> list[str]:
        from hardware_models.units import format_bytes
        return [f"estimate: {self.events:.3g} events, {self.flows:.3g} flows ({self.simulated_flows:.3g} simulated, "
                f"{self.peak_flows:.3g} at once), {self.kernels:.3g} kernels, {self.links:.3g} links, "
                f"memory ~{format_bytes(self.memory_bytes)}", *(f"  note: {n}" for n in self.notes)]


# ---------------------------------------------------------------------------------------------
# entry points

def estimate(scenario) -> Estimate:
    """The cost of running `scenario` (a validated sim.scenario.model.Scenario)."""
    hw = scenario.hardware
    if scenario.workloads is not None:
        from sim.scenario.jobs import job_host_pools, place_jobs, sub_hardware
        est = Estimate(path="workloads", hint="fewer or smaller jobs")
        jobs = [_workload(job, sub_hardware(hw, len(hosts)), scenario.network_model)
                for job, hosts in zip(scenario.workloads, place_jobs(scenario.workloads, hw.nodes))]
        for one in jobs:
            est.add(one, times=2)                   # together, then alone
        for name in ("peak_flows", "listed_flows", "extra_bytes"):        # together: all at once
            setattr(est, name, sum(getattr(one, name) for one in jobs))
        est.notes = [n for one in jobs for n in one.notes]
        pools = job_host_pools(scenario.workloads, hw)
    else:
        est = _workload(scenario.workload, hw, scenario.network_model)
        pools = scenario.workload.host_pools(hw)
    est.links = topology_links(hw, pools)
    est.route_factor = route_factor(hw.topology)
    est.trace_limit = scenario.trace_limit
    return est


def enforce(scenario, limits: Limits | None = DEFAULT_LIMITS) -> Estimate:
    """Estimate and refuse (one-line ScenarioError with the estimate and a hint) past `limits`."""
    est = estimate(scenario)
    if limits is None:
        return est
    from hardware_models.units import format_bytes
    over = []
    if limits.memory_bytes is not None and est.memory_bytes > limits.memory_bytes:
        over.append(f"~{format_bytes(est.memory_bytes)} of memory (limit {format_bytes(limits.memory_bytes)})")
    if limits.events is not None and est.events > limits.events:
        over.append(f"{est.events:.2g} events (limit {limits.events:.2g})")
    if limits.simulated_flows is not None and est.simulated_flows > limits.simulated_flows:
        over.append(f"{est.simulated_flows:.2g} simulated flows (limit {limits.simulated_flows:.2g})")
    if over:
        topology_bound = est.links * BYTES_PER_LINK > 0.5 * est.memory_bytes
        path, hint = ("hardware.nodes", "a smaller cluster") if topology_bound else (est.path, est.hint)
        raise ScenarioError(f"refused before running: estimated {' and '.join(over)} "
                            f"({est.peak_flows:.2g} flows at once, {est.links:.2g} links); try {hint}, "
                            "or run anyway with `dcsim run --no-limits` (run(scenario, limits=None))", path=path)
    return est


def topology_links(hw, pools=()) -> float:
    """Directed links of the cluster's topology, from its shape (see module docstring)."""
    gpus, hosts = hw.num_gpus, hw.nodes
    per_gpu = 6.0                                   # NVSwitch, NIC and host-link duplexes
    switch = 0.5 * gpus + 64                        # fabric links above the NICs (measured 0.1-0.3 per GPU)
    topo = hw.topology
    if topo.kind in ("fat-tree", "rail-optimized") and not topo.spines_aggregated:
        leaves = hw.gpus_per_node if topo.kind == "rail-optimized" else hosts / (topo.hosts_per_leaf or 1)
        switch += 2.0 * leaves * (topo.spines or 16)                 # every leaf to every explicit spine
    tiers = 2.0 * hosts * len(hw.memory_tiers)
    pool = sum(p.count * (2.0 + 2.0 * len(p.media)) for p in pools)
    return per_gpu * gpus + switch + tiers + pool


def route_factor(topo) -> float:
    """Equal-cost paths a flow is spread over (its incidence entries scale with them): 1 on one
    switch, clos3 and aggregated spines; min(spines, max_paths) over explicit spines; up to
    max_paths on tori and user graphs."""
    if topo.kind in ("fat-tree", "rail-optimized") and not topo.spines_aggregated and topo.ecmp == "even":
        return float(min(topo.spines or 16, topo.max_paths))
    if topo.kind in ("torus", "graph") and topo.ecmp == "even":
        return float(topo.max_paths)
    return 2.0 if topo.kind == "ring" else 1.0


# ---------------------------------------------------------------------------------------------
# per kind

def _workload(config, hw, network_model: str) -> Estimate:
    kind = config.kind
    fn = {"collective": _collective, "cp_inference": _cp_inference, "embedding_training": _embedding,
          "ingestion": _ingestion, "training_campaign": _campaign, "training": _training,
          "tiered_memory": _tiered_memory}.get(kind)
    if fn is None:
        return Estimate(notes=[f"no estimator for kind {kind}: topology and trace only"])
    return fn(config, hw, network_model)


def schedule_shape(op: str, algorithm: str, n: int, hosts: int, per_host: int, nbytes: float) -> tuple[float, float, float]:
    """(steps, flows per step, distinct steps) of sim.network.collectives' schedule of `op` on n ranks."""
    if n < 2:
        return 0.0, 0.0, 0.0
    if algorithm == "hierarchical" and hosts > 1 and per_host > 1:
        steps = {"all_reduce": 2 * (per_host - 1) + 2 * (hosts - 1)}.get(op, (per_host - 1) + (hosts - 1))
        return steps, n, steps                          # per-step lists are built anew: no replay
    if algorithm == "tree":
        depth = int(math.floor(math.log2(n)))
        chunks = max(1, min(64, int(nbytes // (4 << 20))))
        steps = 2 * (depth + chunks - 1)
        return steps, n - 1, steps
    if algorithm == "direct" and op == "all_to_all":
        return 1, n * (n - 1), 1
    steps = {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1, "send_recv": 1,
             "all_to_all": n - 1}[op]
    return steps, n, (n - 1 if op == "all_to_all" else 1)


def collective_cost(op: str, algorithm: str, n: int, hosts: int, per_host: int, nbytes: float,
                    replay: bool) -> Estimate:
    """One collective: every candidate of `auto` is built (listed), the largest one is run."""
    from sim.network.collectives import candidates
    algos = candidates(op) if algorithm == "auto" else (algorithm,)
    est = Estimate()
    for algo in algos:
        if algo == "hierarchical" and (n % max(per_host, 1) or hosts < 2):
            continue
        steps, per_step, distinct = schedule_shape(op, algo, n, hosts, per_host, nbytes)
        est.listed_flows += distinct * per_step
        run = Estimate(events=EVENTS_PER_STEP * steps + 10, flows=steps * per_step,
                       simulated_flows=(distinct if replay else steps) * per_step, peak_flows=per_step,
                       spans=steps * min(per_step, n))
        if run.flows >= est.flows:
            est.events, est.flows, est.simulated_flows = run.events, run.flows, run.simulated_flows
            est.peak_flows, est.spans = run.peak_flows, run.spans
    return est


def _collective(cfg, hw, network_model: str) -> Estimate:
    n = len(cfg.ranks(hw.num_gpus))
    per_host = min(hw.gpus_per_node, n)
    hosts = math.ceil(n / per_host)
    replay = network_model == "flow" and hw.topology.ecmp == "even" and not cfg.background
    est = Estimate(path="workload.bytes" if isinstance(cfg.bytes, list) else "hardware.nodes",
                   hint="network_model: analytical, fewer ranks (workload.group) or another algorithm")
    for size in cfg.sizes:
        one = collective_cost(cfg.op, cfg.algorithm, n, hosts, per_host, size, replay)
        one.peak_flows += len(cfg.background)
        one.flows += len(cfg.background)
        one.simulated_flows += len(cfg.background)
        est.add(one)
        est.spans += n
    est.events += EVENTS_PER_FLOW * len(cfg.background) * len(cfg.sizes)
    return est


def _cp_inference(cfg, hw, network_model: str) -> Estimate:
    from sim.workloads.cp_inference.workload import Request
    from sim.workloads.cp_inference.plan import Phase, plan_layer
    tp, cp = cfg.degrees(hw)
    ranks = 1 if (cfg.representative(hw) and cp > 1) else cp
    if cfg.arrivals is not None:
        a = cfg.arrivals
        reqs = [Request(prompt_tokens=a.prompt_tokens, cached_tokens=a.cached_tokens, decode_tokens=a.decode_tokens)]
        count = a.count
    else:
        reqs, count = list(cfg.requests), 1
    first = reqs[0]
    ring = "pass-kv" if cfg.ring == "pass-kv" else "pass-q"       # auto: count the costlier (All2All too)
    prefill, decode = (plan_layer(cfg.model, hw.gpu, tp, cp, phase, ring, cfg.precision) for phase in
                       (Phase("prefill", first.prompt_tokens, first.cached_tokens),
                        Phase("decode", 1, first.prompt_tokens + first.cached_tokens)))
    layers = prefill.layers
    simulated = layers if cfg.simulate.layers == "all" else min(cfg.simulate.layers, layers)
    est = Estimate(path="workload.requests" if cfg.arrivals is None else "workload.arrivals.count",
                   hint="fewer requests or decode_tokens, simulate: {layers: 1} or {ranks: representative}, "
                        "or network_model: analytical")
    ar_steps = 2 * (tp - 1) if tp > 1 else 0
    for plan, phases in ((prefill, count * len(reqs)),
                         (decode, count * sum(r.decode_tokens for r in reqs))):
        if not phases:
            continue
        per_gpu = (len(plan.pre_attention) + sum(len(s) for s in plan.ring_steps) + len(plan.post_exchange)
                   + len(plan.out_proj) + len(plan.ffn))
        gpus = ranks * tp
        kernels = gpus * (simulated * per_gpu + len(plan.final))
        ring_flows = gpus * (cp - 1) * (2 if plan.exchange_bytes else 1)
        ar_flows = 2 * ranks * ar_steps * tp if plan.allreduce_bytes > 0 else 0
        flows = simulated * (ring_flows + ar_flows)
        one = Estimate(events=EVENTS_PER_KERNEL * kernels + EVENTS_PER_FLOW * flows, flows=flows,
                       simulated_flows=flows, peak_flows=ring_flows + tp * ranks + len(cfg.background),
                       kernels=kernels, spans=kernels + flows + 3 * (layers - simulated) * gpus)
        est.add(one, times=phases)
    est.flows += len(cfg.background)
    return est


def _embedding(cfg, hw, network_model: str) -> Estimate:
    explicit, generators = cfg.table_lists()
    tables = len(explicit) + sum(g.count for g in generators)
    n, per_host = hw.num_gpus, hw.gpus_per_node
    hosts = hw.nodes
    pxn = cfg.all_to_all == "pxn" and n > per_host
    a2a = n * (per_host + hosts - 2) if pxn else n * (n - 1)
    allreduce = collective_cost("all_reduce", "auto", n, hosts, per_host, 1e8, replay=False)
    tier_flows = 2 * n * max(1, len(cfg.placements) - 1)
    flows = 3 * a2a + 2 * allreduce.flows + tier_flows
    kernels = n * (3 * (len(cfg.dense.bottom_mlp) + len(cfg.dense.top_mlp) + 2) + 4)
    per_iter = Estimate(events=EVENTS_PER_FLOW * flows + EVENTS_PER_KERNEL * kernels + 2 * allreduce.events,
                        flows=flows, simulated_flows=flows, peak_flows=a2a + n, kernels=kernels,
                        spans=kernels + flows, listed_flows=3 * a2a + allreduce.listed_flows)
    est = Estimate(path="workload.iterations", hint="fewer iterations or GPUs, or network_model: analytical",
                   extra_bytes=tables * BYTES_PER_TABLE, notes=[f"{tables} tables"])
    est.add(per_iter, times=cfg.iterations)
    return est


def _ingestion(cfg, hw, network_model: str) -> Estimate:
    pre, data = cfg.preprocessing, cfg.dataset
    samples = cfg.trainers.demand_samples_per_s_per_host * hw.nodes * cfg.duration_s   # trainers take no more
    batches = samples / pre.batch_samples
    per_split = data.samples_per_partition if cfg.media is None else max(1.0, data.partition_bytes / data.bytes_per_sample)
    splits = samples / per_split
    workers = cfg.pool_size() if cfg.disaggregated else hw.nodes
    flows = batches + 2 * splits
    monitor = cfg.duration_s / pre.autoscale.interval_s
    return Estimate(events=EVENTS_PER_BATCH * batches + EVENTS_PER_SPLIT * splits + 10 * monitor,
                    flows=flows, simulated_flows=flows, peak_flows=workers * (pre.splits_in_flight + 2) + hw.nodes,
                    spans=4 * batches + 4 * splits, path="workload.duration_s",
                    hint="a shorter duration_s or larger batch_samples / partition_bytes")


def _campaign(cfg, hw, network_model: str) -> Estimate:
    gpus, gpn = hw.num_gpus, hw.gpus_per_node
    rates = [f.rate_per_s(gpus, gpn) for f in cfg.faults]
    failures = sum(rates) * cfg.horizon + sum(len(f.at or []) for f in cfg.faults)
    interval = cfg.checkpoint.interval
    if interval == "young-daly":
        total = cfg.checkpoint.total_bytes(gpus)
        stall_s = total / cfg.storage.bandwidth if cfg.checkpoint.mode == "blocking" \
            else total / gpus / hw.host_link.bandwidth
        unexpected = sum(r for f, r in zip(cfg.faults, rates) if not f.planned)
        interval = math.sqrt(2 * stall_s / unexpected) if unexpected > 0 else cfg.horizon
    intervals = [interval, *cfg.checkpoint.compare_intervals]
    cycles = sum(cfg.horizon / max(i, cfg.iteration_s or 0.0) for i in intervals)   # iteration_s: None with training
    histories = cfg.replicas * (cycles + 3 * failures * len(intervals))
    io_flows = 3 * gpus
    est = Estimate(events=histories + EVENTS_PER_FLOW * io_flows, flows=io_flows, simulated_flows=io_flows,
                   peak_flows=gpus, listed_flows=gpus, spans=io_flows, path="workload.replicas",
                   hint="fewer replicas or compare_intervals, or a shorter horizon")
    if getattr(cfg, "training", None) is not None:       # one training run first gives the iteration time
        est.add(_training(cfg.training, hw, network_model))
    return est


KERNELS_PER_LAYER = 12      # training: GEMMs, attention, norms and elementwise per layer and direction (rounded)
COLLECTIVES_PER_LAYER = 4   # training: TP (and CP) collectives per layer, forward and backward
EVENTS_PER_OP = 6.0         # training: a replayed forward/backward op (hold, p2p send, waits; measured ~7)
TRAINING_CLASSES = 1        # assumption: replica equivalence classes on a regular fabric (+1 per straggler)


def _training(cfg, hw, network_model: str) -> Estimate:
    """Simulated stage groups (pp x replicas; one replica per class where representative) run each
    forward/backward op; with replay only the first op of each shape runs layer by layer."""
    c = cfg.with_degrees(hw)
    par = c.parallelism
    tp, cp, pp, dp = par.tp, par.cp, par.pp, par.dp or 1
    group = tp * cp
    representative = cfg.simulate.ranks == "representative" or (cfg.simulate.ranks == "auto"
                                                                 and network_model == "analytical")
    replicas = min(dp, TRAINING_CLASSES + len(hw.stragglers)) if representative else dp
    replay = {"on": True, "off": False}.get(cfg.simulate.replay,
                                            network_model == "analytical" or group <= hw.gpus_per_node)
    ops = 2 * max(1, c.micro_batches) * c.virtual_stages            # forward + backward per micro-batch and chunk
    layers_per_op = max(1, c.family.layers // (pp * c.virtual_stages))
    groups = pp * replicas
    # replay: one layer of each op shape (forward, backward, recompute) per group signature in full
    detailed_layers = 4 * TRAINING_CLASSES if replay else groups * ops * layers_per_op
    tp_steps, cp_steps = 2 * (tp - 1), cp - 1                   # ring TP all-reduce, CP all-gather
    steps_per_layer = COLLECTIVES_PER_LAYER * (tp_steps + cp_steps)
    kernels = detailed_layers * KERNELS_PER_LAYER
    collective_flows = detailed_layers * COLLECTIVES_PER_LAYER * (tp_steps * tp * cp + cp_steps * cp * tp)
    p2p_flows = groups * ops * group if pp > 1 else 0
    dp_flows = (2 if cfg.data_parallel == "fsdp" else 1) * dp * cp * tp * pp
    flows = collective_flows + p2p_flows + dp_flows
    dp_collectives = (2 if cfg.data_parallel == "fsdp" else 1) * pp * c.virtual_stages * tp   # one streamed ring each
    events = (EVENTS_PER_KERNEL * kernels + EVENTS_PER_STEP * (detailed_layers * steps_per_layer + dp_collectives)
              + (EVENTS_PER_OP * groups * ops if replay else 0.0))
    per_iter = Estimate(events=events, flows=flows, simulated_flows=flows, peak_flows=groups * group + dp_flows / 2,
                        kernels=kernels, spans=kernels + p2p_flows + dp_flows + groups * ops)
    est = Estimate(path="workload.iterations", hint="fewer iterations or micro-batches, simulate: {replay: on}, "
                                                    "or network_model: analytical")
    est.add(per_iter, times=cfg.iterations)
    return est


EVENTS_PER_EPOCH = 12.0     # tiered_memory: two transfer groups, a timeout and their flows per epoch
BYTES_PER_PAGE = 100.0      # tiered_memory: page state arrays and per-epoch access counts (int64 + float)


def _tiered_memory(cfg, hw, network_model: str) -> Estimate:
    fast, slow = cfg.tiers(hw)
    if cfg.footprint is not None or not cfg.access.trace:
        pages = float(cfg.pages())
    else:
        from sim.memory.access import load_trace
        pages = float(load_trace(cfg.access.trace)[0].max()) + 1
    n = cfg.epoch_accesses
    epoch_s = max(n * min(fast.latency, slow.latency) / cfg.outstanding_accesses,
                  n * cfg.access.access_bytes / (fast.bandwidth + slow.bandwidth))     # fastest an epoch can go
    epochs = (cfg.duration_s or math.inf) / epoch_s if epoch_s > 0 else math.inf
    if cfg.access.trace:
        from sim.memory.access import load_trace
        epochs = min(epochs, float(load_trace(cfg.access.trace)[1].sum()) / n + 1)
    return Estimate(events=EVENTS_PER_EPOCH * epochs, flows=4 * epochs, simulated_flows=4 * epochs, peak_flows=4,
                    spans=epochs, extra_bytes=pages * BYTES_PER_PAGE, path="workload.footprint",
                    hint="a smaller footprint or larger page_bytes, a shorter duration_s or larger epoch_accesses",
                    notes=[f"{pages:.3g} pages, up to {epochs:.3g} epochs"])
