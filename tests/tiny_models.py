"""Tiny random-weight vision-language models, built offline for tests.

Each builder trains a byte-level BPE tokenizer on a few sentences, pairs it with the family's
image processor (32 px images), a processor carrying a chat template and a 2-layer model with
hidden size 64, then saves everything with ``save_pretrained``. The result loads through the
real path (``AutoProcessor`` + ``AutoModelForImageTextToText``) with no hub access. Weights are
random: outputs are gibberish but deterministic, which is all the backend tests need.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

SIDE = 32
"""Image side the tiny image processors resize to."""

_CORPUS = [
    "Is this image harmful? Answer yes or no.",
    "Yes, the picture shows violence. No, it is an ordinary scene.",
    "A photo of a cat sitting on a mat next to a red ball.",
    "The quick brown fox jumps over the lazy dog near the river.",
    "Affirmative debater: list three reasons. Negative debater: answer them.",
    "The judge reads both sides and decides whether the video is harmful.",
]

_CONTENT = (
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
)


def chat_template(*, system_role: bool = True, end_of_turn: str = "") -> str:
    """A minimal chat template: ``role: content`` lines, then ``assistant:``.

    Args:
        system_role: When False the template raises on a system message, like templates of
            models trained without one.
        end_of_turn: Text written after each turn's content.
    """
    reject = (
        "{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
        if not system_role
        else ""
    )
    return (
        "{% for m in messages %}"
        + reject
        + "{{ m['role'] }}: "
        + _CONTENT
        + end_of_turn
        + "{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    )


def _transformers() -> Any:
    """The transformers module, typed loosely (its classes are partly untyped)."""
    return importlib.import_module("transformers")


def _tokenizer(extra_specials: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    PreTrainedTokenizerFast = _transformers().PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<pad>", "<s>", "</s>", "<image>", *extra_specials],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS * 10, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        padding_side="left",
    )


def _text_config(tokenizer: Any) -> Any:
    return _transformers().LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def _vision(**changes: Any) -> dict[str, Any]:
    """The tiny vision tower's sizes (64 wide, 2 layers, 8 px patches over `SIDE` px images), with ``changes``."""
    return {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": SIDE,
        "patch_size": 8,
        **changes,
    }


def _write(path: Path, *parts: Any) -> Path:
    """Save each part (model, processor, tokenizer) into ``path``, created if missing."""
    path.mkdir(parents=True, exist_ok=True)
    for part in parts:
        part.save_pretrained(path)
    return path


def _save(model: Any, processor: Any, tokenizer: Any, path: Path) -> Path:
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return _write(path, model, processor)


def build_tiny_llava(path: Path, *, seed: int = 0, system_role: bool = True, text_init: float = 0.02) -> Path:
    """Build and save a tiny LLaVA (CLIP vision tower, Llama text model).

    Args:
        path: Directory to write (created if missing).
        seed: Seed for the random weights.
        system_role: Whether the chat template accepts a system message.
        text_init: The text config's ``initializer_range`` (0.2 makes training tests move visibly).

    Returns:
        ``path``, loadable with ``AutoModelForImageTextToText.from_pretrained``.
    """
    import torch

    tf = _transformers()
    CLIPVisionConfig, LlavaConfig = tf.CLIPVisionConfig, tf.LlavaConfig
    LlavaProcessor, LlavaForConditionalGeneration = tf.LlavaProcessor, tf.LlavaForConditionalGeneration
    CLIPImageProcessorPil = tf.models.clip.CLIPImageProcessorPil

    tokenizer = _tokenizer([])
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        chat_template=chat_template(system_role=system_role),
        image_token="<image>",
        num_additional_image_tokens=1,  # the CLS token, dropped by the "default" strategy
    )
    vision = CLIPVisionConfig(**_vision(projection_dim=64))
    text = _text_config(tokenizer)
    text.initializer_range = text_init
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    return _save(model, processor, tokenizer, path)


def build_tiny_idefics3(path: Path, *, seed: int = 0) -> Path:
    """Build and save a tiny Idefics3 (SigLIP-style vision tower with pixel shuffle, Llama text).

    Args:
        path: Directory to write (created if missing).
        seed: Seed for the random weights.

    Returns:
        ``path``, loadable with ``AutoModelForImageTextToText.from_pretrained``.
    """
    import torch

    tf = _transformers()
    Idefics3Config, Idefics3VisionConfig = tf.Idefics3Config, tf.Idefics3VisionConfig
    Idefics3Processor, Idefics3ForConditionalGeneration = tf.Idefics3Processor, tf.Idefics3ForConditionalGeneration
    Idefics3ImageProcessorPil = tf.models.idefics3.Idefics3ImageProcessorPil

    tokenizer = _tokenizer(["<fake_token_around_image>", "<global-img>", "<end_of_utterance>"])
    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": SIDE},
        max_image_size={"longest_edge": SIDE},
        do_image_splitting=False,
    )
    scale_factor = 2
    patch_size = 8
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=(SIDE // patch_size) ** 2 // scale_factor**2,
        chat_template=chat_template(end_of_turn="<end_of_utterance>"),
    )
    vision = Idefics3VisionConfig(**_vision(patch_size=patch_size))
    config = Idefics3Config(
        vision_config=vision.to_dict(),
        text_config=_text_config(tokenizer).to_dict(),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=scale_factor,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).eval()
    return _save(model, processor, tokenizer, path)


