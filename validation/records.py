"""Measured-run records: what was timed, where, and how long it took.

A `Record` is one measured case: the device it ran on (name, kind, torch version, threads and
processes), the workload (`gemm`, `sdpa`, `copy`, `embedding_bag`, `send_recv`, `all_reduce`,
`all_to_all`, `transformer_prefill`, `ring_attention`, `dataloader`, `embedding_step`, `cp_ttft`)
with its parameters, the number of timed repeats and the median and spread (interquartile range) of
the measured seconds. Its `family` says how the harness uses it:

- `primitive`: a small kernel or message; calibration fits the hardware model to these only;
- `composition`: a composed workload the simulator predicts from the calibrated model (validation);
- `published`: a figure from a paper (docs/references.md#validation-references); `used_for_calibration: true` marks one
  that some model was fitted to, so it is shown but never counted in the error figures.

A `RecordSet` (meta + records) is stored as JSON or YAML, so runs made on another machine (a GPU
host) can be loaded later with `load_records(path)` - a file or a folder of files. Every problem in
such a file becomes a one-line `ScenarioError` naming the file, the key path and the bad value.
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, create_model

from hardware_models.gpu import Dtype
from hardware_models.strict import StrictModel
from sim.errors import ScenarioError

Family = Literal["primitive", "composition", "published"]
Workload = Literal[
    "gemm",
    "sdpa",
    "copy",
    "embedding_bag",
    "send_recv",
    "all_reduce",
    "all_to_all",
    "transformer_prefill",
    "ring_attention",
    "dataloader",
    "embedding_step",
    "cp_ttft",
]


class Record(StrictModel):
    """One measured case (see module docstring)."""

    name: str = Field(min_length=1, description="unique case id, e.g. gemm/fp32/512x512x512")
    family: Family
    workload: Workload
    params: dict[str, Any] = Field(default_factory=dict)
    device: str = Field(min_length=1, description="device name, e.g. the CPU model or GPU name")
    device_kind: Literal["cpu", "cuda", "published"] = "cpu"
    torch_version: str | None = None
    threads: int = Field(1, ge=1, description="torch threads per process")
    processes: int = Field(1, ge=1)
    repeats: int = Field(1, ge=1)
    median_s: float = Field(gt=0, description="median measured seconds")
    spread_s: float = Field(0.0, ge=0, description="interquartile range of the measured seconds")
    min_s: float | None = Field(None, gt=0, description="fastest repeat (least disturbed by other load)")
    used_for_calibration: bool = False
    checks: dict[str, Any] = Field(default_factory=dict, description="e.g. exactness of ring attention")
    source: str = ""


PosInt = Annotated[int, Field(gt=0)]
Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
_PROCESSES = {"bytes": (Pos, ...), "ranks": (PosInt, ...)}
_TRANSFORMER = {k: (PosInt, ...) for k in ("layers", "hidden", "ffn", "heads", "seq")}
_PARAM_FIELDS: dict[str, dict] = {  # what the calibration and the predictors read, per workload
    "gemm": {"m": (PosInt, ...), "n": (PosInt, ...), "k": (PosInt, ...), "dtype": (Dtype, ...)},
    "sdpa": {
        "seq": (PosInt, ...),
        "heads": (PosInt, ...),
        "head_dim": (PosInt, ...),
        "dtype": (Dtype, ...),
        "causal": (bool, True),
    },
    "copy": {"bytes": (Pos, ...)},
    "embedding_bag": {
        "rows": (PosInt, ...),
        "dim": (PosInt, ...),
        "pooling": (PosInt, ...),
        "batch": (PosInt, ...),
        "zipf_alpha": (NonNeg, ...),
        "dtype": (Dtype, "fp32"),
    },
    "send_recv": _PROCESSES,
    "all_reduce": _PROCESSES,
    "all_to_all": _PROCESSES,
    "transformer_prefill": {**_TRANSFORMER, "dtype": (Dtype, "fp32")},
    "ring_attention": {
        **_TRANSFORMER,
        "cp": (PosInt, 1),
        "ring": (Literal["pass-kv", "pass-q"], "pass-kv"),
        "dtype": (Dtype, "fp32"),
    },
    "dataloader": {
        "workers": (PosInt, ...),
        "batch": (PosInt, ...),
        "batches": (PosInt, ...),
        "step_s": (Pos, ...),
        "cpu_s_per_sample": (Pos, ...),
        "cpu_s_per_sample_spread": (NonNeg, 0.0),
        "cpu_s_per_sample_alone": (Pos | None, None),
        "sample_bytes": (Pos, ...),
    },
    "embedding_step": {
        "tables": (PosInt, ...),
        "rows": (PosInt, ...),
        "dim": (PosInt, ...),
        "pooling": (PosInt, ...),
        "zipf_alpha": (NonNeg, ...),
        "batch": (PosInt, ...),
        "dense_features": (PosInt, ...),
        "bottom_mlp": (list[PosInt], ...),
        "top_mlp": (list[PosInt], ...),
        "dtype": (Dtype, "fp32"),
        "optimizer": (str, "sgd"),
    },
    "cp_ttft": {
        "model": (str, ...),
        "prompt_tokens": (PosInt, ...),
        "tp": (PosInt, ...),
        "hosts": (PosInt, ...),
        "gpus_per_node": (PosInt, ...),
        "gpu": (str, ...),
        "gpu_calibrated": (str | None, None),
        "scale_up": (str, ...),
        "nic": (str, ...),
        "dtype": (Dtype, ...),
        "ffn_dtype": (Dtype, ...),
    },
}
# free-form parameters: a record may carry keys the predictors do not read, so extra="allow" (not StrictModel)
PARAMS = {w: create_model(f"{w}_params", __config__=ConfigDict(extra="allow"), **f) for w, f in _PARAM_FIELDS.items()}


class RecordSet(StrictModel):
    meta: dict[str, Any] = Field(default_factory=dict)
    records: list[Record]


def machine_meta(mode: str, torch_version: str | None) -> dict[str, Any]:
    return {
        "host": platform.node(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch_version,
        "mode": mode,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def save_records(records: list[Record], path: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write a RecordSet as JSON (.json) or YAML (.yaml/.yml)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = RecordSet(meta=meta or {}, records=records).model_dump(mode="json")
    from sim.report.output import write_text  # atomic: temp file + rename (lazy: sim.report.output draws plots)

    write_text(
        p, yaml.safe_dump(data, sort_keys=False) if p.suffix in (".yaml", ".yml") else json.dumps(data, indent=1)
    )
    return p


def _read(p: Path) -> Any:
    try:
        text = p.read_text()
        return json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read: {exc}", file=str(p)) from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ScenarioError(
            f"invalid {p.suffix.lstrip('.').upper()}: {str(exc).splitlines()[0]}", file=str(p)
        ) from None


def parse_records(data: Any, file: str = "<records>") -> list[Record]:
    """Validate raw data (a RecordSet mapping or a bare list of records) into Records."""
    if isinstance(data, list):
        data = {"records": data}
    if not isinstance(data, dict):
        raise ScenarioError(
            "a record file holds a mapping {meta, records} or a list of records", value=type(data).__name__, file=file
        )
    try:
        records = RecordSet.model_validate(data).records
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        path = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ScenarioError(
                f"unknown key; allowed: {', '.join(sorted(Record.model_fields))}", path=path, file=file
            ) from None
        if err["type"] == "missing":
            raise ScenarioError("required key is missing", path=path, file=file) from None
        raise ScenarioError(err["msg"], path=path, value=err.get("input"), file=file) from None
    for i, r in enumerate(records):  # params: what the predictors read, with types and ranges
        try:
            PARAMS[r.workload].model_validate(r.params)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            path = ".".join(["records", str(i), "params", *(str(p) for p in err["loc"])])
            msg = "required key is missing" if err["type"] == "missing" else err["msg"]
            raise ScenarioError(
                msg, path=path, value=err.get("input") if err["type"] != "missing" else r.name, file=file
            ) from None
    seen: set[str] = set()
    for i, r in enumerate(records):
        if r.name in seen:
            raise ScenarioError("duplicate record name", path=f"records.{i}.name", value=r.name, file=file)
        seen.add(r.name)
    return records


def load_records(path: str | Path) -> list[Record]:
    """Records from a .json/.yaml file or from every such file in a folder (sorted by name)."""
    return load_record_sets(path)[0]


def load_record_sets(path: str | Path) -> tuple[list[Record], dict[str, Any]]:
    """(records, merged meta) from a file or folder; `meta["nominal"]` maps device name -> the
    nominal hardware figures calibration starts from (see calibrate.py)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in (".json", ".yaml", ".yml"))
        if not files:
            raise ScenarioError("folder holds no .json or .yaml record files", file=str(p))
    elif p.is_file():
        files = [p]
    else:
        raise ScenarioError("records file or folder not found", file=str(p))
    records: list[Record] = []
    names: set[str] = set()
    meta: dict[str, Any] = {"nominal": {}}
    for f in files:
        data = _read(f)
        file_meta = data.get("meta") if isinstance(data, dict) else None
        if isinstance(file_meta, dict):
            meta.update({k: v for k, v in file_meta.items() if k != "nominal" and k not in meta})
            if isinstance(file_meta.get("nominal"), dict):
                meta["nominal"].update(file_meta["nominal"])
        for r in parse_records(data, str(f)):
            if r.name in names:
                raise ScenarioError("record name appears in two files", value=r.name, file=str(f))
            names.add(r.name)
            records.append(r)
    return records, meta
