"""Provenance of a run: which hardware profile it used and whether that profile is calibrated.

`profile(scenario)` is the `profile` field of summary.json. For the GPU and the NIC it names the
spec (`name`), where it came from (`origin`: `catalog` - an unchanged catalog entry; `catalog+inline`
- a catalog entry with inline overrides (`base:`); `file` - a spec file such as a profile written by
`dcsim validate`, with its absolute `file` path; `inline` - a mapping in the scenario), and
`calibrated`: whether its efficiencies (device) or figures (link) were fitted to measurements - a
`source` that starts with "calibrated", as `dcsim validate` writes them and as calibrated catalog
entries say - with that source text in `calibration`.
"""

from __future__ import annotations

import re

from hardware_models import catalog

_CALIBRATED = re.compile(r"\s*calibrated\b", re.IGNORECASE)


def _origin(section: str, spec, file: str | None) -> str:
    if file is not None:
        return "file"
    if spec.name in catalog.names(section):
        return "catalog" if catalog.resolve(section, spec.name) == spec else "catalog+inline"
    return "catalog+inline" if spec.name.endswith("*") else "inline"


def spec_profile(section: str, spec, file: str | None, source: str) -> dict:
    calibrated = bool(_CALIBRATED.match(source or ""))
    return {
        "name": spec.name,
        "origin": _origin(section, spec, file),
        "file": file,
        "calibrated": calibrated,
        "calibration": source if calibrated else None,
    }


def profile(scenario) -> dict:
    """The `profile` field of summary.json (see module docstring)."""
    hw, files = scenario.hardware, scenario.spec_files
    out = spec_profile("device", hw.gpu, files.get("gpu"), hw.gpu.efficiency.source)
    out["nic"] = spec_profile("link", hw.nic, files.get("nic"), hw.nic.source)
    return out
