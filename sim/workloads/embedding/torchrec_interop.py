"""TorchRec interop: TorchRec's tables and sharding plans in, dcsim's plan out in TorchRec's terms.

TorchRec (github.com/pytorch/torchrec) describes tables as `EmbeddingBagConfig`s (name,
num_embeddings, embedding_dim, data_type, feature_names) and a plan as a `ShardingPlan`: per module
path, per table a `ParameterSharding` (sharding_type, compute_kernel, ranks, and the shards'
offsets, sizes and placements). Its JSON form here is what `ShardingPlan._serialize()` writes:

    {"plan": {"sparse.ebc": {"t0": {"sharding_type": "table_wise", "compute_kernel": "fused",
              "ranks": [3], "shards": [{"shard_offsets": [0, 0], "shard_sizes": [1000, 128],
              "placement": "rank:3/cuda:3"}]}, ...}}}

plus an optional per-table "cache_load_factor" (TorchRec's `CacheParams.load_factor`). The printed
form (`str(plan)`: "module: ..." and its two tables) is read too. None of this needs torchrec;
`sharding_plan` builds the `ShardingPlan` object where torchrec is installed (`dcsim[torchrec]`).

In: `workload_from_torchrec(configs, plan, pooling)` gives a workload fragment (tables,
`sharding.planner: manual` with per-table scheme / ranks / placement, and the placements used)
to merge into an `embedding_training` scenario. Pooling factors are not part of a TorchRec table
(its planner takes them as `ParameterConstraints.pooling_factors`, default 1.0); give them.

Out: `plan_to_torchrec(plan, model)` writes a dcsim `Plan` as the JSON form. One mapping both ways:
- sharding type <-> scheme: the same names (`table_column_wise` read as `column_wise`);
- compute kernel <-> placement: `fused` / `dense` (data-parallel) = all rows in HBM, `fused_uvm` =
  rows in host DDR read as UVM, `fused_uvm_caching` = rows in DDR behind an HBM cache (`uvm_cache`),
  `key_value` = rows on SSD (TorchRec's SSD TBE). dcsim's pinned hot rows in HBM over DDR (RecShard's
  split) have no TorchRec equivalent: they are written as `fused_uvm_caching` with the HBM share as
  `cache_load_factor` (TorchRec caches those rows instead of pinning them); rows on SCM or CXL
  have no TorchRec kernel and are refused.
"""

from __future__ import annotations

import json
from typing import Any

SCHEME_OF_SHARDING_TYPE = {
    "table_wise": "table_wise",
    "row_wise": "row_wise",
    "column_wise": "column_wise",
    "table_column_wise": "column_wise",
    "table_row_wise": "table_row_wise",
    "data_parallel": "data_parallel",
}
PLACEMENT_OF_KERNEL = {
    "fused": "hbm",
    "dense": "hbm",
    "quant": "hbm",
    "fused_uvm": "uvm",
    "quant_uvm": "uvm",
    "fused_uvm_caching": "uvm_cache",
    "quant_uvm_caching": "uvm_cache",
    "key_value": "ssd",
}
KERNEL_OF_PLACEMENT = {"hbm": "fused", "uvm": "fused_uvm", "uvm_cache": "fused_uvm_caching", "ssd": "key_value"}
DTYPE_OF_DATA_TYPE = {"FP32": "fp32", "FP16": "fp16", "BF16": "bf16", "FP8": "fp8", "INT8": "int8"}
DATA_TYPE_OF_DTYPE = {v: k for k, v in DTYPE_OF_DATA_TYPE.items()}
MODULE_PATH = "sparse.ebc"  # module path of the written plan (TorchRec's DLRM example model's EBC)


class TorchRecInteropError(ValueError):
    """A plan or table list dcsim cannot read or write in TorchRec's terms (says what is allowed)."""


# ------------------------------------------------------------------------------------------------
# reading


