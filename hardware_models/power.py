"""Power models of hardware: the GPU power-cap model and the site power figures of a scenario.

Power cap (DVFS). A GPU's board power at full load splits into a static part (leakage, HBM,
uncore: taken as the catalog idle power, not fitted) and a dynamic part of the SM clock f:

    P(f) = P_static + P_dyn(f),   P_dyn = C * f * V(f)^2

In the DVFS range the voltage scales with the clock (V ~ f), so P_dyn ~ f^3; below the clock at
which the voltage reaches its floor (`voltage_floor_clock`, a fraction of the nominal clock) V stays
constant and P_dyn ~ f. A cap below the nominal maximum (TDP) therefore lowers the clock to

    f / f0 = ((cap - P_static) / (TDP - P_static)) ** (1 / exponent)      (exponent 3, above the floor)

and the compute peaks scale with f (same SMs, fewer cycles); memory bandwidth does not change
(HBM keeps its own clock). `capped_clock_fraction` implements this; `DeviceSpec.power_cap` applies it.

Check, not a fit (docs/references.md#power-and-price): the H100 at 700 W does 989 TFLOP/s BF16 and the 500 W H100 of
arXiv 2411.01783 is quoted at 800 TFLOP/s. With the catalog idle power (88 W = 12.5% of TDP) as
P_static and exponent 3 the model predicts 989 * ((500-88)/(700-88))^(1/3) = 867 TFLOP/s: +8.4%.
(The 500 W part is also a different SKU - HBM2e, 96 GB - so the pair is only indicative. Matching it
exactly would need exponent ~1.87, i.e. voltage scaling weaker than V ~ f; we do not fit it.)

Site power (`SitePower`, scenario `hardware.power`): figures that belong to no single device - the
GPU server's chassis (fans, PSU loss, NVSwitch baseboard), pool hosts (board, DRAM, fans) and their
cores, host DRAM when no DDR tier is listed, the scale-out switch box and its radix, the share of
a GPU's dynamic power drawn while it only communicates, pool-host CPU price and the PUE. Defaults
with sources are in catalog/power.yaml; a scenario's mapping merges key by key over them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from hardware_models.nic import LinkSpec
from hardware_models.spec import PowerSpec, Spec
from hardware_models.yaml_files import load_yaml_file

POWER_CATALOG = Path(__file__).parent / "catalog" / "power.yaml"
DVFS_EXPONENT = 3.0  # P_dyn ~ f V^2 with V ~ f
VOLTAGE_FLOOR_CLOCK = 0.5  # assumption: voltage stops scaling below ~half the nominal clock


def capped_clock_fraction(
    cap_w: float,
    max_w: float,
    static_w: float,
    exponent: float = DVFS_EXPONENT,
    voltage_floor_clock: float = VOLTAGE_FLOOR_CLOCK,
) -> float:
    """Clock (and compute-peak) fraction a GPU reaches under a board power cap `cap_w`.

    `max_w` is the power at the nominal clock (TDP), `static_w` the clock-independent part. Caps at
    or above `max_w` leave the clock at 1. Above the voltage floor P_dyn ~ f^exponent; below it
    P_dyn ~ f (continuous at the floor).
    """
    if cap_w >= max_w:
        return 1.0
    if not static_w < cap_w:
        raise ValueError(f"power cap {cap_w:g} W must exceed the static power {static_w:g} W")
    share = (cap_w - static_w) / (max_w - static_w)  # of the dynamic power at f0
    floor_share = voltage_floor_clock**exponent
    if share >= floor_share:
        return share ** (1.0 / exponent)
    return share / voltage_floor_clock ** (exponent - 1.0)  # V at its floor: P_dyn ~ f


def capped_power_w(
    clock_fraction: float,
    max_w: float,
    static_w: float,
    exponent: float = DVFS_EXPONENT,
    voltage_floor_clock: float = VOLTAGE_FLOOR_CLOCK,
) -> float:
    """Inverse of `capped_clock_fraction`: board power at a clock fraction (for tests and plots)."""
    f = min(max(clock_fraction, 0.0), 1.0)
    dyn = f**exponent if f >= voltage_floor_clock else f * voltage_floor_clock ** (exponent - 1.0)
    return static_w + (max_w - static_w) * dyn


@lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    with open(POWER_CATALOG) as f:
        return load_yaml_file(f)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


class SitePower(Spec):
    """The scenario's `hardware.power` block: site power figures (defaults: catalog/power.yaml)."""

    gpu_host: PowerSpec = Field(description="per GPU server: chassis, fans, PSU loss, NVSwitch baseboard")
    cpu_host: PowerSpec = Field(description="per active pool host without its cores: board, DRAM, fans, PSU loss")
    host_dram: PowerSpec = Field(description="per GPU host DRAM, used when no `ddr` memory tier is listed")
    switch: LinkSpec = Field(description="one scale-out switch box (catalog link name or inline)")
    switch_radix: int = Field(ge=1, description="ports per switch box")
    gpu_comm_activity: float = Field(
        ge=0, le=1, description="share of the GPU's idle-to-max range drawn while it only communicates"
    )
    pool_host_cores: int = Field(ge=1, description="cores per pool host (storage, preprocessing)")
    pool_cores: dict[str, int] = Field(default_factory=dict, description="cores per host of a named pool")
    price_per_core_hour: float = Field(ge=0, description="USD per core-hour of a pool host (whole server)")
    pue: float = Field(ge=1, description="facility power / IT power")

    @model_validator(mode="before")
    @classmethod
    def _with_defaults(cls, data: Any) -> Any:
        if isinstance(data, SitePower):
            return data
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError("expected a mapping of site power figures, e.g. {pue: 1.2}")
        return _merge(_defaults(), data)

    @field_validator("switch", mode="before")
    @classmethod
    def _switch(cls, v: Any) -> Any:
        from hardware_models import catalog  # lazy: catalog imports gpu.py, which imports this module

        return v if isinstance(v, LinkSpec) else catalog.raw_spec("link", v)

    @field_validator("pool_cores")
    @classmethod
    def _cores_positive(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {k: c for k, c in v.items() if c < 1}
        if bad:
            raise ValueError(f"cores must be >= 1, got {bad}")
        return v

    def cores_of_pool(self, pool: str) -> int:
        return self.pool_cores.get(pool, self.pool_host_cores)

    @property
    def switch_capacity_bytes_per_s(self) -> float:
        """One box's switching capacity per direction (radix x port line rate)."""
        return self.switch_radix * self.switch.bandwidth
