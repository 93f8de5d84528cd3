"""Power, energy and cost of a run, from its activity.

- `inventory`: what draws power in a cluster (components, power specs, groups, racks, prices).
- `meter`: the energy meter attached to a run and its `PowerReport` (metrics, power over time).
- `plots`: the cluster power over time.
"""
