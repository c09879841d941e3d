"""A policy as the text models read: the definition with categories and exceptions, the severity request.

The debate's prompts (`vhd.debate.prompts.Prompts`) put `policy_text` where a template says
``$definition`` and `severity_instruction` where the judge's says ``$severity`` (or after the
template when it has no such place). The text never names the policy or its version, so two
versions that say the same thing ask the models the same question.
"""

from __future__ import annotations

from vhd.policy.model import Medium, Policy, PolicyCategory


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _category_block(cat: PolicyCategory) -> str:
    lines = [f"- {cat.title}: {_sentence(cat.description)}"]
    if cat.forbids:
        lines.append(f"  Not allowed: {'; '.join(cat.forbids)}.")
    if cat.allows:
        lines.append(f"  Allowed (an exception: not harmful under this category): {'; '.join(cat.allows)}.")
    return "\n".join(lines)


def policy_text(policy: Policy, medium: Medium) -> str:
    """What counts as harmful under ``policy``, for one medium: definition, categories, exceptions.

    Args:
        policy: The policy.
        medium: ``"image"`` or ``"video"`` (a definition may differ by medium).

    Returns:
        Plain text, paragraphs separated by blank lines.
    """
    parts: list[str] = []
    definition = policy.definition_for(medium).strip()
    if definition:
        parts.append(definition)
    noun = "an image" if medium == "image" else "a video"
    parts.append(
        f"The policy names these categories of harm. {noun[0].upper()}{noun[1:]} is harmful when its content falls "
        "under one of them, unless an exception covers it:\n" + "\n".join(_category_block(c) for c in policy.categories)
    )
    if policy.allows:
        parts.append("Exceptions for every category (content they cover is not harmful):\n" + _bullets(policy.allows))
    return "\n\n".join(parts)


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {_sentence(item)}" for item in items)


def severity_instruction(policy: Policy | None) -> str:
    """The judge's request for a severity level, or ``""`` when the policy has no scale."""
    if policy is None or not policy.severity:
        return ""
    levels = "\n".join(f"- {level.name}: {level.meaning}" for level in policy.severity)
    return (
        'When your answer is Yes, also write a second line "Severity: <level>" (the one other line allowed), '
        f"naming one level of this scale (mildest first):\n{levels}"
    )


def exceptions(policy: Policy) -> list[str]:
    """Every exception of the policy: the ones for all categories, then each category's, in order."""
    return [*policy.allows, *(a for c in policy.categories for a in c.allows)]
