"""Memory tiers at run time: access laws, pages moving between a fast and a slow tier.

- `zipf`: Zipf access laws over rows or pages (sums over ranks that scale to billions of rows).
- `access`: page-access streams delivered in epochs (synthetic Zipf with phase changes, or a trace).
- `placement`: the page-placement engine (pages or embedding rows between two tiers).
- `policies`: placement policies (static, LRU, NUMA balancing, TPP) behind one interface.
- `tiers`: the memory layer that workloads use (hit rates, tier traffic).
"""
