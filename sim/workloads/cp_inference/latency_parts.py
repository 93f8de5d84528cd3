"""Keys of cp_inference's breakdown that hold NCCL's per-operation software latency
(sim/network/operation_cost.py), split out of the time parts they belong to."""

LATENCY_PREFIX = "latency:"  # breakdown keys of the software latency (split out of the time parts)
LATENCY_PARTS = ("ring_sends", "all2all", "tp_allreduce")
