"""Video curation as an ingestion pipeline (as in NVIDIA Cosmos' curator): the same storage ->
master -> worker -> trainer machinery, with these stages instead of decode/transform:

    download (storage read) -> decode (CPU) -> shot_split (GPU) -> filter (GPU) -> caption (GPU)
    -> encode (CPU) -> send curated clips to the trainers

A sample is one raw video of `video_s` seconds; a split is the videos of one partition. Shot
detection cuts each video into 1 + Poisson(video_s / clip_s - 1) clips; each clip passes the filters
with probability `keep_fraction` (both drawn per partition from seeded streams, so every run of a
seed sees the same videos). Only kept clips are captioned, encoded and sent.

GPU stages use the device model: a network's forward pass over T tokens is costed as one GEMM of its
parameter count, `gemm_time_s(m=T, n=params/hidden, k=hidden)` (2 x params x T FLOP, weights
streamed once; small T is memory bound). The captioner prefills the kept clips' visual + prompt
tokens, then decodes `caption_output_tokens` steps with all kept clips of a batch as the GEMM's m.
CPU stages (decode, encode) are core-seconds per second of video. Every number below is an
assumption with its reasoning; replace with measurements of a real curator.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from hardware_models.strict import StrictModel
from hardware_models.units import Bytes, Seconds
from sim.workloads.ingestion.parts import BatchPlan, SplitPlan, Stage, batch_ranges


class ModelSize(StrictModel):
    params: float = Field(gt=0, description="parameters")
    hidden: int = Field(gt=0, description="model width (the GEMM's k)")
    dtype: str = Field("bf16", description="compute dtype (must have a peak on the worker GPU)")


class MediaConfig(StrictModel):
    video_s: Seconds = Field(60.0, gt=0, description="seconds per raw video (assumption: short web videos)")
    fps: float = Field(30.0, gt=0)
    clip_s: Seconds = Field(8.0, gt=0, description="mean clip length after shot detection (assumption)")
    keep_fraction: float = Field(0.5, ge=0, le=1, description="clips passing the filters (assumption)")
    decode_cpu_s_per_video_s: float = Field(
        0.1,
        ge=0,
        description="assumption: software 1080p H.264 decode ~300 frames/s per core -> 30 fps video costs 0.1 core-s/s",
    )
    shot_model: ModelSize = Field(
        ModelSize(params=4e6, hidden=256), description="assumption: TransNetV2-class detector, one token per frame"
    )
    filter_model: ModelSize = Field(
        ModelSize(params=3.04e8, hidden=1024), description="CLIP ViT-L/14 image encoder (~304M params, width 1024)"
    )
    filter_frames_per_clip: int = Field(4, ge=1, description="frames scored per clip (assumption)")
    tokens_per_frame: int = Field(256, ge=1, description="ViT-L/14 at 224 px: 16 x 16 patches")
    caption_model: ModelSize = Field(
        ModelSize(params=7.6e9, hidden=3584), description="a 7B-class open VLM captioner (Qwen2-VL-7B: width 3584)"
    )
    caption_frames_per_clip: int = Field(8, ge=1, description="frames the captioner sees (assumption)")
    caption_prompt_tokens: int = Field(64, ge=0, description="text prompt tokens (assumption)")
    caption_output_tokens: int = Field(
        256, ge=1, description="caption length in tokens (assumption: paragraph-long dense captions)"
    )
    encode_cpu_s_per_video_s: float = Field(0.5, ge=0, description="assumption: x264 720p ~60 fps per core")
    output_bytes_per_video_s: Bytes = Field(
        500_000, gt=0, description="encoded clip bytes per second (assumption: 4 Mbit/s H.264 720p)"
    )
    caption_bytes: Bytes = Field(2048, ge=0, description="caption text and metadata per clip")


MEDIA_STAGES = (
    Stage("decode", "cpu"),
    Stage("shot_split", "gpu"),
    Stage("filter", "gpu"),
    Stage("caption", "gpu"),
    Stage("encode", "cpu"),
)


def forward_time_s(gpu, model: ModelSize, tokens: float) -> float:
    """A forward pass over `tokens` tokens as one GEMM of the model's parameters."""
    if tokens <= 0:
        return 0.0
    return gpu.gemm_time_s(tokens, model.params / model.hidden, model.hidden, model.dtype)