def plan_dict(plan: Any) -> dict[str, dict[str, dict]]:
    """{module path: {table: parameter sharding dict}} of a `ShardingPlan`, its JSON form (dict or
    text) or its printed form."""
    if hasattr(plan, "_serialize"):
        plan = plan._serialize()
    if isinstance(plan, str):
        text = plan.strip()
        plan = json.loads(text) if text.startswith("{") else parse_printed(text)
    if not isinstance(plan, dict):
        raise TorchRecInteropError(f"a sharding plan is a ShardingPlan, a dict or text, not {type(plan).__name__}")
    plan = plan.get("plan", plan)
    if not all(isinstance(m, dict) and all(isinstance(p, dict) for p in m.values()) for m in plan.values()):
        raise TorchRecInteropError("plan: expected {module path: {table: {sharding_type, compute_kernel, ranks}}}")
    return plan


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")]


def parse_printed(text: str) -> dict[str, dict[str, dict]]:
    """The printed form of a `ShardingPlan` (`str(plan)`) as its JSON form."""
    out: dict[str, dict[str, dict]] = {}
    module: dict[str, dict] | None = None
    header: list[str] = []
    for line in text.splitlines():
        if line.startswith("module:"):
            module = out.setdefault(line.split(":", 1)[1].strip(), {})
            header = []
            continue
        if "|" not in line or module is None:
            continue
        cells = _cells(line)
        if cells[0] == "param":
            header = cells
        elif set(line) <= {"-", "|", " "}:
            continue
        elif header[1:] == ["sharding type", "compute kernel", "ranks"]:
            ranks = json.loads(cells[3]) if cells[3] not in ("", "None") else None
            module[cells[0]] = {"sharding_type": cells[1], "compute_kernel": cells[2], "ranks": ranks}
        elif header[1:] == ["shard offsets", "shard sizes", "placement"]:
            shard = {"shard_offsets": json.loads(cells[1]), "shard_sizes": json.loads(cells[2]), "placement": cells[3]}
            module.setdefault(cells[0], {}).setdefault("shards", []).append(shard)
    if not out:
        raise TorchRecInteropError("printed plan: no 'module: ...' line found")
    return out


def _tables_of(plan: Any) -> dict[str, dict]:
    tables: dict[str, dict] = {}
    for module, params in plan_dict(plan).items():
        for name, ps in params.items():
            if name in tables:
                raise TorchRecInteropError(f"plan: table {name!r} is sharded in two modules (second: {module!r})")
            tables[name] = ps
    return tables


def manual_tables(plan: Any, placements: list[str] | None = None) -> dict[str, dict]:
    """dcsim's `sharding.tables` (manual planner) for a TorchRec plan. With `placements` (the
    scenario's), a `uvm_cache` table falls back to `uvm` where only that is allowed."""
    out = {}
    for name, ps in _tables_of(plan).items():
        kind, kernel = ps.get("sharding_type"), ps.get("compute_kernel")
        if kind not in SCHEME_OF_SHARDING_TYPE:
            raise TorchRecInteropError(
                f"plan.{name}.sharding_type: {kind!r} is not supported; allowed: {', '.join(SCHEME_OF_SHARDING_TYPE)}"
            )
        if kernel not in PLACEMENT_OF_KERNEL:
            raise TorchRecInteropError(
                f"plan.{name}.compute_kernel: {kernel!r} is not supported; allowed: {', '.join(PLACEMENT_OF_KERNEL)}"
            )
        placement = PLACEMENT_OF_KERNEL[kernel]
        if (
            placements is not None
            and placement == "uvm_cache"
            and "uvm_cache" not in placements
            and "uvm" in placements
        ):
            placement = "uvm"
        entry: dict[str, Any] = {"scheme": SCHEME_OF_SHARDING_TYPE[kind], "placement": placement}
        if ps.get("ranks"):
            entry["ranks"] = [int(r) for r in ps["ranks"]]
        out[name] = entry
    return out


