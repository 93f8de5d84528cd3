"""`dcsim validate --measured FILE`: users' own measured runs compared with dcsim's predictions.

- `pytorch_profile`: cases from a torch.profiler trace (per op class, per collective, per step);
- `nccl_tests`: cases from nccl-tests output (its text table);
- `csv_table`: cases from a plain CSV (`name, seconds` or `name, size, seconds`);
- `mapping`: the hardware a case is predicted on (a scenario's, or the calibrated CPU profile) and
  the predictions (device cost functions for kernels, the `collective` workload for collectives,
  `trace_replay` for steps);
- `report`: the side-by-side table, per-category errors, the scatter plot and the JSON object;
- `record_torch`, `make_example_trace`: record real traces on this machine (tests, shipped example).
"""
