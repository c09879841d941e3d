"""LlavaGuard's safety policy (categories O1-O9) in vhd's own words, and reading its JSON answer.

LlavaGuard (Helff et al., 2024) was tuned to answer a policy prompt with a JSON object::

    {"rating": "Safe" | "Unsafe", "category": "O3: Sexual Content" | ... | "NA: None applying",
     "rationale": "..."}

The category labels below are the ones the model was trained to emit; the descriptions are
paraphrased. `parse_assessment` reads the object out of whatever the model wrote: code fences,
text around it, single quotes, Python literals, trailing commas.

A deployer's own policy (`vhd.policy.Policy`) renders in the layout LlavaGuard's policies use
(``Ox: Name.``, then ``Should not:`` and ``Can:`` lists): `policy_prompt(policy)` numbers its
categories ``O1``, ``O2``, ... in order, lists each category's ``forbids`` under ``Should not``
and its ``allows`` (with the policy-wide exceptions) under ``Can``, and asks for one of those
labels; `policy_codes(policy)` is what `parse_assessment` then accepts.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vhd.policy import Policy

CATEGORIES: dict[str, str] = {
    "O1": "Hate, Humiliation, Harassment",
    "O2": "Violence, Harm, or Cruelty",
    "O3": "Sexual Content",
    "O4": "Nudity Content",
    "O5": "Criminal Planning",
    "O6": "Weapons or Substance Abuse",
    "O7": "Self-Harm",
    "O8": "Animal Cruelty",
    "O9": "Disasters or Emergencies",
}
"""LlavaGuard's policy categories, code -> the label the model emits after ``"Ox: "``."""

NONE_APPLYING = "NA: None applying"

_RULES: dict[str, tuple[str, str]] = {
    "O1": (
        "content that spreads hatred, demeaning stereotypes or contempt against people for traits such as "
        "race, ethnicity, religion, nationality, sex, gender, sexual orientation, disability or age, or that "
        "humiliates, harasses or bullies them",
        "content that discusses discrimination, educates about it or shows historical events involving it",
    ),
    "O2": (
        "content that plans, incites, glorifies or shows acts of violence, torture, abuse, terrorism or cruelty "
        "against people",
        "content that informs or educates about violence, such as news, history or prevention",
    ),
    "O3": (
        "sexually explicit content: sexual acts, pornography, or sexually suggestive depictions meant to arouse",
        "content about sexuality, sex education or reproductive health that is not explicit",
    ),
    "O4": (
        "visible genitalia, exposed breasts or nudity presented in a sexual or gratuitous way",
        "artistic, medical or educational nudity without sexual emphasis",
    ),
    "O5": (
        "content that helps plan or carry out crimes such as theft, kidnapping, fraud or trafficking, or "
        "encourages people to commit them",
        "content about crime for understanding, reporting or prevention, without operational detail",
    ),
    "O6": (
        "content that promotes or helps misuse weapons, explosives or illegal drugs, or encourages abuse of "
        "alcohol, tobacco or other substances",
        "content showing weapons or substances in lawful, historical, educational or non-glorifying contexts",
    ),
    "O7": (
        "content that encourages, glorifies or gives instructions for self-harm, suicide or eating disorders",
        "content that raises awareness of self-harm or points people towards help",
    ),
    "O8": (
        "content that shows, encourages or glorifies the abuse, torture or needless suffering of animals",
        "content about animal welfare, lawful hunting or farming shown without cruelty, or education",
    ),
    "O9": (
        "content that exploits or sensationalises disasters, accidents or emergencies and the suffering of the "
        "people involved, including graphic depictions of victims",
        "factual coverage of disasters and emergencies, and content about safety, relief or preparation",
    ),
}


def policy_codes(policy: Policy) -> dict[str, str]:
    """A policy's categories as LlavaGuard labels: ``O1`` -> the first category's name, in order."""
    from vhd.detectors.policy_text import policy_rows

    return {f"O{row.number}": row.title for row in policy_rows(policy)}


def _steps(codes: Mapping[str, str]) -> str:
    categories = "|".join(f'"{code}: {name}"' for code, name in codes.items())
    return (
        "Assessment steps:\n"
        '1. Give a safety "rating": "Unsafe" if the content breaks the policy, otherwise "Safe".\n'
        f'2. Give the policy "category" that applies; if none does, give "{NONE_APPLYING}".\n'
        '3. Give a short "rationale" that names the category and explains the rating.\n'
        "Answer with JSON in this form only:\n"
        f'{{"rating": str<"Unsafe"|"Safe">, "category": str<{categories}|"{NONE_APPLYING}">, "rationale": str}}'
    )


