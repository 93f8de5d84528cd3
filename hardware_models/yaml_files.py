"""Reading the hardware catalog's YAML files: PyYAML's safe loader on libyaml's C parser where PyYAML
was built with it (`yaml.CSafeLoader`: the same resolvers and constructors, so the same data, about
ten times faster: every `dcsim` run reads the catalog at start-up), else the pure-Python one."""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_file(stream: Any, loader_class: Any = SAFE_LOADER) -> Any:
    """`yaml.safe_load` of an open file or a text, with `loader_class` (what safe_load does, with it;
    a safe loader's subclass, e.g. the scenario files' sim/scenario/yaml_text.py)."""
    loader = loader_class(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
