"""Units parse into SI floats; device cost functions follow the roofline with shape-dependent efficiency."""

from pathlib import Path

import pytest

from hardware_models import catalog
from hardware_models.units import parse_quantity


@pytest.mark.parametrize(
    "text,dim,expected",
    [
        ("400 Gbit/s", "bytes_per_s", 50e9),
        ("96 GiB", "bytes", 96 * 2**30),
        ("2 us", "seconds", 2e-6),
        ("800 TFLOP/s", "flop_per_s", 800e12),
        ("2.4 TB/s", "bytes_per_s", 2.4e12),
        ("700 W", "watts", 700.0),
        (1024, "bytes", 1024.0),
        ("1_000", "bytes", 1000.0),
    ],
)
def test_quantities_parse_to_si(text, dim, expected):
    assert parse_quantity(text, dim) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text,dim", [("400 Gbt/s", "bytes_per_s"), ("2 GB", "seconds"), ("fast", "bytes"), (True, "bytes")]
)
def test_bad_quantities_are_rejected(text, dim):
    with pytest.raises(ValueError):
        parse_quantity(text, dim)


def test_catalog_has_contract_names_with_sources():
    for section, name in [("device", "h100-sxm"), ("link", "nvlink4"), ("link", "cx7-400g-rdma")]:
        spec = catalog.resolve(section, name)
        assert spec.source
    for section in ("device", "link", "tier"):
        for name in catalog.names(section):
            assert catalog.resolve(section, name).source, f"{name} has no source"


def test_inline_override_merges_with_base():
    gpu = catalog.device({"base": "h100-sxm", "memory": "96 GiB", "peak": {"bf16": "800 TFLOP/s"}})
    assert gpu.memory == 96 * 2**30
    assert gpu.peak.bf16 == 800e12
    assert gpu.peak.fp8 == catalog.device("h100-sxm").peak.fp8  # untouched fields keep the base's


def test_large_gemm_approaches_peak_and_small_gemm_is_less_efficient():
    gpu = catalog.device("h100-sxm")
    big = 2 * 8192**3 / gpu.gemm_time_s(8192, 8192, 8192, "bf16")
    small = 2 * 128**3 / gpu.gemm_time_s(128, 128, 128, "bf16")
    assert 0.6 * gpu.peak.bf16 < big <= gpu.peak.bf16 * gpu.efficiency.gemm
    assert small < 0.2 * big


def test_skinny_gemm_is_memory_bound():
    gpu = catalog.device("h100-sxm")
    m, n, k = 1, 16384, 16384  # a decode GEMV: weights dominate the bytes
    t = gpu.gemm_time_s(m, n, k, "bf16")
    bytes_moved = (m * k + k * n + m * n) * 2
    assert t == pytest.approx(bytes_moved / (gpu.memory_bandwidth * gpu.efficiency.memory) + gpu.launch_overhead)


def test_fp8_gemm_is_faster_than_bf16_and_missing_dtype_is_an_error():
    h100, a100 = catalog.device("h100-sxm"), catalog.device("a100-sxm-80gb")
    assert h100.gemm_time_s(8192, 8192, 8192, "fp8") < h100.gemm_time_s(8192, 8192, 8192, "bf16")
    with pytest.raises(ValueError, match="no peak for dtype 'fp8'"):
        a100.gemm_time_s(1024, 1024, 1024, "fp8")


def test_causal_attention_flop_counts():
    gpu = catalog.device("h100-sxm")
    t, d, h = 4096, 128, 8
    full = gpu.attention_flop(t, t, h, d, causal=False)
    assert full == 4 * t * t * h * d
    assert gpu.attention_flop(t, t, h, d, causal=True) == pytest.approx(full / 2, rel=1e-3)
    # t new tokens on p cached: every new token sees all p cached tokens plus a causal triangle
    p = 8192
    assert gpu.attention_flop(t, t + p, h, d, causal=True) == pytest.approx(4 * h * d * (t * p + t * (t + 1) / 2))


def test_tier_access_time_is_iops_or_bandwidth_bound():
    hdd, dram = catalog.tier("hdd"), catalog.tier("ddr5-host")
    # 1000 random 4 KiB reads on an HDD: limited by ~180 IOPS, not by 270 MB/s
    assert hdd.access_time_s(1000, 4096) == pytest.approx(1000 / 180 + hdd.latency)
    # DRAM: 64 B granules at bandwidth; a 100 B access moves two granules
    assert dram.bytes_moved(100) == 128
    assert dram.access_time_s(1e6, 100) == pytest.approx(
        max(1e6 * 128 / dram.bandwidth, 1e6 / dram.max_iops) + dram.latency
    )


def test_the_catalog_files_read_as_the_pure_python_safe_loader_reads_them():
    import yaml

    from hardware_models.yaml_files import load_yaml_file

    for path in sorted((Path(catalog.__file__).parent / "catalog").glob("*.yaml")):
        text = path.read_text()
        assert load_yaml_file(text) == yaml.safe_load(text), path.name
