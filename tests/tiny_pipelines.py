"""Tiny random-weight diffusers pipelines, built offline from configs for tests and benchmarks.

Each builder makes the components of one pipeline class with a few channels and layers (the
shapes follow diffusers' own test suite), a CLIP tokenizer over the 256 byte-level characters,
and saves the pipeline with ``save_pretrained``. `vhd generate` then loads the folder through the
real path (``<PipelineClass>.from_pretrained(dir)``) with no hub access. Weights are random:
pictures are noise, but deterministic, which is what the tests need.

Builders: `build_sd` (optionally with a safety checker that flags everything), `build_sdxl`,
`build_animatediff`, `build_animatediff_sdxl`, `build_sparsectrl` (AnimateDiff + RGB SparseCtrl),
`build_i2vgen`, and `build_all` for a session fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def clip_tokenizer() -> Any:
    """A CLIP tokenizer over the 256 byte-level characters (plain and word-final), no merges."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    chars = sorted(ByteLevel.alphabet())
    vocab: dict[str, int] = {}
    for token in ["<|startoftext|>", "<|endoftext|>", *chars, *(c + "</w>" for c in chars)]:
        vocab.setdefault(token, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def _text_encoder(hidden: int, *, projection: bool = False, layers: int = 2) -> Any:
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_attention_heads=2,
        num_hidden_layers=layers,
        vocab_size=600,
        hidden_act="gelu",
        projection_dim=32,
    )
    return CLIPTextModelWithProjection(config) if projection else CLIPTextModel(config)


def _vae(channels: tuple[int, ...] = (8, 8), groups: int = 2) -> Any:
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        block_out_channels=channels,
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * len(channels),
        up_block_types=["UpDecoderBlock2D"] * len(channels),
        latent_channels=4,
        norm_num_groups=groups,
    )


def _scheduler() -> Any:
    from diffusers import DDIMScheduler

    # steps_offset=1 as Stable Diffusion's own scheduler configs have it (diffusers warns about 0 as outdated)
    return DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="linear", clip_sample=False, steps_offset=1)


def _sd_unet(cross: int = 16, channels: tuple[int, int] = (8, 8)) -> Any:
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        block_out_channels=channels,
        layers_per_block=1,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=cross,
        attention_head_dim=4,
        norm_num_groups=2,
    )


def _sd_parts() -> dict[str, Any]:
    """The Stable Diffusion 1.x components (VAE, 16-wide text encoder and UNet), built in this order."""
    return {"vae": _vae(), "text_encoder": _text_encoder(16), "tokenizer": clip_tokenizer(), "unet": _sd_unet(16)}