def _policy_prompt(policy: Policy) -> str:
    from vhd.detectors.policy_text import policy_rows, sentence

    lines = [
        f"Assess the safety of the image provided by the user against the policy below ({policy.name}, "
        f"version {policy.version}). For each category, what the image should not show is listed first, then "
        "what it can show: content that a category allows does not break that category.",
    ]
    for row in policy_rows(policy):
        cat = row.category
        forbids = cat.forbids or [cat.description]
        block = [f"O{row.number}: {sentence(row.title)}"]
        if cat.forbids:
            block.append(sentence(cat.description))
        block += ["Should not:", *(f"- {sentence(item)}" for item in forbids)]
        if row.allows:
            block += ["Can:", *(f"- {sentence(item)}" for item in row.allows)]
        lines.append("\n".join(block))
    lines.append(_steps(policy_codes(policy)))
    return "\n\n".join(lines)


def policy_prompt(policy: Policy | None = None) -> str:
    """The policy prompt sent after the image (LlavaGuard's structure, vhd's wording).

    Args:
        policy: A deployer's policy to render instead of LlavaGuard's own O1-O9 (None: those).
    """
    if policy is not None:
        return _policy_prompt(policy)
    lines = [
        "Assess the safety of the image provided by the user against the policy below. For each category, "
        "content that it must not contain is listed first, then content that is allowed.",
    ]
    for code, name in CATEGORIES.items():
        must_not, may = _RULES[code]
        lines.append(f"{code}: {name}:\nMust not contain: {must_not}.\nMay contain: {may}.")
    lines.append(_steps(CATEGORIES))
    return "\n\n".join(lines)


@dataclass(frozen=True)
class Assessment:
    """What a LlavaGuard answer says.

    Attributes:
        unsafe: True for "Unsafe", False for "Safe".
        category: The policy code (``O1``-``O9``, or a rendered policy's ``O<n>``), or None for
            "NA" or an unrecognised category.
        rationale: The model's explanation, when given.
    """

    unsafe: bool
    category: str | None
    rationale: str | None


class UnreadableAnswer(ValueError):
    """The answer holds no readable assessment; the message says why in one line."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_CODE = re.compile(r"\bO\s*([1-9][0-9]?)\b", re.IGNORECASE)
_RATING = re.compile(r"""["']?rating["']?\s*[:=]\s*["']?\s*(unsafe|safe)\b""", re.IGNORECASE)
_CATEGORY = re.compile(r"""["']?category["']?\s*[:=]\s*["']([^"'\n]*)""", re.IGNORECASE)


def _objects(text: str) -> list[str]:
    """Candidate ``{...}`` spans: fenced blocks first, then balanced braces anywhere."""
    found = [m.group(1).strip() for m in _FENCE.finditer(text)]
    depth, start = 0, -1
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'" and depth > 0:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def _load(candidate: str) -> dict[str, Any] | None:
    raw = candidate.strip()
    cleaned = re.sub(r",\s*([}\]])", r"\1", raw)  # trailing commas
    for text in dict.fromkeys((raw, cleaned)):
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, dict):
                return {str(k).strip().lower(): v for k, v in value.items()}
    return None


def _category_code(value: Any, codes: Mapping[str, str]) -> str | None:
    if not isinstance(value, str):
        return None
    match = _CODE.search(value)
    if match:
        code = f"O{match.group(1)}"
        return code if code in codes else None
    lowered = value.lower()
    for code, name in codes.items():
        if name.lower() in lowered:
            return code
    return None


def _rating(value: Any) -> bool | None:
    if not isinstance(value, str):
        return None
    word = value.strip().strip(".!\"'").lower()
    return {"unsafe": True, "safe": False}.get(word)


def parse_assessment(text: str, codes: Mapping[str, str] | None = None) -> Assessment:
    """Read LlavaGuard's JSON answer.

    Args:
        text: The model's whole answer.
        codes: The labels the prompt offered (`policy_codes` of a rendered policy); default
            LlavaGuard's own `CATEGORIES`. A category outside them is read as None.

    Returns:
        The assessment.

    Raises:
        UnreadableAnswer: No rating could be found.
    """
    known = CATEGORIES if codes is None else codes
    for candidate in _objects(text):
        data = _load(candidate)
        if data is None:
            continue
        unsafe = _rating(data.get("rating"))
        if unsafe is None:
            continue
        rationale = data.get("rationale")
        return Assessment(unsafe, _category_code(data.get("category"), known), str(rationale) if rationale else None)
    # Broken JSON (cut off, unescaped quotes): fall back to the key patterns themselves.
    rating = _RATING.search(text)
    if rating is None:
        snippet = " ".join(text.split())[:120]
        raise UnreadableAnswer(f"no LlavaGuard rating in the answer: {snippet!r}")
    category = _CATEGORY.search(text)
    return Assessment(
        rating.group(1).lower() == "unsafe", _category_code(category.group(1), known) if category else None, None
    )
