"""Text-only models for the ``hf`` backend: a causal LM and its tokenizer, behind the processor interface.

When ``hf:MODEL`` names a model transformers does not map to ``AutoModelForImageTextToText`` but
does map to ``AutoModelForCausalLM`` (Qwen2.5-Instruct, Llama-3-Instruct...), the backend loads it
with ``AutoTokenizer`` + ``AutoModelForCausalLM``. `TextProcessor` gives the tokenizer the face
of a processor (``.tokenizer``, ``apply_chat_template`` on content lists, ``__call__(text=...)``),
so batching and decoding in `vhd.backends.hf_batch` stay one code path. Requests with images
fail per call with a clear message.
"""

from __future__ import annotations

from typing import Any

from vhd.errors import BackendError


def is_text_only(path: str, common: dict[str, Any]) -> bool:
    """Whether ``path`` is a causal language model without a vision part (reads its config only)."""
    import transformers
    from transformers.models.auto import modeling_auto

    try:
        config = transformers.AutoConfig.from_pretrained(path, **common)
    except Exception:
        return False  # the normal path reports why it cannot load
    model_type = getattr(config, "model_type", "")
    return (
        model_type not in modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
        and model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    )


class TextProcessor:
    """A tokenizer with a processor's interface, for text-only chat models.

    Args:
        tokenizer: A transformers tokenizer with a chat template.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.chat_template = getattr(tokenizer, "chat_template", None)

    def apply_chat_template(self, chat: list[dict[str, Any]], **kwargs: Any) -> Any:
        """Render a conversation whose contents are part lists (text parts joined)."""
        flat = []
        for turn in chat:
            content = turn["content"]
            if isinstance(content, list):
                if any(part.get("type") != "text" for part in content):
                    raise BackendError("hf: this model reads text only; it cannot take images", retryable=False)
                content = "".join(part["text"] for part in content)
            flat.append({"role": turn["role"], "content": content})
        return self.tokenizer.apply_chat_template(flat, **kwargs)

    def __call__(self, text: Any = None, images: Any = None, **kwargs: Any) -> Any:
        """Tokenize prompts; images are refused."""
        if images:
            raise BackendError("hf: this model reads text only; it cannot take images", retryable=False)
        return self.tokenizer(text, **kwargs)


def load_text_model(
    path: str, common: dict[str, Any], dtype: Any, device: str, extra: dict[str, Any]
) -> tuple[Any, Any]:
    """Load ``(TextProcessor, model)`` for a text-only chat model."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(path, **common)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, device_map=device, **common, **extra)
    return TextProcessor(tokenizer), model
