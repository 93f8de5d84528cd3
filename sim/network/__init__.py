"""Contention: how bytes move between endpoints of a topology.

- `backends`: the `Network` interface and its analytical (alpha-beta) and flow (max-min fair) backends.
- `max_min`, `flow_table`, `flow_bundles`, `flow_clocks`: the flow backend's exact incremental
  max-min fair rates (bundled refills of flows that share a leaf pair, bundle clocks).
- `replay`: exact replay of repeated collective steps.
- `collectives`: ring, tree, hierarchical, direct collectives built from point-to-point flows.
"""
