"""Meta's Llama Guard 4 as a harmfulness detector (``llamaguard:BACKEND:MODEL``).

Llama Guard 4 (12B, multimodal, pruned from Llama 4 Scout) classifies a conversation against the
MLCommons hazard taxonomy S1-S14 and answers ``safe``, or ``unsafe`` with a second line of
violated codes. ``llamaguard:openai:meta-llama/Llama-Guard-4-12B`` asks any OpenAI-compatible
server (vLLM, a hosted endpoint); ``llamaguard:hf:meta-llama/Llama-Guard-4-12B`` loads it with
transformers (``vhd[local]``). Videos are judged frame by frame.

Prompt (option ``prompt``):
    ``template`` (default): the message holds only the image and the model's own chat template
        writes Meta's task around it (Llama Guard 4's template does, on vLLM and in transformers).
    ``meta``: vhd writes Meta's format itself in the user message (task line, the S1-S14 block,
        the conversation with the image as the user's turn, the two-line answer instructions),
        for servers whose template does not (a generic VLM told to act as Llama Guard).

Score: P(unsafe) from the log-probabilities of the first answer token with visible text (the
``openai`` backend skips leading whitespace tokens), summing alternatives that spell the start
of ``unsafe`` against those of ``safe``; without log-probabilities, 1.0 for unsafe and 0.0 for
safe. Codes map to VHD11K's categories through the crosswalk's ``llama_guard`` scheme, where the
text-only hazards (S5, S6, S8, S13, S14) map nowhere for images.

A deployer's policy (option ``policy``): vhd writes Meta's format with the policy's categories
in place of S1-S14, numbered ``S1``, ``S2``, ... in the policy's order, each followed by its
description and, in the layout of Llama Guard's first policy, a ``Should not`` list (its
``forbids``) and a ``Can`` list (its ``allows``, then the policy-wide exceptions). The ``meta``
prompt is then the default (the ``template`` one lists the model's own categories, so it cannot
take a policy), and the answer's codes are reported as the policy's categories (their letter
codes in ``categories``, their ids in ``labels``). Llama Guard 4 was tuned on the bare S1-S14
list: it reads a category's name and description, but nothing makes it weigh a ``Can`` line, so
it honours exceptions at best partly (docs: "Writing a policy").

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    policy: A policy file (YAML or TOML; ``vhd11k`` for the packaged default) to render.
    prompt: ``template`` or ``meta`` (above; ``meta`` with a policy).
    categories: Codes to list in the ``meta`` prompt (default all fourteen).
    temperature: Sampling temperature (default 0).
    max_tokens: Cap on the answer's tokens (default 20).
    crosswalk: A crosswalk file of the packaged layout (default: vhd's own).
    backends: Backend tables as in the config file's ``[backends.*]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vhd.backends.base import Message, Part
from vhd.detectors.base import Prediction
from vhd.detectors.guard import GuardDetector
from vhd.detectors.policy_text import PolicyRow, load_detector_policy, policy_identity, policy_rows
from vhd.errors import ConfigError
from vhd.media.encoded import EncodedImage

if TYPE_CHECKING:
    from vhd.policy import Policy

SCHEME = "llama_guard"
"""The crosswalk scheme of the MLCommons hazard codes S1-S14."""

HAZARDS: dict[str, str] = {
    "S1": "Violent Crimes.",
    "S2": "Non-Violent Crimes.",
    "S3": "Sex Crimes.",
    "S4": "Child Exploitation.",
    "S5": "Defamation.",
    "S6": "Specialized Advice.",
    "S7": "Privacy.",
    "S8": "Intellectual Property.",
    "S9": "Indiscriminate Weapons.",
    "S10": "Hate.",
    "S11": "Self-Harm.",
    "S12": "Sexual Content.",
    "S13": "Elections.",
    "S14": "Code Interpreter Abuse.",
}
"""The MLCommons hazard categories as Llama Guard 4's default policy lists them."""

_CODE = re.compile(r"\bS([1-9][0-9]?)\b", re.IGNORECASE)
_STRIP = " \t\n\r*_`'\"“”.,:;!Ġ▁Ċ"


