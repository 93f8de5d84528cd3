"""What a user sees of a run: output files, trace, bottleneck report and the core plots.

- `result`: `RunResult` (a run's metrics, spans, links, plots, bottleneck) and its JSON summary.
- `output`: summary.json, scenario.resolved.yaml, events table, trace and PNG plots in a directory.
- `trace`, `trace_view`: Chrome/Perfetto trace export and a static picture of it.
- `columns`: `Columns`, a table as named numpy columns: what the bottleneck report computes on (the
  recorder's spans, the link table), so a run's report needs no pandas.
- `resources`: which resource each recorded span occupied, and busy time per resource.
- `bottleneck`: the critical path, the resource that bounded the run, utilisation per resource.
- `plots`, `plot_topology`: core plots of any run, plus the workload kind's own (`Workload.plots`,
  drawn by sim/workloads/<kind>/plots.py).
- `provenance`: which hardware profile a run used and whether it was calibrated.
"""
