"""Validation harness: hold dcsim's predictions against real torch runs.

Principle (README.md, "Validation"): calibrate on primitives, predict compositions.

    dcsim validate [--device cpu|cuda] [--quick] [--json] [--out DIR] [--compare RECORDS]

- records.py       measured-run records (pydantic), JSON/YAML files, one-line load errors
- timing.py        warm-up, repeats, median / IQR, device stamp of every record
- primitives.py    GEMM, causal SDPA, memory copy, embedding_bag (one process)
- distributed.py   send/recv, all-reduce, all-to-all and CP ring attention (2 processes, gloo/NCCL)
- torch_models.py  the transformer stack and the pass-KV / pass-Q ring attention in torch
- compositions.py  transformer prefill, DataLoader pipeline, DLRM embedding training step
- calibrate.py     least-squares fit of the device efficiencies and the link; profile YAML files
- predict.py       every record as a dcsim prediction (cost functions, collective / cp_inference /
                   ingestion / embedding_training scenarios through sim.runner.run)
- report.py        error figures overall and per family, the contract JSON, the scatter plot
- harness.py       the pipeline behind `dcsim validate`

Stored results: records/<device>-full.json (a full-mode run of the development machine, loadable
with --compare), records/published.yaml (paper figures), profiles/<device>.yaml (its calibration).
Only the measuring modules import torch, and only when measuring.
"""
