"""The fused attention kernel's occupancy model (hardware_models/attention.py): closed forms.

Llama 3 405B on TP8 is the running shape: one KV head per GPU, 16 query heads packed into its rows,
head dim 128, on the paper's H100 (132 SMs, 128 x 128 tiles).
"""

from __future__ import annotations

import math

import pytest

from hardware_models import catalog
from hardware_models.attention import AttentionKernel, kv_splits, occupancy

GPU = "h100-96gb-500w-cp-calibrated"
HD, GROUP = 128, 16


def dev(**kernel):
    return catalog.device({"base": GPU, "attention_kernel": kernel}) if kernel else catalog.device(GPU)


def kv_bytes(kv: int) -> float:
    return 2.0 * kv * HD * 2


def test_decode_attention_is_its_kv_read_at_hbm_bandwidth():
    """One new token (16 packed rows) against 128K cached tokens: split over the KV length until the
    SMs work; the kernel is its K/V bytes at the streaming bandwidth, plus launch and the combine."""
    d, kv = dev(), 131072
    flop = 4.0 * HD * GROUP * kv
    c = d.attention_cost(GROUP, kv, 1, HD, kv_heads=1, flop=flop)
    assert c.bound == "memory"
    nbytes = kv_bytes(kv) + 2 * GROUP * HD * 2  # K/V read, Q read and O written
    assert c.memory_s == pytest.approx(nbytes / (d.memory_bandwidth * d.efficiency.memory), rel=1e-12)
    assert c.occupancy.bandwidth_fill == 1.0
    assert c.occupancy.splits > 1 and c.occupancy.row_fill == GROUP / 128
    combine = d.memory_time_s(2 * c.occupancy.splits * GROUP * (HD + 1) * 4 + GROUP * HD * 2)
    assert c.combine_s == pytest.approx(combine)
    assert c.time_s == pytest.approx(c.memory_s + d.launch_overhead + combine, rel=1e-12)
    # a literal single query row (no GQA packing) is bound the same way
    one = d.attention_cost(1, kv, 1, HD, kv_heads=1, flop=4.0 * HD * kv)
    assert one.bound == "memory"
    assert one.memory_s == pytest.approx((kv_bytes(kv) + 2 * HD * 2) / (d.memory_bandwidth * d.efficiency.memory))


def test_split_kv_is_what_lets_decode_reach_bandwidth():
    """Without splits (Flash-Decoding's baseline) one thread block per head keeps too few K/V
    bytes in flight (Little's law) and one SM computes: many times slower."""
    kv = 131072
    split = dev().attention_time_s(GROUP, kv, 1, HD, kv_heads=1, flop=4.0 * HD * GROUP * kv)
    c = dev(max_splits=1).attention_cost(GROUP, kv, 1, HD, kv_heads=1, flop=4.0 * HD * GROUP * kv)
    k = AttentionKernel(sms=132)
    in_flight = k.stages * 2 * k.tile_kv * HD * 2
    assert c.occupancy.bandwidth_fill == pytest.approx(in_flight / (dev().memory_bandwidth * k.memory_latency))
    assert c.occupancy.sm_fill == pytest.approx(1 / 132)
    assert c.time_s > 8 * split


def test_long_query_attention_is_compute_bound_as_before():
    """Full prefill: thousands of blocks, no split, every row real - the roofline without occupancy
    (a device without `sms`), i.e. flop / (peak x attention)."""
    t = 8192
    flop = 4.0 * HD * GROUP * t * (t + 1) / 2
    d = dev()
    c = d.attention_cost(t * GROUP, t, 1, HD, kv_heads=1, flop=flop)
    assert c.bound == "compute" and c.occupancy.splits == 1 and c.combine_s == 0.0
    assert c.occupancy.sm_fill == 1.0 and c.occupancy.row_fill == 1.0
    assert c.compute_s == pytest.approx(flop / (d.peak_flop_per_s("bf16") * d.efficiency.attention), rel=1e-12)
    plain = dev(sms=None)
    assert c.time_s == plain.attention_time_s(t * GROUP, t, 1, HD, kv_heads=1, flop=flop)


def test_no_sms_means_no_occupancy_model():
    cpu = catalog.device("cpu-2core-generic")
    o = occupancy(cpu.attention_kernel, 16, 100_000, 1, 1, HD, 2, cpu.memory_bandwidth)
    assert (o.splits, o.row_fill, o.sm_fill, o.bandwidth_fill) == (1, 1.0, 1.0, 1.0)


def test_split_heuristic_closed_forms():
    """flash-attn's num_splits_heuristic: no split when >= 80% of the SMs have a block; otherwise the
    smallest eligible split count within 85% of the best wave efficiency."""
    assert kv_splits(106, 132, 1000, 128) == 1  # 106 >= 0.8 x 132
    # 41 blocks (328 new tokens x 16 rows / 128): 2 splits fill 62%, 3 fill 93% of one wave
    assert kv_splits(41, 132, 257, 128) == 3
    # one block, 1024 KV blocks: s / 132 efficiency up to 128 splits (best 0.97); the first eligible
    # count (one that changes ceil(1024 / s)) at >= 0.85 x 0.97 is 114
    assert kv_splits(1, 132, 1024, 128) == 114
    assert all(math.ceil(1024 / s) == math.ceil(1024 / 113) for s in range(104, 114))
    assert kv_splits(1, 132, 3, 128) == 3  # no more splits than KV blocks


def test_partial_prefill_block_is_split_and_fills_the_sms():
    """1,312 new tokens on 4 CP ranks (328 each) against 32K cached per rank: 41 blocks on 132 SMs,
    split 3 ways; compute-bound at 123/132 of the SMs, plus the combine of 3 fp32 partial outputs."""
    d, rows, kv = dev(), 328 * GROUP, 32769
    flop = 4.0 * HD * GROUP * 328 * 32441
    c = d.attention_cost(rows, kv, 1, HD, kv_heads=1, flop=flop)
    assert (c.occupancy.blocks, c.occupancy.splits) == (123, 3)
    assert c.occupancy.sm_fill == pytest.approx(123 / 132)
    assert c.bound == "compute"
    assert c.compute_s == pytest.approx(flop / (d.peak_flop_per_s("bf16") * d.efficiency.attention * 123 / 132))


@pytest.mark.parametrize("rows", [GROUP, 328 * GROUP, 4096 * GROUP])
def test_attention_time_grows_with_the_cached_length(rows):
    """Monotone in the KV length: strictly for a fixed split count; with flash-attn's heuristic the
    split count moves in steps (KV blocks per split), which may shave a few percent (the combine's
    size) off a slightly longer cache - never more than 5%, and doubling the cache always costs more."""

    def t(d, kv):
        return d.attention_time_s(rows, kv, 1, HD, kv_heads=1, causal=False)

    fixed, real = dev(max_splits=1), dev()
    kvs = list(range(1024, 600_000, 1531))
    assert all(t(fixed, b) > t(fixed, a) for a, b in zip(kvs, kvs[1:]))
    assert all(t(real, b) > 0.95 * t(real, a) for a, b in zip(kvs, kvs[1:]))
    assert all(t(real, 2 * a) > t(real, a) for a in kvs)