def build_tiny_clip(path: Path, *, seed: int = 0, projection_dim: int = 16) -> Path:
    """Build and save a tiny random CLIP (vision and text towers) with a Pillow image processor.

    Args:
        path: Directory to write (created if missing).
        seed: Seed for the random weights.
        projection_dim: Size of the joint embedding (`get_image_features` output).

    Returns:
        ``path``, loadable with ``CLIPModel`` / ``CLIPImageProcessor.from_pretrained``.
    """
    import torch

    tf = _transformers()
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": SIDE,
        "patch_size": 8,
    }
    text = {
        "vocab_size": 64,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 16,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    config = tf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection_dim)
    torch.manual_seed(seed)
    model = tf.CLIPModel(config).eval()
    processor = tf.models.clip.CLIPImageProcessorPil(
        size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE}
    )
    return _write(path, model, processor)


SHIELD_TEMPLATE = (
    "{% for m in messages %}<start_of_turn>user{{ '\\n' }}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<start_of_image>{% else %}"
    "Decide whether the image breaks this safety policy, reading it literally. "
    "Policy: {{ c['text'] }} Does the image break the policy? Start your answer with Yes or No."
    "{% endif %}{% endfor %}<end_of_turn>{{ '\\n' }}{% endfor %}<start_of_turn>model{{ '\\n' }}"
)
"""A chat template in the shape of ShieldGemma 2's: the image, then the policy question."""


def build_tiny_shieldgemma2(path: Path, *, seed: int = 0) -> Path:
    """Build and save a tiny ShieldGemma 2 (Gemma 3 with a SigLIP tower, read as a Yes/No classifier).

    The tokenizer has ``Yes`` and ``No`` as whole tokens; the config records their ids as
    ``yes_token_index`` / ``no_token_index`` (what `ShieldGemma2ForImageClassification` reads).

    Args:
        path: Directory to write (created if missing).
        seed: Seed for the random weights.

    Returns:
        ``path``, loadable with ``AutoProcessor`` + ``ShieldGemma2ForImageClassification``.
    """
    import torch

    tf = _transformers()
    specials = ["<start_of_image>", "<end_of_image>", "<image_soft_token>", "<start_of_turn>", "<end_of_turn>"]
    base = _tokenizer([*specials, "Yes", "No"])
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_object=base.backend_tokenizer,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        padding_side="left",
        extra_special_tokens={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
    )
    tokens_per_image = 4  # 32 px / 8 px patches = 4x4 patches, pooled to 2x2
    image_processor = tf.models.gemma3.Gemma3ImageProcessorPil(size={"height": SIDE, "width": SIDE})
    processor = tf.ShieldGemma2Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=SHIELD_TEMPLATE,
        image_seq_length=tokens_per_image,
    )
    text = tf.Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        sliding_window=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    vision = tf.SiglipVisionConfig(**_vision())
    config = tf.ShieldGemma2Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=tokens_per_image,
        boi_token_index=tokenizer.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_index=tokenizer.convert_tokens_to_ids("<end_of_image>"),
        image_token_index=tokenizer.convert_tokens_to_ids("<image_soft_token>"),
    )
    config.yes_token_index = tokenizer.convert_tokens_to_ids("Yes")
    config.no_token_index = tokenizer.convert_tokens_to_ids("No")
    torch.manual_seed(seed)
    model = tf.ShieldGemma2ForImageClassification(config).eval()
    return _write(path, model, processor)


def build_tiny_text_llm(path: Path, *, seed: int = 0) -> Path:
    """A tiny text-only Llama chat model (tokenizer with a chat template, no processor): `vhd prompts`' hf path."""
    import torch

    torch.manual_seed(seed)
    tokenizer = _tokenizer([])
    tokenizer.chat_template = chat_template()
    model = _transformers().LlamaForCausalLM(_text_config(tokenizer))
    return _save(model, tokenizer, tokenizer, path)