def column_shard_dim(plan: Any) -> int | None:
    """The column width of the plan's column-wise shards where they all agree (dcsim splits every
    column-wise table by one `sharding.column_shard_dim`); None without column-wise shards."""
    widths = {
        int(s["shard_sizes"][1])
        for ps in _tables_of(plan).values()
        if SCHEME_OF_SHARDING_TYPE.get(ps.get("sharding_type", "")) == "column_wise"
        for s in ps.get("shards") or []
    }
    if len(widths) > 1:
        raise TorchRecInteropError(
            f"plan: column-wise shards of widths {sorted(widths)}; dcsim splits all column-wise tables by one width"
        )
    return widths.pop() if widths else None


def _field(config: Any, name: str, default: Any = None) -> Any:
    return config.get(name, default) if isinstance(config, dict) else getattr(config, name, default)


def tables_from_configs(
    configs: list[Any], pooling: float | dict[str, float] = 1.0, zipf_alpha: float | dict[str, float] = 1.05
) -> list[dict]:
    """dcsim table entries (`workload.tables`) from `EmbeddingBagConfig`s or dicts of their fields;
    `pooling` (lookups per sample) and `zipf_alpha` as one value or per table name."""
    out = []
    for c in configs:
        name = _field(c, "name")
        data_type = _field(c, "data_type", "FP32")
        data_type = getattr(data_type, "value", data_type)
        if str(data_type).upper() not in DTYPE_OF_DATA_TYPE:
            raise TorchRecInteropError(
                f"tables.{name}.data_type: {data_type!r}; allowed: {', '.join(DTYPE_OF_DATA_TYPE)}"
            )
        out.append(
            {
                "name": name,
                "rows": int(_field(c, "num_embeddings")),
                "dim": int(_field(c, "embedding_dim")),
                "pooling": float(pooling[name] if isinstance(pooling, dict) else pooling),
                "zipf_alpha": float(zipf_alpha[name] if isinstance(zipf_alpha, dict) else zipf_alpha),
                "dtype": DTYPE_OF_DATA_TYPE[str(data_type).upper()],
            }
        )
    return out


def workload_from_torchrec(
    configs: list[Any] | None, plan: Any, pooling: float | dict[str, float] = 1.0, **table_fields: Any
) -> dict:
    """A workload fragment {tables, sharding: {planner: manual, tables, [column_shard_dim]},
    placements} for TorchRec tables (or None: keep the scenario's) and plan."""
    manual = manual_tables(plan)
    sharding: dict[str, Any] = {"planner": "manual", "tables": manual}
    width = column_shard_dim(plan)
    if width is not None:
        sharding["column_shard_dim"] = width
    used = sorted({t["placement"] for t in manual.values()} - {"hbm"})
    out: dict[str, Any] = {"sharding": sharding, "placements": ["hbm", *used]}
    if configs is not None:
        out["tables"] = tables_from_configs(configs, pooling, **table_fields)
        missing = sorted({t["name"] for t in out["tables"]} - set(manual))
        if missing:
            raise TorchRecInteropError(f"plan has no entry for tables {', '.join(missing[:5])}")
    return out


# ------------------------------------------------------------------------------------------------
# writing


def _kernel(shards, labels: dict[str, str], name: str) -> tuple[str, float | None]:
    """(compute kernel, cache load factor) of a table's shards."""
    rows = sum(s.rows for s in shards)
    if any(s.cache_rows for s in shards):
        return "fused_uvm_caching", sum(s.cache_rows for s in shards) / rows
    hbm = sum(s.hbm_rows for s in shards)
    if hbm >= rows:
        return ("dense" if shards[0].scheme == "data_parallel" else "fused"), None
    places = {labels.get(t, t) for s in shards for t, n in s.tier_rows.items() if n}
    if len(places) != 1 or next(iter(places)) not in KERNEL_OF_PLACEMENT:
        raise TorchRecInteropError(
            f"table {name}: rows on {'+'.join(sorted(places))} have no TorchRec compute kernel; "
            f"allowed placements: {', '.join(KERNEL_OF_PLACEMENT)}"
        )
    place = next(iter(places))
    if hbm == 0:
        return KERNEL_OF_PLACEMENT[place], None
    if place != "uvm":
        raise TorchRecInteropError(f"table {name}: hot rows in HBM over {place} have no TorchRec compute kernel")
    return "fused_uvm_caching", hbm / rows  # pinned hot rows written as TorchRec's HBM cache of that share


