"""Vision features cached per sample, for training on center crops (``--cache-vision``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vhd.backends.soft_prompt import SoftPrompt
from vhd.errors import ConfigError


class VisionCache:
    """The vision features of each sample, computed once (center crops only)."""

    def __init__(self, soft: SoftPrompt) -> None:
        import inspect

        model = soft.loaded.model
        forward_params = inspect.signature(model.forward).parameters
        if "mm_encoder_outputs" not in forward_params or not hasattr(model, "get_image_features"):
            raise ConfigError(f"--cache-vision is not supported for {type(model).__name__}: train without it")
        self.soft = soft
        self.keys = set(inspect.signature(model.get_image_features).parameters) - {"input_ids"}
        self.rows: dict[str, list[Any]] = {}
        self.as_tensor = False

    def features(self, ids: Sequence[str], batch: dict[str, Any]) -> Any:
        """The pooled vision features of a batch's samples (computed for the ones not seen yet)."""
        import torch

        missing = [k for k, sid in enumerate(ids) if sid not in self.rows]
        if missing:
            args = {k: v for k, v in batch.items() if k in self.keys or k == "pixel_values"}
            with torch.no_grad():
                out = self.soft.loaded.model.get_image_features(**args, return_dict=True).pooler_output
            self.as_tensor = isinstance(out, torch.Tensor)
            per_image = list(out)
            per_sample = len(per_image) // len(ids)
            for k in missing:
                self.rows[ids[k]] = [t.detach() for t in per_image[k * per_sample : (k + 1) * per_sample]]
        rows = [t for sid in ids for t in self.rows[sid]]
        from types import SimpleNamespace

        pooled: Any = torch.stack(rows) if self.as_tensor else rows
        return SimpleNamespace(pooler_output=pooled, qformer_outputs=None, vision_outputs=None)
