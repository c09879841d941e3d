"""LlavaGuard's policy assessment over any model backend (``llavaguard:BACKEND:MODEL``).

``llavaguard:hf:AIML-TUDA/LlavaGuard-v1.2-0.5B-OV-hf`` runs a LlavaGuard checkpoint locally;
``llavaguard:openai:MODEL`` asks any OpenAI-compatible endpoint (a served LlavaGuard, or any VLM
told to follow the same policy). The image is shown with the O1-O9 policy prompt
(`vhd.detectors.llavaguard_policy`); the JSON answer's rating decides (``Unsafe`` is harmful)
and its O-category maps to VHD11K codes through the bench crosswalk (``llavaguard`` scheme).
Unreadable answers give ``harmful=None`` and an error. Videos are judged frame by frame.

With the option ``policy`` the prompt renders a deployer's policy file instead of O1-O9
(`vhd.detectors.policy_text`): its categories as ``O1``, ``O2``, ... with their ``forbids`` under
"Should not" and their exceptions (``allows``, then the policy-wide ones) under "Can", the
layout LlavaGuard's own policy uses; the answer's category is then reported as the policy's
category (its code in ``categories``, its id in ``labels``).

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    policy: A policy file (YAML or TOML; ``vhd11k`` for the packaged default) to render.
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
from vhd.detectors.policy_text import load_detector_policy, policy_identity, policy_rows
from vhd.media.encoded import EncodedImage

SCHEME = "llavaguard"
"""The crosswalk scheme of LlavaGuard's O1-O9 categories."""


class LlavaGuardOptions(BaseModel):
    """Options of the ``llavaguard`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: str | None = None
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

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        self.policy = load_detector_policy(label, self.opts.policy)
        self.prompt = policy_prompt(self.policy)
        self.rows = {f"O{row.number}": row for row in policy_rows(self.policy)} if self.policy else {}

    def prompt_identity(self) -> dict[str, Any]:
        """The policy prompt's text (and the policy's name and hash, where one is rendered)."""
        return {"prompt_text": self.prompt, **policy_identity(self.policy)}

    def messages(self, images: Sequence[EncodedImage]) -> list[Message]:
        """The conversation for one image: the image, then the policy prompt (as LlavaGuard was tuned)."""
        return [Message("user", (*images, self.prompt))]

    def read(self, text: str, logprobs: Mapping[str, float] | None = None) -> Prediction:
        """Turn an answer into a prediction (the rating decides; ``logprobs`` are not used)."""
        try:
            verdict = parse_assessment(text, {k: row.title for k, row in self.rows.items()} if self.policy else None)
        except UnreadableAnswer as exc:
            return Prediction(None, raw=text, error=f"unparsed: {exc}")
        if not verdict.unsafe:
            return Prediction(False, score=0.0, raw=text)
        if self.policy is not None:
            row = self.rows.get(verdict.category or "")
            named = ({row.category.id: 1.0}, [row.code]) if row else ({}, [])
            return Prediction(True, score=1.0, labels=named[0], categories=named[1], raw=text)
        labels = {verdict.category: 1.0} if verdict.category else {}
        categories = self.crosswalk.to_vhd(SCHEME, labels) if labels else []
        return Prediction(True, score=1.0, labels=labels, categories=categories, raw=text)