class VideoData:
    """Videos in partitions; plans splits into batches with per-stage GPU/CPU times."""

    stages = MEDIA_STAGES

    def __init__(self, config, media: MediaConfig, gpu, seed: int) -> None:
        self.dataset, self.media, self.gpu = config.dataset, media, gpu
        self.batch_samples = config.preprocessing.batch_samples
        self.per_partition = max(1, int(self.dataset.partition_bytes // self.dataset.bytes_per_sample))
        self.partitions = math.ceil(self.dataset.samples / self.per_partition)
        self.total_samples = self.dataset.samples
        self._seed = seed
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def partition_range(self, p: int) -> tuple[int, int]:
        return p * self.per_partition, min((p + 1) * self.per_partition, self.total_samples)

    def clips(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Clips per video and kept clips per video of partition p (seeded per partition)."""
        if p not in self._cache:
            if len(self._cache) > 64:
                self._cache.clear()
            rng = np.random.default_rng([self._seed, p])
            start, end = self.partition_range(p)
            mean_extra = max(self.media.video_s / self.media.clip_s - 1.0, 0.0)
            clips = 1 + rng.poisson(mean_extra, end - start)
            self._cache[p] = (clips, rng.binomial(clips, self.media.keep_fraction))
        return self._cache[p]

    def _batch(self, n: int, clips: float, kept: float, kept_video_s: float) -> tuple[tuple[float, ...], float]:
        m, gpu = self.media, self.gpu
        decode = n * m.video_s * m.decode_cpu_s_per_video_s
        shot = forward_time_s(gpu, m.shot_model, n * m.video_s * m.fps)
        filt = forward_time_s(gpu, m.filter_model, clips * m.filter_frames_per_clip * m.tokens_per_frame)
        prefill = kept * (m.caption_frames_per_clip * m.tokens_per_frame + m.caption_prompt_tokens)
        caption = forward_time_s(gpu, m.caption_model, prefill) + m.caption_output_tokens * forward_time_s(
            gpu, m.caption_model, kept
        )
        encode = kept_video_s * m.encode_cpu_s_per_video_s
        out = kept_video_s * m.output_bytes_per_video_s + kept * m.caption_bytes
        return (decode, shot, filt, caption, encode), out

    def plan(self, p: int, start: int, end: int) -> SplitPlan:
        clips, kept = self.clips(p)
        p0 = self.partition_range(p)[0]
        batches = []
        for a, b in batch_ranges(start, end, self.batch_samples):
            c, k = clips[a - p0 : b - p0], kept[a - p0 : b - p0]
            kept_s = float((self.media.video_s * k / c).sum())
            stage_s, out = self._batch(b - a, float(c.sum()), float(k.sum()), kept_s)
            batches.append(
                BatchPlan(
                    a,
                    b,
                    stage_s,
                    out,
                    {"clips": float(c.sum()), "clips_kept": float(k.sum()), "video_s": (b - a) * self.media.video_s},
                )
            )
        read = (end - start) * self.dataset.bytes_per_sample
        return SplitPlan(
            p,
            start,
            end,
            read,
            math.ceil(read / self.dataset.access_bytes),
            read + sum(b.bytes_out for b in batches),
            tuple(batches),
        )

    def mean_per_sample(self) -> dict:
        """Expected costs per video for closed-form stage capacities."""
        m, n = self.media, self.batch_samples
        clips = 1 + max(m.video_s / m.clip_s - 1.0, 0.0)
        kept = clips * m.keep_fraction
        stage_s, out = self._batch(n, n * clips, n * kept, n * m.video_s * m.keep_fraction)
        read = self.dataset.bytes_per_sample
        return {
            "stage_s": tuple(s / n for s in stage_s),
            "bytes_out": out / n,
            "read_bytes": read,
            "accesses": read / self.dataset.access_bytes,
        }
