"""What workloads share: model descriptions and the kernels they run.

- `transformer`: decoder-only LLM presets, tensor-parallel shards, per-layer kernel shapes and FLOPs.
- `training_shapes`: one transformer layer in training (forward ops and the backward derived from them).
- `dit`: video diffusion transformers for training.
- `dlrm`: embedding tables and the dense architecture of DLRM.
- `kernel`: `Kernel`, one timed kernel (name, FLOPs, bytes, duration) that every workload records.
"""
