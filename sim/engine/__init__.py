"""Time: the simulation core and what runs on it.

- `simulation`: `Simulation` owns the SimPy clock, the random generator, the id counters and the
  span recorder of one run (no module-level state: two simulations never influence each other).
- `compute`: device streams (a GPU runs one kernel at a time per stream) and their busy/FLOP counters.
- `replay`: record once, replay exactly - step keys and the tapes every fast path that repeats
  identical work shares.
- `activity`: exact busy time, bytes and FLOPs per component, independent of the recorder's cap;
  `link_traffic`: the bytes the network moves, binned over time; `open_intervals`: each GPU's open
  interval of transfers (and exact running extrema within groups).
- `progress`: driving a run to completion with an optional progress bar.
- `cost`: `Estimate`, what a run will create counted before it runs, and the per-item costs.
- `codes`: integer codes of values and rows in order of first appearance (`factorize`).
- `plotting`: the matplotlib backend and helpers every plot shares (`time_scale`, `finish`).
"""
