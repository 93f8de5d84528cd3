"""A cluster in a simulation: the topology, its network backend and the devices of every host.

- `cluster`: `Cluster.build` from the scenario's hardware.
- `stragglers`: one slow GPU or one slow link in an otherwise healthy cluster.
"""
