"""What the detectors that take a policy text share: loading the ``policy`` option, the rows they render.

LlavaGuard, Llama Guard and ShieldGemma 2 read a moderation policy written in their prompt. With
the option ``policy`` (``--set LABEL.policy=FILE`` or ``[detectors.LABEL] policy = "FILE"``;
``vhd11k`` names the packaged default) each renders that policy's categories, in the layout the
model was tuned on, from the same `vhd.policy.Policy` that ``vhd annotate --policy`` renders the
debate's prompts from. Without the option each keeps its own built-in policy, unchanged.

The detector then names the policy's categories: an answer's category (LlavaGuard's ``O3``,
Llama Guard's ``S3``, ShieldGemma 2's policy key) is the policy's third category, reported
with its letter code (``Prediction.categories``) and its id (``Prediction.labels``); the
crosswalk of the model's own taxonomy is not used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError

if TYPE_CHECKING:
    from vhd.policy import Policy, PolicyCategory


@dataclass(frozen=True)
class PolicyRow:
    """One category of a policy as a detector renders it.

    Attributes:
        number: Its 1-based position (LlavaGuard's ``O<number>``, Llama Guard's ``S<number>``).
        code: Its letter code (what `Prediction.categories` holds).
        category: The category.
        allows: Its exceptions, then the policy-wide ones (each once).
    """

    number: int
    code: str
    category: PolicyCategory
    allows: tuple[str, ...]

    @property
    def title(self) -> str:
        """The category's name (its id when the policy gives none)."""
        return self.category.title


def load_detector_policy(label: str, path: str | None) -> Policy | None:
    """The policy a detector's ``policy`` option names (None without it).

    Raises:
        ConfigError: The file cannot be read or is invalid (the policy loader's one line, prefixed
            with the detector's label).
    """
    if path is None:
        return None
    from vhd.policy import load_policy

    try:
        return load_policy(path)
    except ConfigError as exc:
        raise ConfigError(f"detector {label}: {exc}") from None


def policy_rows(policy: Policy) -> list[PolicyRow]:
    """Each category of the policy with its number, its code and its exceptions (the policy-wide ones last)."""
    rows: list[PolicyRow] = []
    for number, (code, cat) in enumerate(zip(policy.codes(), policy.categories, strict=True), start=1):
        rows.append(PolicyRow(number, code, cat, tuple(dict.fromkeys([*cat.allows, *policy.allows]))))
    return rows


def policy_identity(policy: Policy | None) -> dict[str, Any]:
    """The policy's part of a detector's identity: nothing without one (the cache key stays as it was)."""
    if policy is None:
        return {}
    return {"policy": policy.key, "policy_hash": policy.content_hash}


def sentence(text: str) -> str:
    """``text`` ending with a full stop (unless it ends with ``.``, ``!`` or ``?``)."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."
