"""Compute devices (GPUs and CPUs) and their kernel cost functions.

A `DeviceSpec` is one model for both: per-dtype peak FLOP/s, memory capacity and bandwidth, kernel
launch overhead, and an `Efficiency` model. A CPU is a device with `kind: cpu` and `cores`, so a
calibrated CPU profile is just another catalog entry.

Kernel time is a roofline with shape-dependent efficiency:

    time = max(flop / (peak[dtype] * eff_compute(shape)), bytes / (bandwidth * eff_memory)) + launch

- GEMM (m x k) @ (k x n): eff = gemm * s(m) * s(n) * s(k), s(x) = x / (x + gemm_half_dim), so small
  or skinny GEMMs reach a lower fraction of peak while large ones approach `gemm`.
- Attention (FlashAttention-style, one fused kernel): eff = attention * q / (q + attention_half_seq)
  * row_fill * sm_fill, short queries are less efficient; K/V are read once per query block, at the
  bandwidth the kernel's blocks can draw. `attention_kernel` (tiles, SM count) sets how many thread blocks the
  kernel makes and how many SMs work, with split-KV over the KV length (hardware_models/attention.py);
  a split kernel adds its combine kernel (fp32 partial outputs written and read back).
- Memory-bound kernels stream bytes at `memory` x bandwidth; random row gathers and scatters
  (embedding lookups and their updates) move their rows at `gather` x bandwidth (unset: `memory`).

The efficiency parameters are what calibration (validation/) replaces.

A `power_cap` (W) lowers the clock by the DVFS model of hardware_models/power.py; every compute
peak (`peak_flop_per_s`) scales with it, memory bandwidth does not.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hardware_models.attention import AttentionCost, AttentionKernel, occupancy
from hardware_models.power import capped_clock_fraction
from hardware_models.spec import PowerSpec, Spec
from hardware_models.units import Bytes, BytesPerS, FlopPerS, Seconds, Watts

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "mxfp8": 1.03125,
    "mxfp6": 0.78125,
    "mxfp4": 0.53125,  # MX: element bits + one 8-bit scale per 32
}
Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "mxfp8", "mxfp6", "mxfp4"]


class Peak(Spec):
    """Dense peak throughput per dtype, FLOP/s (or OP/s for int8). Unset dtypes are unsupported."""

    fp32: FlopPerS | None = None
    tf32: FlopPerS | None = None
    bf16: FlopPerS | None = None
    fp16: FlopPerS | None = None
    fp8: FlopPerS | None = None
    int8: FlopPerS | None = None
    mxfp8: FlopPerS | None = None
    mxfp6: FlopPerS | None = None
    mxfp4: FlopPerS | None = None


class Efficiency(Spec):
    """Fractions of peak that kernels reach, as a function of their shape (see module docstring)."""

    gemm: float = Field(0.75, gt=0, le=1, description="large-GEMM fraction of dense peak")
    gemm_half_dim: float = Field(64.0, ge=0, description="GEMM dimension at which efficiency halves along it")
    attention: float = Field(0.60, gt=0, le=1, description="long-sequence attention fraction of peak")
    attention_half_seq: float = Field(512.0, ge=0, description="query length at which attention efficiency halves")
    memory: float = Field(0.85, gt=0, le=1, description="fraction of memory bandwidth streaming kernels reach")
    gather: float | None = Field(
        None,
        gt=0,
        le=1,
        description="fraction of memory bandwidth random row gathers/"
        "scatters (embedding lookups) reach; unset: as `memory`",
    )
    source: str = "assumption: typical cuBLAS/FlashAttention fractions of dense peak; replace by calibration"


class DeviceSpec(Spec):
    """A GPU or CPU: what one device can compute and stream."""

    name: str
    kind: Literal["gpu", "cpu"] = "gpu"
    cores: int = Field(1, ge=1, description="CPU cores (1 for a GPU)")
    memory: Bytes = Field(gt=0, description="device memory (HBM; DRAM for a CPU), bytes")
    memory_bandwidth: BytesPerS = Field(gt=0, description="bytes/s")
    peak: Peak
    launch_overhead: Seconds = Field(4e-6, ge=0, description="per-kernel launch/dispatch overhead, s")
    efficiency: Efficiency = Efficiency()
    attention_kernel: AttentionKernel = AttentionKernel()
    power: PowerSpec = PowerSpec()
    power_cap: Watts | None = Field(
        None,
        gt=0,
        description="board power limit, W: lowers the clock and the compute peaks (hardware_models/power.py)",
    )
    source: str = ""

    @model_validator(mode="after")
    def _check_power_cap(self) -> DeviceSpec:
        if self.power_cap is not None:
            if self.power.max <= 0:
                raise ValueError("power_cap needs the device's power.max (its TDP)")
            if self.power_cap <= self.power.idle:
                raise ValueError(f"power_cap {self.power_cap:g} W must exceed power.idle {self.power.idle:g} W")
        return self

    @property
    def clock_fraction(self) -> float:
        """Fraction of the nominal clock under `power_cap` (1 without a cap)."""
        if self.power_cap is None:
            return 1.0
        return capped_clock_fraction(self.power_cap, self.power.max, self.power.idle)

    @property
    def max_power_w(self) -> float:
        """Board power at full load: the TDP, or the cap if lower."""
        return self.power.max if self.power_cap is None else min(self.power.max, self.power_cap)

    # ---- cost functions -------------------------------------------------------------------
    def peak_flop_per_s(self, dtype: str) -> float:
        value = getattr(self.peak, dtype, None)
        if value is None:
            supported = [d for d in DTYPE_BYTES if getattr(self.peak, d, None) is not None]
            raise ValueError(f"device {self.name!r} has no peak for dtype {dtype!r} (has: {', '.join(supported)})")
        return value if self.power_cap is None else value * self.clock_fraction

    def gemm_efficiency(self, m: float, n: float, k: float) -> float:
        h = self.efficiency.gemm_half_dim
        s = 1.0
        for x in (m, n, k):
            s *= x / (x + h)
        return self.efficiency.gemm * s

    def gemm_time_s(
        self, m: float, n: float, k: float, dtype: str = "bf16", batch: float = 1, out_dtype: str | None = None
    ) -> float:
        """Time of a batched GEMM (batch x [m,k] @ [k,n])."""
        if min(m, n, k, batch) <= 0:
            return 0.0
        e_in = DTYPE_BYTES[dtype]
        e_out = DTYPE_BYTES[out_dtype or ("bf16" if dtype in ("fp8", "int8") else dtype)]
        flop = 2.0 * m * n * k * batch
        nbytes = batch * ((m * k + k * n) * e_in + m * n * e_out)
        compute = flop / (self.peak_flop_per_s(dtype) * self.gemm_efficiency(m, n, k))
        return max(compute, self._stream_s(nbytes)) + self.launch_overhead

    def attention_flop(
        self, q_len: float, kv_len: float, heads: float, head_dim: float, causal: bool = True, batch: float = 1
    ) -> float:
        """FLOPs of softmax(Q K^T) V for `q_len` new queries attending to `kv_len` keys.

        With causal masking the new queries are the last `q_len` positions of `kv_len`: query i
        (0-based among the new ones) sees kv_len - q_len + i + 1 keys.
        """
        if causal:
            cached = max(kv_len - q_len, 0)
            keys_seen = q_len * cached + q_len * (q_len + 1) / 2
        else:
            keys_seen = q_len * kv_len
        return 4.0 * batch * heads * head_dim * keys_seen

    def attention_time_s(
        self,
        q_len: float,
        kv_len: float,
        heads: float,
        head_dim: float,
        kv_heads: float | None = None,
        dtype: str = "bf16",
        causal: bool = True,
        batch: float = 1,
        flop: float | None = None,
    ) -> float:
        """Fused attention kernel time. `flop` overrides the count (e.g. a causal chunk pair)."""
        return self.attention_cost(q_len, kv_len, heads, head_dim, kv_heads, dtype, causal, batch, flop).time_s

    def attention_cost(
        self,
        q_len: float,
        kv_len: float,
        heads: float,
        head_dim: float,
        kv_heads: float | None = None,
        dtype: str = "bf16",
        causal: bool = True,
        batch: float = 1,
        flop: float | None = None,
    ) -> AttentionCost:
        """The fused attention kernel's roofline terms and occupancy (see `attention_time_s`)."""
        if min(q_len, kv_len, heads) <= 0:
            return AttentionCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, occupancy(self.attention_kernel, 0, 0, 0, 0, 0, 0, 1))
        kv_heads = heads if kv_heads is None else kv_heads
        e = DTYPE_BYTES[dtype]
        if flop is None:
            flop = self.attention_flop(q_len, kv_len, heads, head_dim, causal, batch)
        nbytes = batch * head_dim * e * (2 * q_len * heads + 2 * kv_len * kv_heads)
        occ = occupancy(self.attention_kernel, q_len, kv_len, heads, batch, head_dim, e, self.memory_bandwidth)
        eff = (
            self.efficiency.attention
            * q_len
            / (q_len + self.efficiency.attention_half_seq)
            * occ.row_fill
            * occ.sm_fill
        )
        combine_s = 0.0
        if occ.splits > 1:  # fp32 partial outputs + LSE per split, written and read back; the output
            rows = batch * heads * q_len
            combine_s = self.memory_time_s(2 * occ.splits * rows * (head_dim + 1) * 4 + rows * head_dim * e)
        return AttentionCost(
            flop=flop,
            nbytes=nbytes,
            compute_s=flop / (self.peak_flop_per_s(dtype) * eff),
            memory_s=self._stream_s(nbytes) / occ.bandwidth_fill,
            launch_s=self.launch_overhead,
            combine_s=combine_s,
            occupancy=occ,
        )

    def memory_time_s(self, nbytes: float, gather_bytes: float = 0.0) -> float:
        """A memory-bound kernel streaming `nbytes` (read + write) through device memory, plus
        `gather_bytes` moved by random row accesses (at the `gather` efficiency)."""
        if nbytes <= 0 and gather_bytes <= 0:
            return 0.0
        return self._stream_s(nbytes) + self._gather_s(gather_bytes) + self.launch_overhead

    def _gather_s(self, nbytes: float) -> float:
        return nbytes / (self.memory_bandwidth * (self.efficiency.gather or self.efficiency.memory))

    def _stream_s(self, nbytes: float) -> float:
        return nbytes / (self.memory_bandwidth * self.efficiency.memory)
