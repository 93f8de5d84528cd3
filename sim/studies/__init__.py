"""Many runs of one scenario: sweeps over grids, seeds, Pareto fronts.

- `sweep`: `dcsim sweep` (grids of `--set` overrides, resumable, parquet/csv table).
- `executors`: where sweep points run (in process, a local process pool, Dask).
- `sweep_plots`, `pareto`: plots of sweep tables; their Pareto fronts.
- `seeds`: the mean and confidence interval of every scalar metric over several seeds.
- `cp_scaling`: TTFT against host counts for context-parallel inference (for the scaling plot).
"""
