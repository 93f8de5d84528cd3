"""Scenario files: the pydantic models of the scenario contract (README.md, "Contracts"), loading, `--set`
overrides, errors.

A scenario is inert, validated data: `Scenario.hardware` (catalog names, paths or inline specs,
resolved into frozen hardware specs at load time) and `Scenario.workload` (a discriminated union
on `kind`; each registered workload kind contributes its `config_class`, see sim/workloads/__init__.py).

`load_scenario(path, overrides)` reads YAML with the safe loader (YAML 1.2 booleans, so `off` stays
a word: sim/scenario/yaml_text.py), applies `key.path=value` overrides (values parsed the same way,
list indices allowed), validates, runs each workload's cross-checks against the hardware, and turns
every failure into a one-line `ScenarioError`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hardware_models import catalog
from hardware_models.gpu import DeviceSpec
from hardware_models.memory import MemoryTierSpec
from hardware_models.nic import LinkSpec
from hardware_models.power import SitePower
from hardware_models.strict import StrictModel
from hardware_models.topology import TopologySpec
from hardware_models.topology_builders import check_shape
from sim.cluster.stragglers import Straggler, check_stragglers
from sim.errors import ScenarioError
from sim.scenario.jobs import JobConfig, check_jobs
from sim.scenario.yaml_text import load_yaml
from sim.workloads import WorkloadConfig


def _resolve_paths(section: str, value: Any, info: ValidationInfo) -> Any:
    """Catalog name / path / inline mapping -> raw spec fields (relative paths: scenario's folder)."""
    if isinstance(value, BaseModel):
        return value
    base_dir = (info.context or {}).get("base_dir")
    if isinstance(value, str) and value.endswith((".yaml", ".yml")) and base_dir and not Path(value).is_file():
        candidate = Path(base_dir) / value
        if candidate.is_file():
            value = str(candidate)
    if isinstance(value, str) and value.endswith((".yaml", ".yml")) and isinstance(info.context, dict):
        info.context.setdefault("spec_files", {})[info.field_name] = str(Path(value).resolve())  # provenance
    return catalog.raw_spec(section, value)


class HardwareConfig(StrictModel):
    gpu: DeviceSpec = Field(default_factory=lambda: catalog.device("h100-sxm"))
    # upper bounds: load-time checks stay cheap; far below them sim/scenario/estimate.py refuses what would not fit
    gpus_per_node: int = Field(8, ge=1, le=4096)
    nodes: int = Field(1, ge=1, le=1_000_000)
    scale_up: LinkSpec = Field(default_factory=lambda: catalog.link("nvlink4"))
    nic: LinkSpec = Field(default_factory=lambda: catalog.link("cx7-400g-rdma"))
    host_link: LinkSpec = Field(
        default_factory=lambda: catalog.link("pcie5-x16"),
        description="link between each device and its host CPU (PCIe)",
    )
    host_cpu: DeviceSpec = Field(
        default_factory=lambda: catalog.device("xeon-8480"),
        description="one host CPU socket (preprocessing on trainers, power)",
    )
    host_cpus: int = Field(2, ge=1, description="CPU sockets per host")
    topology: TopologySpec = TopologySpec()
    memory_tiers: list[MemoryTierSpec] = Field(default_factory=list)
    power: SitePower = Field(default_factory=SitePower, description="site power figures (hardware_models/power.py)")
    stragglers: list[Straggler] = Field(
        default_factory=list, description="slow GPUs or links (sim/cluster/stragglers.py)"
    )

    @field_validator("gpu", "host_cpu", mode="before")
    @classmethod
    def _device(cls, v, info: ValidationInfo):
        return _resolve_paths("device", v, info)

    @field_validator("scale_up", "nic", "host_link", mode="before")
    @classmethod
    def _link(cls, v, info: ValidationInfo):
        return _resolve_paths("link", v, info)

    @field_validator("memory_tiers", mode="before")
    @classmethod
    def _tiers(cls, v, info: ValidationInfo):
        if not isinstance(v, list):
            return v
        return [_resolve_paths("tier", t, info) for t in v]

    @field_validator("topology", mode="before")
    @classmethod
    def _topology_file(cls, v, info: ValidationInfo):
        base_dir = (info.context or {}).get("base_dir")
        if isinstance(v, str):
            v = {"kind": v}
        if isinstance(v, dict) and isinstance(v.get("file"), str) and base_dir and not Path(v["file"]).is_file():
            candidate = Path(base_dir) / v["file"]
            if candidate.is_file():
                v = {**v, "file": str(candidate)}
        return v

    @model_validator(mode="after")
    def _topology_shape(self) -> HardwareConfig:
        try:
            check_shape(self.topology, self.nodes, self.gpus_per_node)
        except ValueError as exc:
            raise ScenarioError(str(exc), path="hardware.topology") from None
        return self

    @model_validator(mode="after")
    def _stragglers_exist(self) -> HardwareConfig:
        check_stragglers(self.stragglers, self.num_gpus)
        return self

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def tier(self, kind_or_name: str) -> MemoryTierSpec | None:
        """The first extra tier whose name or kind matches."""
        for t in self.memory_tiers:
            if kind_or_name in (t.name, t.kind):
                return t
        return None


class Scenario(StrictModel):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = 0
    network_model: Literal["flow", "analytical"] = "flow"
    hardware: HardwareConfig = HardwareConfig()
    workload: WorkloadConfig | None = None
    workloads: list[JobConfig] | None = Field(
        None,
        description="several jobs sharing the cluster, instead of "
        "workload: each a workload with `name` and `hosts` (sim/scenario/jobs.py)",
    )
    trace_limit: int = Field(200_000, ge=0, description="max spans kept for traces and plots")
    _spec_files: dict = PrivateAttr(default_factory=dict)  # provenance: hardware field -> spec file path

    @property
    def spec_files(self) -> dict:
        """Provenance: hardware field -> the spec file it was loaded from (empty for catalog names)."""
        return self._spec_files

    @property
    def kind(self) -> str:
        """The workload's kind, or "multi" for several jobs."""
        return "multi" if self.workload is None else self.workload.kind

    @model_validator(mode="after")
    def _cross_checks(self) -> Scenario:
        if (self.workload is None) == (self.workloads is None):
            raise ScenarioError(
                "give either workload (one job) or workloads (a list of jobs sharing the cluster)",
                path="workload" if self.workload is None else "workloads",
            )
        if self.workloads is not None:
            if not self.workloads:
                raise ScenarioError("needs at least one job", path="workloads", value=[])
            check_jobs(self.workloads, self.hardware)
            return self
        check = getattr(self.workload, "check", None)
        if check is not None:
            check(self.hardware)
        return self


# ---------------------------------------------------------------------------------------------
# --set overrides


def parse_override(text: str) -> tuple[list[str], Any]:
    """'workload.requests.0.prompt_tokens=4096' -> (['workload', 'requests', '0', 'prompt_tokens'], 4096)."""
    if "=" not in text:
        raise ScenarioError("expected key.path=value", path="--set", value=text)
    key, _, raw = text.partition("=")
    parts = key.strip().split(".")
    if not key.strip() or any(not p for p in parts):
        raise ScenarioError("expected key.path=value with a non-empty dotted key", path="--set", value=text)
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_override(data: dict, parts: list[str], value: Any) -> None:
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.lstrip("-").isdigit() or not -len(node) <= int(part) < len(node):
                raise ScenarioError(f"list index out of range (list has {len(node)} items)", path=where, value=part)
            idx = int(part)
            if last:
                node[idx] = value
            else:
                node = node[idx]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if not isinstance(node.get(part), (dict, list)):
                    node[part] = {}
                node = node[part]
        else:
            raise ScenarioError("cannot set a key inside a scalar value", path=where, value=node)


# ---------------------------------------------------------------------------------------------
# loading


def read_yaml(path: str | Path) -> Any:
    p = Path(path)
    if p.is_dir():
        raise ScenarioError("is a directory; give a scenario YAML file in it (e.g. DIR/NAME.yaml)", file=str(path))
    if not p.is_file():
        raise ScenarioError("file not found", file=str(path))
    try:
        with open(p) as f:
            return load_yaml(f)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        raise ScenarioError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=where, file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read: {exc}", file=str(path)) from None


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", value=type(data).__name__, file=str(path))
    try:
        for text in overrides:
            apply_override(data, *parse_override(text))
        return scenario_from_dict(data, base_dir=Path(path).parent)
    except ScenarioError as err:
        raise err.with_file(str(path)) from None


def scenario_from_dict(data: dict, base_dir: str | Path | None = None) -> Scenario:
    context = {"base_dir": str(base_dir or ".")}
    try:
        scenario = Scenario.model_validate(copy.deepcopy(data), context=context)
        scenario._spec_files = context.get("spec_files", {})  # hardware spec field -> file it came from
        return scenario
    except ValidationError as exc:
        raise validation_error(exc, data) from None


def validation_error(exc: ValidationError, data: Any) -> ScenarioError:
    """The first pydantic error as a one-line ScenarioError with a dotted key path. Where the value
    failed every member of a union (`bytes: one size or a list`), the member whose error goes
    deepest into what the user wrote says the most (`workload.bytes.1`, not the scalar member's)."""
    errors = exc.errors(include_url=False)
    first = _user_path(errors[0]["loc"], data)
    same_value = [e for e in errors if _user_path(e["loc"], data)[: len(first)] == first]
    err = max(same_value, key=lambda e: len(_user_path(e["loc"], data)))  # the first of equals
    loc = _user_path(err["loc"], data)
    path = ".".join(loc) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1], data)
        msg = "unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        return ScenarioError(msg, path=path)
    if err["type"] == "missing":
        return ScenarioError("required key is missing", path=path)
    return ScenarioError(msg, path=path, value=err.get("input"))


