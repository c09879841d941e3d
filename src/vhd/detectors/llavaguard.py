"""LlavaGuard's policy assessment over any model backend (``llavaguard:BACKEND:MODEL``).

``llavaguard:hf:AIML-TUDA/LlavaGuard-v1.2-0.5B-OV-hf`` runs a LlavaGuard checkpoint locally;
``llavaguard:openai:MODEL`` asks any OpenAI-compatible endpoint (a served LlavaGuard, or any VLM
told to follow the same policy). The image is shown with the O1-O9 policy prompt
(`vhd.detectors.llavaguard_policy`); the JSON answer's rating decides (``Unsafe`` is harmful)
and its O-category maps to VHD11K codes through the bench crosswalk (``llavaguard`` scheme).
Unreadable answers give ``harmful=None`` and an error. Videos are judged frame by frame.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    temperature: Sampling temperature (default 0).
    max_tokens: Cap on the answer's tokens (default 300: the rationale takes room).
    crosswalk: A crosswalk file of the packaged layout (default: vhd's own).
    backends: Backend tables as in the config file's ``[backends.*]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.backends.base import Message
from vhd.detectors.base import Prediction
from vhd.detectors.guard import GuardDetector
from vhd.detectors.llavaguard_policy import UnreadableAnswer, parse_assessment, policy_prompt
from vhd.media.encoded import EncodedImage

SCHEME = "llavaguard"
"""The crosswalk scheme of LlavaGuard's O1-O9 categories."""


class LlavaGuardOptions(BaseModel):
    """Options of the ``llavaguard`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=300, ge=16)
    crosswalk: str | None = None
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)


class LlavaGuardDetector(GuardDetector):
    """Ask a model LlavaGuard's policy question about each image and read its JSON verdict.

    ``labels`` holds ``{"O<n>": 1.0}`` for the category named by an unsafe verdict;
    ``categories`` its VHD11K codes. The score is 1.0 for Unsafe and 0.0 for Safe (the answer
    starts with ``{``, so first-token probabilities say nothing about the rating).
    """

    name = "llavaguard"
    scheme = SCHEME
    example = "llavaguard:hf:AIML-TUDA/LlavaGuard-v1.2-0.5B-OV-hf or llavaguard:openai:MODEL"
    options_type = LlavaGuardOptions
    opts: LlavaGuardOptions

    def prompt_identity(self) -> dict[str, Any]:
        """The policy prompt's text."""
        return {"prompt_text": policy_prompt()}

    def messages(self, images: Sequence[EncodedImage]) -> list[Message]:
        """The conversation for one image: the image, then the policy prompt (as LlavaGuard was tuned)."""
        return [Message("user", (*images, policy_prompt()))]

    def read(self, text: str, logprobs: Mapping[str, float] | None = None) -> Prediction:
        """Turn an answer into a prediction (the rating decides; ``logprobs`` are not used)."""
        try:
            verdict = parse_assessment(text)
        except UnreadableAnswer as exc:
            return Prediction(None, raw=text, error=f"unparsed: {exc}")
        if not verdict.unsafe:
            return Prediction(False, score=0.0, raw=text)
        labels = {verdict.category: 1.0} if verdict.category else {}
        categories = self.crosswalk.to_vhd(SCHEME, labels) if labels else []
        return Prediction(True, score=1.0, labels=labels, categories=categories, raw=text)