def plan_to_torchrec(plan, model, module_path: str = MODULE_PATH) -> dict:
    """A dcsim `Plan` (sim/workloads/embedding/planner.py) as TorchRec's JSON plan form."""
    w, gpn = model.num_gpus, model.gpus_per_node
    by_table: dict[str, list] = {}
    for s in plan.shards:
        by_table.setdefault(s.table.name, []).append(s)
    params: dict[str, dict] = {}
    for name, shards in by_table.items():
        shards = sorted(shards, key=lambda s: s.index)
        scheme = shards[0].scheme
        kernel, load_factor = _kernel(shards, plan.tier_labels, name)
        entry: dict[str, Any] = {"sharding_type": scheme, "compute_kernel": kernel}
        if scheme == "data_parallel":
            entry["ranks"] = list(range(w))
        else:
            entry["ranks"] = [int(s.rank) for s in shards]
            out, row, col = [], 0, 0
            for s in shards:
                offsets = [row, 0] if scheme in ("row_wise", "table_row_wise") else [0, col]
                out.append(
                    {
                        "shard_offsets": offsets,
                        "shard_sizes": [int(s.rows), int(s.dim)],
                        "placement": f"rank:{s.rank}/cuda:{s.rank % gpn}",
                    }
                )
                row, col = row + int(s.rows), col + int(s.dim)
            entry["shards"] = out
        if load_factor is not None:
            entry["cache_load_factor"] = float(load_factor)
        params[name] = entry
    return {"plan": {module_path: params}}


def sharding_plan(plan: Any):
    """TorchRec's `ShardingPlan` object for a plan in any form read here (needs torchrec)."""
    from torch.distributed._shard.sharding_spec import EnumerableShardingSpec, ShardMetadata
    from torchrec.distributed.types import CacheParams, EmbeddingModuleShardingPlan, ParameterSharding, ShardingPlan

    modules = {}
    for module, params in plan_dict(plan).items():
        out = {}
        for name, ps in params.items():
            spec = None
            if ps.get("shards"):
                spec = EnumerableShardingSpec(
                    [
                        ShardMetadata(
                            shard_offsets=list(s["shard_offsets"]),
                            shard_sizes=list(s["shard_sizes"]),
                            placement=s["placement"],
                        )
                        for s in ps["shards"]
                    ]
                )
            cache = ps.get("cache_load_factor")
            out[name] = ParameterSharding(
                sharding_type=ps["sharding_type"],
                compute_kernel=ps["compute_kernel"],
                ranks=ps.get("ranks"),
                sharding_spec=spec,
                cache_params=CacheParams(load_factor=cache) if cache is not None else None,
            )
        modules[module] = EmbeddingModuleShardingPlan(out)
    return ShardingPlan(modules)


def export(hardware, config, seed: int = 0, module_path: str = MODULE_PATH) -> dict:
    """TorchRec's JSON plan form of the plan dcsim makes for an embedding_training workload `config`
    on `hardware` (a scenario's `hardware` and `workload`; `seed`: the scenario's, for generated tables)."""
    from sim.engine.simulation import Simulation
    from sim.workloads.embedding.workload import prepare

    _, model, plan = prepare(Simulation(seed), hardware, config)
    return plan_to_torchrec(plan, model, module_path)
