"""Reading the YAML a user writes (scenario files, `--set` values, `--grid` values) with the safe
loader, but with YAML 1.2's booleans: only `true` / `false` (any case form YAML allows) are booleans.

YAML 1.1, which PyYAML implements, also reads `on`, `off`, `yes`, `no`, `y` and `n` as booleans, so
`replay: off` would arrive as `False` and be refused by a field whose values are 'on' | 'off' | 'auto'.
Here those words stay strings: a field that takes words gets the word, and a boolean field still
accepts them (pydantic reads the strings 'on', 'off', 'yes' and 'no' as booleans). This is the one
place where user YAML is parsed; every reader of scenario text goes through `load_yaml`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from hardware_models.yaml_files import SAFE_LOADER, load_yaml_file

_BOOL_TAG = "tag:yaml.org,2002:bool"


class UserYamlLoader(SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader (on libyaml's C parser where PyYAML has it: hardware_models/yaml_files.py)
    whose implicit booleans are YAML 1.2's (`true`, `false`)."""


UserYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
UserYamlLoader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml(stream: Any) -> Any:
    """Parse YAML text or an open file (safe loader, YAML 1.2 booleans)."""
    return load_yaml_file(stream, UserYamlLoader)