def _blip_towers(
    vision_cls: Any, qformer_cls: Any, tokenizer: Any, qformer_tokenizer: Any, text_init: float
) -> dict[str, Any]:
    """The vision, Q-Former and text configs of a tiny InstructBLIP (image or video) as config keywords."""
    vision = vision_cls(**_vision(initializer_range=0.02))
    qformer = qformer_cls(
        vocab_size=len(qformer_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        encoder_hidden_size=64,
        cross_attention_frequency=1,
        pad_token_id=qformer_tokenizer.pad_token_id,
    )
    text = _text_config(tokenizer)
    text.initializer_range = text_init
    return {"vision_config": vision.to_dict(), "qformer_config": qformer.to_dict(), "text_config": text.to_dict()}


def _wake_qformer(model: Any, text_init: float) -> Any:
    """Draw the query tokens (zeros by default) and the projection, which would otherwise hide the image."""
    import torch

    with torch.no_grad():
        model.query_tokens.normal_(0.0, 1.0)
        model.language_projection.weight.normal_(0.0, text_init)
    return model


def build_tiny_instructblip(path: Path, *, seed: int = 0, text_init: float = 0.2) -> Path:
    """Build and save a tiny InstructBLIP (BLIP vision tower, Q-Former, Llama text model).

    InstructBLIP's processor has no chat template (the ``hf`` backend writes a plain prompt for
    it). The vision tower's initializer range is raised from its 1e-10 default to 0.02, the
    Q-Former's query tokens (zeros by default) are drawn from N(0, 1) and the language
    projection from N(0, ``text_init``), so the random model does not ignore the image; the text
    model's initializer range ``text_init`` (0.2 by default) makes its loss move visibly in
    training tests.

    Args:
        path: Directory to write (created if missing).
        seed: Seed for the random weights.
        text_init: The text config's ``initializer_range``.

    Returns:
        ``path``, loadable with ``AutoProcessor`` + ``AutoModelForImageTextToText``.
    """
    import torch

    tf = _transformers()
    tokenizer = _tokenizer([])
    image_processor = tf.models.blip.BlipImageProcessorPil(size={"height": SIDE, "width": SIDE})
    query_tokens = 4
    processor = tf.InstructBlipProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        qformer_tokenizer=_tokenizer([]),
        num_query_tokens=query_tokens,
    )
    config = tf.InstructBlipConfig(
        **_blip_towers(tf.InstructBlipVisionConfig, tf.InstructBlipQFormerConfig, tokenizer, tokenizer, text_init),
        num_query_tokens=query_tokens,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
    )
    torch.manual_seed(seed)
    model = _wake_qformer(tf.InstructBlipForConditionalGeneration(config).eval(), text_init)
    return _save(model, processor, tokenizer, path)


def build_tiny_instructblip_video(path: Path, *, seed: int = 0, text_init: float = 0.2) -> Path:
    """Build and save a tiny InstructBLIP-Video (`InstructBlipVideoForConditionalGeneration`).

    The same tower sizes and initialisation as `build_tiny_instructblip`. transformers' video
    processor imports torchvision, so the directory holds what vhd's own
    `vhd.backends.blip_video.VideoBlipProcessor` loads: the tokenizer (with ``<video>``), the
    Q-Former tokenizer under ``qformer_tokenizer/`` and a BLIP image processor applied per frame.

    Args:
        path: Directory to write (created if missing).
        seed: Seed for the random weights.
        text_init: The text config's ``initializer_range``.

    Returns:
        ``path``, loadable with `vhd.backends.hf.load_model`.
    """
    import torch

    tf = _transformers()
    tokenizer = _tokenizer(["<video>"])
    qformer_tokenizer = _tokenizer([])
    image_processor = tf.models.blip.BlipImageProcessorPil(size={"height": SIDE, "width": SIDE})
    query_tokens = 4
    config = tf.InstructBlipVideoConfig(
        **_blip_towers(
            tf.InstructBlipVideoVisionConfig, tf.InstructBlipVideoQFormerConfig, tokenizer, qformer_tokenizer, text_init
        ),
        num_query_tokens=query_tokens,
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
    )
    torch.manual_seed(seed)
    model = _wake_qformer(tf.InstructBlipVideoForConditionalGeneration(config).eval(), text_init)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    _write(path, model, tokenizer, image_processor)
    qformer_tokenizer.save_pretrained(path / "qformer_tokenizer")
    return path


def build_tiny_llava_next_video(path: Path, *, seed: int = 0) -> Path:
    """Build and save a tiny LLaVA-NeXT-Video (CLIP vision tower, Llama text; images and videos).

    transformers' video processors import torchvision: callers skip without it. Each video frame is
    `SIDE` px, 4 x 4 patches pooled 2 x 2: 4 tokens a frame.

    Returns:
        ``path``, loadable with ``AutoProcessor`` + ``AutoModelForImageTextToText``.
    """
    import torch

    tf = _transformers()
    tokenizer = _tokenizer(["<video>"])
    template = (
        "{% for m in messages %}{{ m['role'] }}: {% if m['content'] is string %}{{ m['content'] }}{% else %}"
        "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'video' %}<video>"
        "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    square = {"size": {"shortest_edge": SIDE}, "crop_size": {"height": SIDE, "width": SIDE}}
    processor = tf.LlavaNextVideoProcessor(
        video_processor=tf.LlavaNextVideoVideoProcessor(**square),
        image_processor=tf.LlavaNextImageProcessor(**square, image_grid_pinpoints=[[SIDE, SIDE]]),
        tokenizer=tokenizer,
        chat_template=template,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        image_token="<image>",
        video_token="<video>",
    )
    config = tf.LlavaNextVideoConfig(
        vision_config=tf.CLIPVisionConfig(**_vision(projection_dim=64)),
        text_config=_text_config(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        image_grid_pinpoints=[[SIDE, SIDE]],
        spatial_pool_stride=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = tf.LlavaNextVideoForConditionalGeneration(config).eval()
    return _save(model, processor, tokenizer, path)