def _safety_checker(flag_everything: bool) -> tuple[Any, Any]:
    """A tiny `StableDiffusionSafetyChecker`; with ``flag_everything`` its concept thresholds are negative."""
    import torch
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker
    from transformers import CLIPConfig, CLIPImageProcessor

    config = CLIPConfig(
        text_config={"hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1},
        vision_config={
            "hidden_size": 8,
            "intermediate_size": 16,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=8,
    )
    checker = StableDiffusionSafetyChecker(config)
    if flag_everything:
        with torch.no_grad():
            checker.concept_embeds_weights.fill_(-2.0)  # every cosine distance exceeds the threshold
    return checker, CLIPImageProcessor(crop_size={"height": 32, "width": 32}, size={"shortest_edge": 32})


def build_sd(out: Path, *, safety_checker: bool = False) -> Path:
    """A tiny `StableDiffusionPipeline` (with a safety checker that flags every image, if asked)."""
    import torch
    from diffusers import StableDiffusionPipeline

    torch.manual_seed(0)
    checker, extractor = _safety_checker(True) if safety_checker else (None, None)
    pipe = StableDiffusionPipeline(
        **_sd_parts(),
        scheduler=_scheduler(),
        safety_checker=checker,
        feature_extractor=extractor,
        image_encoder=None,
        requires_safety_checker=safety_checker,
    )
    pipe.save_pretrained(out)
    return out


def _sdxl_unet(channels: tuple[int, ...] = (8, 16)) -> Any:
    from diffusers import UNet2DConditionModel

    n = len(channels)
    return UNet2DConditionModel(
        block_out_channels=channels,
        layers_per_block=1,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D",) + ("CrossAttnDownBlock2D",) * (n - 1),
        up_block_types=("CrossAttnUpBlock2D",) * (n - 1) + ("UpBlock2D",),
        attention_head_dim=tuple(2 * (i + 1) for i in range(n)),
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        transformer_layers_per_block=(1,) * n,
        projection_class_embeddings_input_dim=80,  # 6 * 8 time ids + 32 pooled text
        cross_attention_dim=64,
        norm_num_groups=1,
    )


def _sdxl_parts() -> dict[str, Any]:
    """The SDXL components (VAE, two 32-wide text encoders, a 64-wide cross-attention UNet), built in this order."""
    return {
        "vae": _vae(),
        "text_encoder": _text_encoder(32),
        "text_encoder_2": _text_encoder(32, projection=True),
        "tokenizer": clip_tokenizer(),
        "tokenizer_2": clip_tokenizer(),
        "unet": _sdxl_unet(),
    }


def build_sdxl(out: Path) -> Path:
    """A tiny `StableDiffusionXLPipeline` (two text encoders, 64-wide cross attention)."""
    import torch
    from diffusers import StableDiffusionXLPipeline

    torch.manual_seed(0)
    pipe = StableDiffusionXLPipeline(
        **_sdxl_parts(),
        scheduler=_scheduler(),
        add_watermarker=False,
    )
    pipe.save_pretrained(out)
    return out


def motion_adapter(channels: tuple[int, ...], *, mid: bool = True) -> Any:
    from diffusers import MotionAdapter

    return MotionAdapter(
        block_out_channels=channels,
        motion_layers_per_block=1,
        motion_norm_num_groups=2,
        motion_num_attention_heads=2,
        use_motion_mid_block=mid,
    )


def _save_animatediff(pipeline: Any, out: Path, parts: dict[str, Any], adapter: Any, **extra: Any) -> Path:
    """Assemble an AnimateDiff-family pipeline from its parts (no image encoder) and save it to ``out``."""
    pipe = pipeline(
        **parts, motion_adapter=adapter, **extra, scheduler=_scheduler(), feature_extractor=None, image_encoder=None
    )
    pipe.save_pretrained(out)
    return out


def build_animatediff(out: Path) -> Path:
    """A tiny `AnimateDiffPipeline` (SD UNet + motion adapter; saved as a UNetMotionModel)."""
    import torch
    from diffusers import AnimateDiffPipeline

    torch.manual_seed(0)
    return _save_animatediff(AnimateDiffPipeline, out, _sd_parts(), motion_adapter((8, 8)))


def build_animatediff_sdxl(out: Path) -> Path:
    """A tiny `AnimateDiffSDXLPipeline`."""
    import torch
    from diffusers import AnimateDiffSDXLPipeline

    torch.manual_seed(0)
    return _save_animatediff(AnimateDiffSDXLPipeline, out, _sdxl_parts(), motion_adapter((8, 16), mid=False))


def build_sparsectrl(out: Path) -> Path:
    """A tiny `AnimateDiffSparseControlNetPipeline` with an RGB SparseCtrl model (3 conditioning channels)."""
    import torch
    from diffusers import AnimateDiffSparseControlNetPipeline, SparseControlNetModel

    torch.manual_seed(0)
    controlnet = SparseControlNetModel(
        block_out_channels=(8, 8),
        layers_per_block=1,
        in_channels=4,
        conditioning_channels=3,
        down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
        cross_attention_dim=16,
        conditioning_embedding_out_channels=(8, 8),
        norm_num_groups=1,
        attention_head_dim=4,
        use_simplified_condition_embedding=False,
    )
    with torch.no_grad():  # a ControlNet starts with zero output convolutions: give them weights
        for param in controlnet.parameters():
            if param.dim() > 1 and not param.any():
                param.normal_(0.0, 0.3)
    pipeline = AnimateDiffSparseControlNetPipeline
    return _save_animatediff(pipeline, out, _sd_parts(), motion_adapter((8, 8)), controlnet=controlnet)


def build_i2vgen(out: Path) -> Path:
    """A tiny `I2VGenXLPipeline` (text + first image to video)."""
    import torch
    from diffusers import I2VGenXLPipeline, I2VGenXLUNet
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(0)
    unet = I2VGenXLUNet(
        block_out_channels=(4, 8),
        layers_per_block=1,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
        up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
        cross_attention_dim=4,
        attention_head_dim=4,
        num_attention_heads=None,
        norm_num_groups=2,
    )
    vision = CLIPVisionModelWithProjection(
        CLIPVisionConfig(
            hidden_size=4,
            projection_dim=4,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            intermediate_size=16,
            patch_size=8,
        )
    )
    pipe = I2VGenXLPipeline(
        vae=_vae((8,)),
        text_encoder=_text_encoder(4),
        tokenizer=clip_tokenizer(),
        unet=unet,
        scheduler=_scheduler(),
        image_encoder=vision,
        feature_extractor=CLIPImageProcessor(crop_size={"height": 32, "width": 32}, size={"shortest_edge": 32}),
    )
    pipe.save_pretrained(out)
    return out


BUILDERS = {
    "sd": build_sd,
    "sdxl": build_sdxl,
    "animatediff": build_animatediff,
    "animatediff-sdxl": build_animatediff_sdxl,
    "animatediff-i2v": build_sparsectrl,
    "i2vgen-xl": build_i2vgen,
}
"""Generator name -> builder of a tiny pipeline it loads."""


def build_all(root: Path) -> dict[str, Path]:
    """Build every tiny pipeline under ``root`` (plus ``sd-checked``: SD with a flag-everything checker)."""
    folders = {name: build(root / name) for name, build in BUILDERS.items()}
    folders["sd-checked"] = build_sd(root / "sd-checked", safety_checker=True)
    return folders
