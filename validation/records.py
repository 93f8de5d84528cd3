"""Measured-run records: what was timed, where, and how long it took.

A `Record` is one measured case: the device it ran on (name, kind, torch version, threads and
processes), the workload (`gemm`, `sdpa`, `copy`, `embedding_bag`, `send_recv`, `all_reduce`,
`all_to_all`, `transformer_prefill`, `ring_attention`, `dataloader`, `embedding_step`, `cp_ttft`)
with its parameters, the number of timed repeats and the median and spread (interquartile range) of
the measured seconds. Its `family` says how the harness uses it:

- `primitive`: a small kernel or message; calibration fits the hardware model to these only;
- `composition`: a composed workload the simulator predicts from the calibrated model (validation);
- `published`: a figure from a paper (shared/REFERENCE.md); `used_for_calibration: true` marks one
  that some model was fitted to, so it is shown but never counted in the error figures.

A `RecordSet` (meta + records) is stored as JSON or YAML, so runs made on another machine (a GPU
host) can be loaded later with `load_records(path)` - a file or a folder of files. Every problem in
such a file becomes a one-line `ScenarioError` naming the file, the key path and the bad value.
"""
from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.errors import ScenarioError

Family = Literal["primitive", "composition", "published"]
WORKLOADS = ("gemm", "sdpa", "copy", "embedding_bag", "send_recv", "all_reduce", "all_to_all",
             "transformer_prefill", "ring_attention", "dataloader", "embedding_step", "cp_ttft")
Workload = Literal["gemm", "sdpa", "copy", "embedding_bag", "send_recv", "all_reduce", "all_to_all",
                   "transformer_prefill", "ring_attention", "dataloader", "embedding_step", "cp_ttft"]


class Record(BaseModel):
    """One measured case (see module docstring)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

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


class RecordSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    meta: dict[str, Any] = Field(default_factory=dict)
    records: list[Record]


def machine_meta(mode: str, torch_version: str | None) -> dict[str, Any]:
    return {"host": platform.node(), "machine": platform.machine(), "python": platform.python_version(),
            "torch": torch_version, "mode": mode, "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def save_records(records: list[Record], path: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write a RecordSet as JSON (.json) or YAML (.yaml/.yml)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = RecordSet(meta=meta or {}, records=records).model_dump(mode="json")
    if p.suffix in (".yaml", ".yml"):
        p.write_text(yaml.safe_dump(data, sort_keys=False))
    else:
        p.write_text(json.dumps(data, indent=1))
    return p


def _read(p: Path) -> Any:
    try:
        text = p.read_text()
        return json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read: {exc}", file=str(p)) from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ScenarioError(f"invalid {p.suffix.lstrip('.').upper()}: {str(exc).splitlines()[0]}", file=str(p)) from None


def parse_records(data: Any, file: str = "<records>") -> list[Record]:
    """Validate raw data (a RecordSet mapping or a bare list of records) into Records."""
    if isinstance(data, list):
        data = {"records": data}
    if not isinstance(data, dict):
        raise ScenarioError("a record file holds a mapping {meta, records} or a list of records",
                            value=type(data).__name__, file=file)
    try:
        records = RecordSet.model_validate(data).records
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        path = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ScenarioError(f"unknown key; allowed: {', '.join(sorted(Record.model_fields))}",
                                path=path, file=file) from None
        if err["type"] == "missing":
            raise ScenarioError("required key is missing", path=path, file=file) from None
        raise ScenarioError(err["msg"], path=path, value=err.get("input"), file=file) from None
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
