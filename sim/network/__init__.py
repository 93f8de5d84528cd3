"""Contention: how bytes move between endpoints of a topology.

- `base`: the `Network` interface and what every backend shares (routing, link accounting, spans).
- `analytical`, `flow`: the alpha-beta backend and the max-min fair flow backend; `backends`:
  `make_network`, a backend by name.
- `max_min`, `flow_table`, `flow_slots`, `flow_bundles`, `flow_clocks`: the flow backend's exact
  incremental max-min fair rates (the table's refills over its slot storage, bundled refills of flows
  that share a leaf pair, bundle clocks).
- `replay`: exact replay of repeated collective steps (`Trajectory`), and of what a stretch of time
  did to the network (`TrafficTape`).
- `collectives`: ring, tree, hierarchical, direct collectives built from point-to-point flows.
- `collective_cost`: a collective's schedule shape and simulator cost in closed form (for estimates).
"""