# how pydantic names a union member or validator step in a location: 'function-before[<lambda>(), float]',
# "literal['all']", 'list[int]', 'int', 'str', 'is-instance[Peak]', 'HostRequest', 'definition-ref'
_LIBRARY_SEGMENT = re.compile(r"^([a-z][a-z-]*\[.*\]|str|int|float|bool|none|definition-ref|[A-Z]\w*)$")


def _user_path(loc: tuple | list, data: Any) -> list[str]:
    """A pydantic location as the keys the user wrote: the discriminator tags (e.g. 'collective')
    and the validation library's names of union members and validators are dropped."""
    out, node = [], data
    for raw in loc:
        part = str(raw)
        written = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node)
        )
        if not written and isinstance(node, dict) and node.get("kind") == part:
            continue  # the discriminator tag of a workload union
        if not written and _LIBRARY_SEGMENT.match(part):
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and written:
            node = node[int(part)]
        else:
            node = None
    return out


def _allowed_keys(loc: list[str], data: Any = None) -> list[str]:
    from sim.workloads import config_class

    items = data.get("workloads") if isinstance(data, dict) else None
    if (
        len(loc) == 2
        and loc[0] == "workloads"
        and isinstance(items, list)
        and loc[1].isdigit()
        and int(loc[1]) < len(items)
        and isinstance(items[int(loc[1])], dict)
    ):  # a job (sim/scenario/jobs.py)
        job = config_class(items[int(loc[1])].get("kind"))
        return sorted([*job.model_fields, "hosts", "name"]) if job else []
    model: Any = Scenario
    node = data
    for part in loc:
        ann = _field_model(model, part)
        node = node.get(part) if isinstance(node, dict) else None
        if ann is None and isinstance(node, dict):
            ann = config_class(node.get("kind"))
        if ann is None:
            return []
        model = ann
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(model.model_fields)
    return []


def _field_model(model: Any, part: str) -> Any:
    if isinstance(model, type) and issubclass(model, BaseModel):
        field = model.model_fields.get(part)
        if field is None:
            return None
        return _unwrap(field.annotation)
    return None


def _unwrap(ann: Any) -> Any:
    import typing

    origin = typing.get_origin(ann)
    if origin in (list, tuple):
        return _unwrap(typing.get_args(ann)[0])
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(ann)[0])
    if origin in (typing.Union, __import__("types").UnionType):
        models = [a for a in typing.get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else None
    return ann
