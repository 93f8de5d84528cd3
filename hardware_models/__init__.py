"""Pure hardware specs and cost functions: devices, memory tiers, links, topologies, the catalog.

Nothing here imports simpy or sim: every spec is frozen data, every cost function is plain math.
"""
