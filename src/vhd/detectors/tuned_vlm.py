"""A prompt-tuned VLM (``tuned-vlm:CKPT_DIR``): the base model with a learned S* spliced in.

``CKPT_DIR`` is a ``vhd tune --out`` folder. The base model it names loads through the ``hf``
backend's loader, S* is spliced in (`vhd.backends.soft_prompt`), and each sample is asked the
checkpoint's question ("Is the given image harmful S*?", video: "Is this video harmful S*?" over
numbered frames). The decision is P(yes) >= threshold, with P(yes) the softmax of the first
answer token's logits over the yes/no token sets; generated text is never parsed. Models that
take one image per prompt (InstructBLIP) judge a video frame by frame (harmful when any frame is).

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    threshold: Lowest P(yes) that counts as harmful (default 0.5).
    base: Load this base model instead of the one the checkpoint names (a moved directory).
    device, dtype, revision, local_files_only: As for the ``hf`` backend.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.detectors.base import Detector, Prediction, combine_frames
from vhd.detectors.vlm import parse_options
from vhd.errors import ConfigError, VhdError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind


class TunedVLMOptions(BaseModel):
    """Options of the ``tuned-vlm`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    base: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    revision: str | None = None
    local_files_only: bool | None = None


class TunedVLMDetector(Detector):
    """A base VLM plus a learned S*, scored by P(yes) from the first answer token's logits."""

    name = "tuned-vlm"
    video_native = True

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if not model:
            raise ConfigError(f"detector {label}: tuned-vlm needs a checkpoint folder, e.g. tuned-vlm:ckpt/")
        self.opts: TunedVLMOptions = parse_options(label, self.options, TunedVLMOptions)
        from vhd.backends.soft_prompt_ckpt import read_checkpoint

        self.vector, self.meta = read_checkpoint(model)
        self._lock = threading.Lock()
        self._soft: Any = None

    def identity(self) -> dict[str, Any]:
        """The checkpoint (its vector's hash), base model, prompts, threshold and dtype."""
        import hashlib

        from vhd.backends.soft_prompt_ckpt import VECTOR_FILE

        digest = hashlib.sha256((Path(str(self.model)) / VECTOR_FILE).read_bytes()).hexdigest()
        return {
            "name": self.name,
            "vector": digest,
            "base": self.opts.base or self.meta.base_model,
            "revision": self.opts.revision or self.meta.revision,
            "prompts": self.meta.prompts,
            "side": self.meta.side,
            "threshold": self.opts.threshold,
            "dtype": self.opts.dtype,
        }

    def load(self) -> Any:
        """Load the base model and splice S* in (once)."""
        with self._lock:
            if self._soft is None:
                from vhd.backends.hf import load_model
                from vhd.backends.soft_prompt import splice

                hf: dict[str, Any] = {"device": self.opts.device, "dtype": self.opts.dtype}
                revision = self.opts.revision or self.meta.revision
                if revision:
                    hf["revision"] = revision
                if self.opts.local_files_only is not None:
                    hf["local_files_only"] = self.opts.local_files_only
                loaded = load_model(self.opts.base or self.meta.base_model, hf)
                self._soft = splice(loaded, self.meta.token, self.vector)
            return self._soft

    async def check(self) -> None:
        """Load the base model now, so a missing one fails before any work."""
        await asyncio.to_thread(self.load)

    async def aclose(self) -> None:
        """Drop the model."""
        self._soft = None

    def probability(self, kind: Kind, images: Sequence[EncodedImage]) -> float:
        """P(yes) for one image, or a video's frames together."""
        from vhd.backends.soft_prompt import prepare_image, render_question, score

        soft = self.load()
        pictures = [prepare_image(im.to_pil(), self.meta.side, "center") for im in images]
        prompt = render_question(soft.loaded.processor, self.meta.question(kind.value), len(pictures))
        with self._lock:
            return score(soft, [prompt], [pictures])[0]

    def judge(self, p: float) -> Prediction:
        """The decision for P(yes)."""
        return Prediction(p >= self.opts.threshold, score=p, raw=f"P(yes)={p:.4f}")

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image or a video (frame by frame where the model takes one image per prompt)."""
        from vhd.backends.hf_batch import single_image

        start = time.perf_counter()
        soft = await asyncio.to_thread(self.load)
        if kind is Kind.VIDEO and len(images) > 1 and single_image(soft.loaded.processor):
            frames = [await self.predict_images(Kind.IMAGE, [im]) for im in images]
            pred = combine_frames(frames)
        else:
            try:
                pred = self.judge(await asyncio.to_thread(self.probability, kind, images))
            except VhdError:
                raise
            except Exception as exc:
                pred = Prediction(None, error=f"tuned-vlm failed: {type(exc).__name__}: {exc}")
        pred.latency_s = time.perf_counter() - start
        return pred
