"""The built-in generators: one class per diffusers pipeline (registered in `vhd.synth.generators.GENERATORS`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from vhd.records import Kind
from vhd.synth.generators import (
    DEFAULT_MOTION_ADAPTER,
    DEFAULT_SDXL_MOTION_ADAPTER,
    DEFAULT_SPARSECTRL,
    PAPER_PHOTO_TEMPLATE,
    SD15,
    SDXL_BASE,
    Generator,
    Job,
)


class SDXLGenerator(Generator):
    """``sdxl``: StableDiffusionXLPipeline at 512x512 with the paper's photographic template."""

    name = "sdxl"
    pipeline_class = "StableDiffusionXLPipeline"
    default_model = SDXL_BASE
    default_guidance = 5.0
    default_template = PAPER_PHOTO_TEMPLATE


class SDGenerator(Generator):
    """``sd``: StableDiffusionPipeline (any SD 1.x/2.x checkpoint) at the model's size."""

    name = "sd"
    pipeline_class = "StableDiffusionPipeline"
    default_model = SD15
    default_size = None
    has_safety_checker = True


class VideoGenerator(Generator):
    """What vhd's video generators share: 16 frames at 8 fps, 25 steps (each states its pipeline)."""

    kind = Kind.VIDEO
    default_frames = 16
    fps = 8
    default_steps = 25


class AnimateDiffGenerator(VideoGenerator):
    """``animatediff``: AnimateDiffPipeline, SD 1.5 plus the v3 motion adapter, 16 frames."""

    name = "animatediff"
    pipeline_class = "AnimateDiffPipeline"
    default_model = SD15
    extra_components: ClassVar[dict[str, tuple[str, str]]] = {
        "motion_adapter": ("MotionAdapter", DEFAULT_MOTION_ADAPTER)
    }


class AnimateDiffSDXLGenerator(VideoGenerator):
    """``animatediff-sdxl``: AnimateDiffSDXLPipeline, 1024x1024, 16 frames (the paper's T2V)."""

    name = "animatediff-sdxl"
    pipeline_class = "AnimateDiffSDXLPipeline"
    default_model = SDXL_BASE
    default_size = (1024, 1024)
    default_guidance = 8.0
    extra_components: ClassVar[dict[str, tuple[str, str]]] = {
        "motion_adapter": ("MotionAdapter", DEFAULT_SDXL_MOTION_ADAPTER)
    }


class SparseCtrlI2VGenerator(VideoGenerator):
    """``animatediff-i2v``: AnimateDiff v3 with RGB SparseCtrl on frame 0 (prompt plus first frame)."""

    name = "animatediff-i2v"
    pipeline_class = "AnimateDiffSparseControlNetPipeline"
    default_model = SD15
    extra_components: ClassVar[dict[str, tuple[str, str]]] = {
        "motion_adapter": ("MotionAdapter", DEFAULT_MOTION_ADAPTER),
        "controlnet": ("SparseControlNetModel", DEFAULT_SPARSECTRL),
    }
    needs_first_frame = True
    batchable = False

    def call_kwargs(self, jobs: Sequence[Job]) -> dict[str, Any]:
        """One prompt; the first frame conditions frame 0."""
        kwargs = super().call_kwargs(jobs)
        kwargs["prompt"], kwargs["generator"] = kwargs["prompt"][0], kwargs["generator"][0]
        if "negative_prompt" in kwargs:
            kwargs["negative_prompt"] = kwargs["negative_prompt"][0]
        width, height = self.size or (512, 512)
        kwargs["conditioning_frames"] = [jobs[0].first_frame.convert("RGB").resize((width, height))]
        kwargs["controlnet_frame_indices"] = [0]
        return kwargs


class I2VGenXLGenerator(SparseCtrlI2VGenerator):
    """``i2vgen-xl``: I2VGenXLPipeline (prompt plus first frame), an alternative to ``animatediff-i2v``."""

    name = "i2vgen-xl"
    pipeline_class = "I2VGenXLPipeline"
    default_model = "ali-vilab/i2vgen-xl"
    extra_components: ClassVar[dict[str, tuple[str, str]]] = {}
    fps = 16
    default_steps = 50
    default_guidance = 9.0

    def call_kwargs(self, jobs: Sequence[Job]) -> dict[str, Any]:
        """One prompt and its image; ``clip_skip=None`` (the default breaks with transformers 5)."""
        kwargs = Generator.call_kwargs(self, jobs)
        kwargs["prompt"], kwargs["generator"] = kwargs["prompt"][0], kwargs["generator"][0]
        if "negative_prompt" in kwargs:
            kwargs["negative_prompt"] = kwargs["negative_prompt"][0]
        kwargs.update(image=jobs[0].first_frame.convert("RGB"), clip_skip=None, target_fps=self.fps)
        return kwargs
