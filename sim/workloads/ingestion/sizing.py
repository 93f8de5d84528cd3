"""The resource estimate of a `kind: ingestion` run (sim/engine/cost.py): per batch and per split
(partition) handled over `duration_s` at the trainers' demand (they take no more), plus the
autoscaler's monitor ticks (on_trainer with a DRAM tier: each batch's memory flow and host-to-device
copies too); flows at once: each worker's splits in flight and the trainers.
"""

from __future__ import annotations

from sim.engine.cost import Estimate

# measured on benchmarks/scenarios/ingestion-1h-400workers.yaml (events over 120 simulated s: ~105K
# batches, ~17K splits): 11 per batch until requests granted at once went on without their events,
# 10.3 until a worker's output slots became lanes (no process per batch), ~6.8 since; a split's 9
# became 8 when split loops and a split's processing became state machines (no process ends to
# process): the hour counts 24.8M events for its ~3.16M batches and ~0.52M splits (25.7M estimated)
EVENTS_PER_BATCH = 6.8  # slot, cores, stages, credit, send, delivery, trainer step
EVENTS_PER_SPLIT = 8.0  # master hand-out, memory, storage access and read, processing start and end
# its events are light: the hour's 24.8M events took 376 s on a 2-core VM whose engine probe ran
# 0.42x the reference machine (`python benchmarks/run.py --only ingestion-1h-400workers --repeats 3`,
# 2026-11-29; 384 s for 25.3M before the state machines): ~158 s there, 6.4 us each, against the
# median run's ~55 us (EVENTS_PER_S, sim/scenario/estimate.py); estimated: 373 s at that probe
EVENT_COST = 0.11


def ingestion_estimate(cfg, hw, network_model: str) -> Estimate:
    pre, data = cfg.preprocessing, cfg.dataset
    samples = cfg.trainers.demand_samples_per_s_per_host * hw.nodes * cfg.duration_s  # trainers take no more
    batches = samples / pre.batch_samples
    per_split = (
        data.samples_per_partition if cfg.media is None else max(1.0, data.partition_bytes / data.bytes_per_sample)
    )
    splits = samples / per_split
    workers = cfg.pool_size() if cfg.disaggregated else hw.nodes
    flows = batches + 2 * splits
    if cfg.host_memory_tier(hw) is not None:  # on_trainer: each batch's memory flow and its copies to the GPUs
        flows += batches * (1 + hw.gpus_per_node)
    monitor = cfg.duration_s / pre.autoscale.interval_s
    return Estimate(
        events=EVENTS_PER_BATCH * batches + EVENTS_PER_SPLIT * splits + 10 * monitor,
        flows=flows,
        simulated_flows=flows,
        peak_flows=workers * (pre.splits_in_flight + 2) + hw.nodes,
        spans=4 * batches + 4 * splits,
        event_cost=EVENT_COST,
        path="workload.duration_s",
        hint="a shorter duration_s or larger batch_samples / partition_bytes",
    )
