"""The hardware catalog: named specs in YAML files under hardware_models/catalog/.

A scenario refers to hardware in one of three ways, resolved here in one place:
- a catalog name: `gpu: h100-sxm`;
- a path to a YAML file holding one spec (e.g. a calibrated profile): `gpu: profiles/my-cpu.yaml`;
- an inline mapping, optionally on top of a base entry: `gpu: {base: h100-sxm, memory: "96 GiB"}`.
Nested mappings (`peak`, `efficiency`, `power`) merge key by key with the base.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, overload

import yaml

from hardware_models.gpu import DeviceSpec
from hardware_models.memory import MemoryTierSpec
from hardware_models.nic import LinkSpec
from hardware_models.spec import Spec
from hardware_models.yaml_files import load_yaml_file

CATALOG_DIR = Path(__file__).parent / "catalog"
SECTIONS: dict[str, tuple[str, type[Spec]]] = {
    "device": ("devices.yaml", DeviceSpec),
    "link": ("links.yaml", LinkSpec),
    "tier": ("memory_tiers.yaml", MemoryTierSpec),
}
S = TypeVar("S", bound=Spec)


@cache
def _raw_section(section: str) -> dict[str, dict[str, Any]]:
    filename, _ = SECTIONS[section]
    with open(CATALOG_DIR / filename) as f:
        data = load_yaml_file(f) or {}
    return {name: {"name": name, **fields} for name, fields in data.items()}


def names(section: str) -> list[str]:
    """Catalog entry names of a section ('device', 'link', 'tier')."""
    return sorted(_raw_section(section))


def raw_entry(section: str, name: str) -> dict[str, Any]:
    entries = _raw_section(section)
    if name not in entries:
        raise ValueError(f"unknown {section} {name!r}; catalog has: {', '.join(sorted(entries))}")
    return copy.deepcopy(entries[name])  # the section is cached: a caller must not change it


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _load_file(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"file {path!r} not found")
    try:
        with open(p) as f:
            data = load_yaml_file(f)
    except yaml.YAMLError as exc:  # pydantic turns ValueErrors (only) into one-line errors
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValueError(f"file {path!r} is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except OSError as exc:
        raise ValueError(f"cannot read file {path!r}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"file {path!r} does not hold a spec mapping")
    data.setdefault("name", p.stem)
    return data


def raw_spec(section: str, value: Any) -> dict[str, Any]:
    """The raw field mapping for a name, a file path or an inline mapping (with optional `base`)."""
    if isinstance(value, str):
        if value.endswith((".yaml", ".yml")):
            return _load_file(value)
        return raw_entry(section, value)
    if isinstance(value, dict):
        override = dict(value)
        base = override.pop("base", None)
        if base is None:
            override.setdefault("name", f"inline-{section}")
            return override
        base_fields = raw_spec(section, base)
        merged = _deep_merge(base_fields, override)
        merged["name"] = override.get("name", f"{base_fields['name']}*")
        return merged
    raise ValueError(f"expected a catalog name, a .yaml path or a mapping, got {value!r}")


@overload
def resolve(section: str, value: Any, model: type[S]) -> S: ...
@overload
def resolve(section: str, value: Any, model: None = None) -> Spec: ...
def resolve(section: str, value: Any, model: type[Spec] | None = None) -> Spec:
    """A validated spec from a name, a path or an inline mapping (of `model`, default: the section's)."""
    spec_model = model or SECTIONS[section][1]
    if isinstance(value, spec_model):
        return value
    return spec_model.model_validate(raw_spec(section, value))


def device(value: Any) -> DeviceSpec:
    return resolve("device", value, DeviceSpec)


def link(value: Any) -> LinkSpec:
    return resolve("link", value, LinkSpec)


def tier(value: Any) -> MemoryTierSpec:
    return resolve("tier", value, MemoryTierSpec)
