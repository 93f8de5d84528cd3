"""The scenario: the user's input, validated before any work starts.

- `model`: the pydantic models of the scenario contract, loading, `--set` overrides, errors.
- `jobs`: several jobs sharing one cluster (`workloads:`), their placement on hosts.
- `estimate`: cost estimates before running (the topology terms here, each kind's own part from its
  `Workload.estimate`) and the limits that refuse a scenario.
- `schema_doc`: the scenario reference in Markdown (`dcsim schema --markdown`).
"""