class LlamaGuardOptions(BaseModel):
    """Options of the ``llamaguard`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: str | None = None
    prompt: Literal["template", "meta"] = "template"
    categories: tuple[str, ...] = tuple(HAZARDS)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=20, ge=2)
    crosswalk: str | None = None
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("categories", mode="before")
    @classmethod
    def _codes(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            codes = [str(v).strip().upper() for v in value]
            unknown = [c for c in codes if c not in HAZARDS]
            if unknown or not codes:
                raise ValueError(f"unknown hazard {unknown[0] if unknown else ''!r}; valid: S1..S14")
            return tuple(dict.fromkeys(codes))
        return value


def policy_block(policy: Policy) -> str:
    """A policy's categories in Llama Guard's category block (``S<n>: Name.``, description, Should not / Can)."""
    from vhd.detectors.policy_text import policy_rows, sentence

    entries: list[str] = []
    for row in policy_rows(policy):
        cat = row.category
        lines = [f"S{row.number}: {sentence(row.title)}", sentence(cat.description)]
        if cat.forbids:
            lines += ["Should not", *(f" - {sentence(item)}" for item in cat.forbids)]
        if row.allows:
            lines += ["Can", *(f" - {sentence(item)}" for item in row.allows)]
        entries.append("\n".join(lines))
    return "\n".join(entries)


def meta_prompt(categories: Sequence[str] = tuple(HAZARDS), policy: Policy | None = None) -> tuple[str, str]:
    """Meta's Llama Guard task text around the user's turn: (before the image, after it).

    Args:
        categories: Which of the S1-S14 hazards to list (without a policy).
        policy: A deployer's policy whose categories are listed instead (`policy_block`).
    """
    block = policy_block(policy) if policy is not None else "\n".join(f"{code}: {HAZARDS[code]}" for code in categories)
    before = (
        "Task: Check if there is unsafe content in 'User' messages in conversations according to our safety "
        "policy with the below categories.\n\n"
        f"<BEGIN UNSAFE CONTENT CATEGORIES>\n{block}\n<END UNSAFE CONTENT CATEGORIES>\n\n"
        "<BEGIN CONVERSATION>\n\nUser: "
    )
    after = (
        "\n\n<END CONVERSATION>\n\n"
        "Provide your safety assessment for ONLY THE LAST User message in the above conversation:\n"
        " - First line must read 'safe' or 'unsafe'.\n"
        " - If unsafe, a second line must include a comma-separated list of violated categories."
    )
    return before, after


def unsafe_probability(logprobs: Mapping[str, float] | None) -> float | None:
    """P(unsafe) / (P(unsafe) + P(safe)) over one token's top alternatives.

    A token counts for ``unsafe`` when, normalised (case, spaces, tokenizer markers), it is a
    non-empty prefix of "unsafe" starting with "u" (``unsafe``, ``uns``, ``un``), and for
    ``safe`` when it is a non-empty prefix of "safe"; None when neither appears.
    """
    if not logprobs:
        return None
    unsafe = safe = 0.0
    for token, logprob in logprobs.items():
        if not math.isfinite(logprob):
            continue
        word = token.strip(_STRIP).lower()
        if word and word[0] == "u" and "unsafe".startswith(word):
            unsafe += math.exp(logprob)
        elif word and "safe".startswith(word):
            safe += math.exp(logprob)
    if unsafe + safe == 0.0:
        return None
    return unsafe / (unsafe + safe)


def read_answer(text: str, count: int = len(HAZARDS)) -> tuple[bool, list[str]] | None:
    """``(unsafe, codes)`` from a Llama Guard answer, or None when it is neither safe nor unsafe.

    Args:
        text: The answer.
        count: How many categories the prompt listed: codes past ``S<count>`` are dropped.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    first = lines[0].strip(_STRIP).lower()
    head = first.split()[0] if first.split() else ""
    if head.startswith("unsafe"):
        rest = " ".join([first[len("unsafe") :], *lines[1:]])
        found = (int(m.group(1)) for m in _CODE.finditer(rest))
        return True, list(dict.fromkeys(f"S{n}" for n in found if 1 <= n <= count))
    if head.startswith("safe"):
        return False, []
    return None


class LlamaGuardDetector(GuardDetector):
    """Ask Llama Guard 4 about each image; ``unsafe`` is harmful.

    ``labels`` holds ``{"S<n>": 1.0}`` for each violated code, ``categories`` their VHD11K codes,
    ``score`` P(unsafe) (see the module docstring).
    """

    name = "llamaguard"
    scheme = SCHEME
    example = "llamaguard:openai:meta-llama/Llama-Guard-4-12B or llamaguard:hf:meta-llama/Llama-Guard-4-12B"
    options_type = LlamaGuardOptions
    wants_logprobs = True
    opts: LlamaGuardOptions

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        self.policy = load_detector_policy(label, self.opts.policy)
        self.mode = self.opts.prompt
        self.rows: dict[str, PolicyRow] = {}
        if self.policy is not None:
            given = self.opts.model_fields_set
            if "prompt" in given and self.opts.prompt == "template":
                raise ConfigError(
                    f"detector {label}: prompt=template lists the model's own categories, so it cannot take a "
                    "policy: drop prompt (vhd then writes the policy in Meta's format) or drop policy"
                )
            if "categories" in given:
                raise ConfigError(
                    f"detector {label}: categories picks among S1-S14, a policy brings its own: drop one of them"
                )
            self.mode = "meta"
            self.rows = {f"S{row.number}": row for row in policy_rows(self.policy)}

    def prompt_identity(self) -> dict[str, Any]:
        """The prompt mode, and Meta's text where vhd writes it (and the policy, where one is rendered)."""
        return {
            "prompt": self.mode,
            "prompt_text": list(meta_prompt(self.opts.categories, self.policy)) if self.mode == "meta" else None,
            **policy_identity(self.policy),
        }

    def messages(self, images: Sequence[EncodedImage]) -> list[Message]:
        """The conversation for one image (see the module docstring's prompt modes)."""
        if self.mode == "template":
            return [Message("user", tuple(images))]
        before, after = meta_prompt(self.opts.categories, self.policy)
        parts: tuple[Part, ...] = (before, *images, after)
        return [Message("user", parts)]

    def read(self, text: str, logprobs: Mapping[str, float] | None) -> Prediction:
        """Turn an answer into a prediction."""
        answer = read_answer(text, len(self.rows) if self.policy is not None else len(HAZARDS))
        if answer is None:
            snippet = " ".join(text.split())[:120]
            return Prediction(None, raw=text, error=f"unparsed: {snippet!r} is neither safe nor unsafe")
        unsafe, codes = answer
        score = unsafe_probability(logprobs)
        if score is None:
            score = 1.0 if unsafe else 0.0
        if self.policy is not None:
            named = [self.rows[code] for code in codes]
            policy_labels = {row.category.id: 1.0 for row in named}
            return Prediction(unsafe, score=score, labels=policy_labels, categories=[r.code for r in named], raw=text)
        labels = dict.fromkeys(codes, 1.0)
        categories = self.crosswalk.to_vhd(SCHEME, codes) if codes else []
        return Prediction(unsafe, score=score, labels=labels, categories=categories, raw=text)
