"""InstructBLIP-Video inputs without the torchvision-backed video processor.

transformers' ``InstructBlipVideoProcessor`` needs ``InstructBlipVideoVideoProcessor``, which
imports torchvision, and always writes the video tokens of exactly 4 frames. The model itself
(`InstructBlipVideoForConditionalGeneration`) takes ``pixel_values`` of shape
``[batch, frames, 3, H, W]``, runs the vision tower and the Q-Former per frame, and expects
``num_query_tokens * frames`` video tokens in ``input_ids``. `VideoBlipProcessor` builds exactly
that from the checkpoint's tokenizer, Q-Former tokenizer (``qformer_tokenizer/``) and image
processor (``preprocessor_config.json``, applied to each frame and stacked), for any frame count.
`vhd.backends.hf.load_model` uses it for every ``instructblipvideo`` checkpoint, with or without
torchvision, so training and scoring see the same inputs everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vhd.errors import BackendError, BackendUnavailableError

MODEL_TYPE = "instructblipvideo"
"""The ``model_type`` of InstructBLIP-Video checkpoints."""

VIDEO_TOKEN = "<video>"
"""The placeholder token the Q-Former's outputs replace (added to the tokenizer when missing)."""


class VideoBlipProcessor:
    """Tokenizers and image processor of an InstructBLIP-Video checkpoint, called like a processor.

    Attributes:
        tokenizer: The language model's tokenizer (``<video>`` added when missing).
        qformer_tokenizer: The Q-Former's tokenizer.
        image_processor: The per-frame image processor.
        num_query_tokens: Q-Former query tokens per frame.
        video_token_id: The ``<video>`` token's id.
    """

    chat_template = "plain"  # the prompt is the question itself (`apply_chat_template`)

    def __init__(self, tokenizer: Any, qformer_tokenizer: Any, image_processor: Any, num_query_tokens: int) -> None:
        from transformers import AddedToken

        if VIDEO_TOKEN not in tokenizer.get_vocab():
            tokenizer.add_tokens([AddedToken(VIDEO_TOKEN, normalized=False, special=True)], special_tokens=True)
        self.tokenizer = tokenizer
        self.qformer_tokenizer = qformer_tokenizer
        self.image_processor = image_processor
        self.num_query_tokens = num_query_tokens
        self.video_token_id = int(tokenizer.convert_tokens_to_ids(VIDEO_TOKEN))

    def apply_chat_template(
        self, chat: Sequence[Any], add_generation_prompt: bool = True, tokenize: bool = False
    ) -> str:
        """The turns' text joined by newlines (InstructBLIP has no chat format; media parts are dropped)."""
        del add_generation_prompt, tokenize
        lines: list[str] = []
        for message in chat:
            content = message["content"]
            if isinstance(content, str):
                lines.append(content)
            else:
                lines.append("".join(c["text"] for c in content if c.get("type") == "text"))
        return "\n".join(lines)

    def pixel_values(self, videos: Sequence[Sequence[Any]]) -> Any:
        """``[batch, frames, 3, H, W]`` from PIL frames: the image processor per frame, stacked.

        Raises:
            BackendError: The videos of a batch have different frame counts, or one has none.
        """
        import torch

        counts = {len(v) for v in videos}
        if len(counts) != 1 or 0 in counts:
            raise BackendError(f"InstructBLIP-Video needs the same frame count in every video of a batch, got {counts}")
        rows = [self.image_processor(list(v), return_tensors="pt")["pixel_values"] for v in videos]
        return torch.stack(rows)

    def __call__(
        self,
        text: Sequence[str],
        images: Sequence[Sequence[Any]] | None = None,
        padding: bool = True,
        return_tensors: str = "pt",
        add_special_tokens: bool = True,
    ) -> dict[str, Any]:
        """Left-padded ``input_ids`` (video tokens first), Q-Former ids and ``pixel_values``.

        Args:
            text: One prompt per video.
            images: One list of PIL frames per prompt (a still image is a one-frame video).
            padding: Pad to the longest row (always done; kept for the processor signature).
            return_tensors: ``"pt"`` only.
            add_special_tokens: Let the tokenizers add BOS.
        """
        import torch

        del padding, return_tensors
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = self.tokenizer(list(text), add_special_tokens=add_special_tokens)["input_ids"]
        out: dict[str, Any] = {}
        if images is not None:
            out["pixel_values"] = self.pixel_values(images)
            lead = [self.video_token_id] * self.num_query_tokens * int(out["pixel_values"].shape[1])
            ids = [lead + list(row) for row in ids]
        width = max(len(row) for row in ids)
        out["input_ids"] = torch.tensor([[pad] * (width - len(row)) + list(row) for row in ids], dtype=torch.long)
        out["attention_mask"] = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids])
        q = self.qformer_tokenizer(list(text), add_special_tokens=add_special_tokens, padding=True, return_tensors="pt")
        out["qformer_input_ids"], out["qformer_attention_mask"] = q["input_ids"], q["attention_mask"]
        return out


def is_video_blip(path: str, common: dict[str, Any]) -> bool:
    """Whether ``path`` is an InstructBLIP-Video checkpoint (reads its config only)."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(path, **common)
    except Exception:
        return False  # the normal path reports why it cannot load
    return getattr(config, "model_type", "") == MODEL_TYPE


def load_processor(path: str, common: dict[str, Any]) -> VideoBlipProcessor:
    """The `VideoBlipProcessor` of a checkpoint: tokenizer, ``qformer_tokenizer/`` and image processor."""
    import transformers as tf

    transformers: Any = tf  # some Auto classes are untyped
    config = transformers.AutoConfig.from_pretrained(path, **common)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, **common)
    qformer = transformers.AutoTokenizer.from_pretrained(path, subfolder="qformer_tokenizer", **common)
    try:
        image_processor = transformers.AutoImageProcessor.from_pretrained(path, **common)
    except (OSError, ValueError):  # only a video processor config: the same settings, applied per frame
        image_processor = frame_processor(path, common)
    return VideoBlipProcessor(tokenizer, qformer, image_processor, int(config.num_query_tokens))


FRAME_SETTINGS = ("size", "resample", "do_resize", "do_rescale", "rescale_factor", "do_normalize", "image_mean")
"""Settings a video processor config shares with BLIP's image processor (plus ``image_std``, ``do_convert_rgb``)."""


def frame_processor(path: str, common: dict[str, Any]) -> Any:
    """A BLIP image processor with the settings of the checkpoint's ``video_preprocessor_config.json``.

    Raises:
        BackendUnavailableError: The checkpoint has neither an image nor a video processor config.
    """
    import json

    import transformers as tf

    hub: Any = tf.utils
    try:
        config_file = hub.cached_file(path, "video_preprocessor_config.json", **common)
    except OSError as exc:
        raise BackendUnavailableError(
            f"{path!r} has no preprocessor_config.json or video_preprocessor_config.json: "
            "save the image processor with the model"
        ) from exc
    settings = json.loads(Path(str(config_file)).read_text())
    keys = (*FRAME_SETTINGS, "image_std", "do_convert_rgb")
    blip: Any = tf.models.blip.BlipImageProcessorPil
    return blip(**{k: settings[k] for k in keys if k in settings})
