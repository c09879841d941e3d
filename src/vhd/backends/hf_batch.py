"""Batched generation for the ``hf`` backend: chat prompts and one left-padded ``generate``.

`prepare` renders one conversation with the processor's chat template and decodes its images;
`generate_group` runs prepared conversations that share decoding settings as a single batch.
The thread that calls them is `vhd.backends.hf_worker.BatchWorker`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vhd.backends.base import GenerateConfig, Message, Output
from vhd.backends.hf_preprocess import PreprocessCache, PreprocessStats
from vhd.errors import BackendError
from vhd.media.encoded import EncodedImage, EncodedVideo

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    """A model and its processor, ready on a device.

    Attributes:
        model: The transformers model (``generate`` capable).
        processor: Its processor (chat template, tokenizer, image processor).
        device: The torch device the model sits on.
        dtype: The torch dtype of the weights.
        generate_kwargs: Extra keyword arguments for every ``model.generate`` call.
        cache: Each sample's images decoded and preprocessed once (`vhd.backends.hf_preprocess`);
            None: every call on its own.
        image_processor: The class name of the image processor in use ("" for none).
        stats: Seconds preprocessing and generating, calls and batches (image passes with a cache).
    """

    model: Any
    processor: Any
    device: Any
    dtype: Any
    generate_kwargs: dict[str, Any] = field(default_factory=dict)
    cache: PreprocessCache | None = None
    image_processor: str = ""
    stats: PreprocessStats = field(default_factory=PreprocessStats)


def to_chat(messages: Sequence[Message], *, fold_system: bool = False) -> list[dict[str, Any]]:
    """Convert messages to the content-list form that processor chat templates take.

    Args:
        messages: The conversation.
        fold_system: Move system content to the front of the first user turn, for templates
            that have no system role.

    Returns:
        ``[{"role": ..., "content": [{"type": "image"} | {"type": "video"} | {"type": "text", "text": ...}]}]``.
    """

    def part(p: str | EncodedImage | EncodedVideo) -> dict[str, Any]:
        if isinstance(p, EncodedImage):
            return {"type": "image"}
        if isinstance(p, EncodedVideo):
            return {"type": "video"}
        return {"type": "text", "text": p}

    def content(msg: Message) -> list[dict[str, Any]]:
        return [part(p) for p in msg.parts]

    if not fold_system:
        return [{"role": m.role, "content": content(m)} for m in messages]
    system = [part for m in messages if m.role == "system" for part in content(m)]
    chat: list[dict[str, Any]] = [{"role": m.role, "content": content(m)} for m in messages if m.role != "system"]
    if system:
        system.append({"type": "text", "text": "\n\n"})
        first_user = next((turn for turn in chat if turn["role"] == "user"), None)
        if first_user is None:
            chat.insert(0, {"role": "user", "content": system})
        else:
            first_user["content"] = system + first_user["content"]
    return chat


def render_prompt(processor: Any, messages: Sequence[Message]) -> str:
    """Render a conversation with the processor's chat template.

    A system message is folded into the first user turn when the template rejects it.

    Raises:
        BackendError: The template cannot render this conversation.
    """
    has_system = any(m.role == "system" for m in messages)
    try:
        return str(processor.apply_chat_template(to_chat(messages), add_generation_prompt=True, tokenize=False))
    except Exception as exc:
        if not has_system:
            raise BackendError(f"hf chat template failed: {exc}") from exc
        log.debug("chat template rejected the system message (%s); folding it into the user turn", exc)
    try:
        return str(
            processor.apply_chat_template(
                to_chat(messages, fold_system=True), add_generation_prompt=True, tokenize=False
            )
        )
    except Exception as exc:
        raise BackendError(f"hf chat template failed: {exc}") from exc


PLAIN_TEMPLATE = (
    "{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}"
)
"""The prompt format of InstructBLIP-family models, which ship no chat template: the turns' text,
one per line, no role names (the processor puts the image's query tokens in front itself)."""

SINGLE_IMAGE_PROCESSORS = ("InstructBlipProcessor", "Blip2Processor")
"""Processor classes that take exactly one image per prompt and have no chat template."""


def single_image(processor: Any) -> bool:
    """Whether the processor belongs to a family that takes one image per prompt (InstructBLIP, BLIP-2)."""
    return type(processor).__name__ in SINGLE_IMAGE_PROCESSORS


VIDEO_FRAMES_PROCESSORS = ("VideoBlipProcessor",)
"""Processors that take a video as the conversation's list of frames (``images=``), one video per prompt."""


def video_support(processor: Any) -> str | None:
    """Why a processor cannot take a video clip, or None when it can.

    A processor takes one when it has a video processor (``videos=``: LLaVA-NeXT-Video,
    LLaVA-OneVision, Qwen2-VL and others) or is vhd's InstructBLIP-Video processor (the clip's
    frames as its video).
    """
    if type(processor).__name__ in VIDEO_FRAMES_PROCESSORS or getattr(processor, "video_processor", None) is not None:
        return None
    return f"its processor ({type(processor).__name__}) takes no video"


def video_key(messages: Sequence[Message]) -> tuple[int, ...]:
    """The frame count of each clip of a conversation: calls batched together must agree on it."""
    return tuple(v.frames for m in messages for v in m.videos)


def group_key(config: GenerateConfig) -> tuple[Any, ...]:
    """Decoding settings that must be equal for two calls to share one ``generate``."""
    return (
        config.max_tokens,
        config.temperature,
        config.top_p,
        config.seed,
        config.logprobs,
        config.top_logprobs,
        config.stop,
    )


def _cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


@dataclass
class Prepared:
    """One conversation rendered for the processor.

    Attributes:
        prompt: The chat-template text.
        images: Decoded images in conversation order.
        videos: Decoded clips (each a list of frames) in conversation order.
    """

    prompt: str
    images: list[Any]
    videos: list[list[Any]] = field(default_factory=list)


def prepare(processor: Any, messages: Sequence[Message], cache: PreprocessCache | None = None) -> Prepared:
    """Render the prompt and decode the images of one conversation.

    With a ``cache``, an image already decoded for an earlier call is the same object again.

    Raises:
        BackendError: The template cannot render it or an image cannot be decoded.
    """
    prompt = render_prompt(processor, messages)
    count = sum(len(m.images) for m in messages)
    if count != 1 and single_image(processor):
        raise BackendError(
            f"hf: {type(processor).__name__} models take exactly one image per prompt, this conversation has "
            f"{count}; judge video frames one by one (or use a multi-image model)"
        )
    try:
        images = [im.to_pil() if cache is None else cache.pil(im) for m in messages for im in m.images]
        videos = [clip.to_frames() for m in messages for clip in m.videos]
    except Exception as exc:
        raise BackendError(f"hf: cannot decode an image or a clip of the conversation: {exc}") from exc
    if videos and type(processor).__name__ in VIDEO_FRAMES_PROCESSORS:
        if images or len(videos) > 1:
            raise BackendError(
                f"hf: {type(processor).__name__} takes one video per prompt and no images besides it, this "
                f"conversation has {len(videos)} clip(s) and {len(images)} image(s); use --video-input frames"
            )
        return Prepared(prompt, videos[0])  # the clip's frames are the model's video input
    return Prepared(prompt, images, videos)


def generate_group(loaded: LoadedModel, items: Sequence[Prepared], config: GenerateConfig) -> list[Output]:
    """Run prepared conversations that share ``config`` as one left-padded ``generate`` call.

    Returns:
        One `Output` per conversation (``latency_s`` and ``model`` left for the caller).
    """
    import torch

    processor, model = loaded.processor, loaded.model
    tokenizer = processor.tokenizer
    prompts = [item.prompt for item in items]
    kwargs: dict[str, Any] = {"text": prompts, "padding": True, "return_tensors": "pt"}
    if single_image(processor):
        kwargs["images"] = [item.images[0] for item in items]  # one each (`prepare` checked)
    elif any(item.images for item in items):
        kwargs["images"] = [item.images for item in items]
    if any(item.videos for item in items):
        kwargs["videos"] = [video for item in items for video in item.videos]
    bos = tokenizer.bos_token
    if bos and all(p.startswith(bos) for p in prompts):
        kwargs["add_special_tokens"] = False  # the template wrote it already
    began = time.perf_counter()
    inputs = _to_device(processor(**kwargs), loaded.device, loaded.dtype)
    prepared = time.perf_counter()

    gen: dict[str, Any] = {
        **loaded.generate_kwargs,
        "max_new_tokens": config.max_tokens,
        "return_dict_in_generate": True,
        "output_logits": config.logprobs,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if config.temperature > 0:
        gen.update(do_sample=True, temperature=config.temperature)
        if config.top_p is not None:
            gen["top_p"] = config.top_p
    else:
        gen.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    if config.stop:
        gen.update(stop_strings=list(config.stop), tokenizer=tokenizer)
    if config.seed is not None:
        torch.manual_seed(config.seed)
    with torch.inference_mode():
        out = model.generate(**inputs, **gen)
    stats = loaded.stats
    stats.preprocess_s += prepared - began
    stats.generate_s += time.perf_counter() - prepared
    stats.calls += len(items)
    stats.batches += 1

    encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
    start = 1 if encoder_decoder else inputs["input_ids"].shape[1]
    new_tokens = out.sequences[:, start:].tolist()
    mask = inputs.get("attention_mask")
    prompt_tokens = (
        mask.sum(dim=1) if mask is not None else inputs["input_ids"].ne(tokenizer.pad_token_id).sum(dim=1)
    ).tolist()
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    pad_id = tokenizer.pad_token_id
    first_logprobs = _first_token_logprobs(out, tokenizer, config) if config.logprobs else None

    outputs = []
    for row, tokens in enumerate(new_tokens):
        end = next((i + 1 for i, t in enumerate(tokens) if t in eos_ids), None)
        ended = end is not None
        if end is None:
            end = len(tokens)
            while end and tokens[end - 1] == pad_id:
                end -= 1  # rows finished early (stop string) are padded
        text = tokenizer.decode(tokens[:end], skip_special_tokens=True)
        text, stopped = _cut_at_stop(text, config.stop)
        finish = "stop" if ended or stopped or end < config.max_tokens else "length"
        outputs.append(
            Output(
                text=text,
                prompt_tokens=int(prompt_tokens[row]),
                completion_tokens=end,
                first_token_logprobs=first_logprobs[row] if first_logprobs else None,
                finish_reason=finish,
                extra={"batch_size": len(items)},
            )
        )
    return outputs


def _to_device(inputs: Mapping[str, Any], device: Any, dtype: Any) -> dict[str, Any]:
    """Move tensors to ``device``; floating-point ones (pixels) also to the model's dtype."""
    import torch

    moved: dict[str, Any] = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor):
            value = value.to(device, dtype=dtype) if value.is_floating_point() else value.to(device)
        moved[key] = value
    return moved


def _first_token_logprobs(out: Any, tokenizer: Any, config: GenerateConfig) -> list[dict[str, float]]:
    import torch

    logits = out.logits[0].float()  # raw scores of the first step, before any warper
    logprobs = torch.log_softmax(logits, dim=-1)
    k = max(1, min(config.top_logprobs, logprobs.shape[-1]))
    values, indices = logprobs.topk(k, dim=-1)
    rows = []
    for vals, ids in zip(values.tolist(), indices.tolist(), strict=True):
        alternatives: dict[str, float] = {}
        for value, token_id in zip(vals, ids, strict=True):
            alternatives.setdefault(tokenizer.decode([token_id]), value)
        rows.append(alternatives)
    return rows
