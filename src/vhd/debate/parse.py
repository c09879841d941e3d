"""Reading the judge's verdict and spotting refusals in model replies.

The judge is asked for "Yes, <harm category>." or "No, <reason>.". Models decorate that with
markdown, quotes, an "Answer:" label, missing commas or extra prose; this parser accepts those
and nothing looser, so an answer it cannot read is reported as unparsed, never guessed.

With a policy's severity scale the judge adds a level to a Yes: ``Severity: high``, ``severity 3``
(a 1-based position on the scale) or, in a JSON reply (``{"harmful": true, "reason": ...,
"severity": "high"}``), a ``severity`` key. `read_severity` returns the level as written; the
debate checks it against the scale (`vhd.policy.model.Policy.severity_level`).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

_DECORATION = re.compile(
    r"[*`#>\"“”\[\]]+"  # markdown emphasis, code, headings, quotes, brackets
    r"|(?<!\w)['‘’]|['‘’](?!\w)"  # single quotes, but not apostrophes
    r"|(?<!\w)_+|_+(?!\w)",  # markdown underscores, but not snake_case
)
_LABEL = re.compile(
    r"^\s*(?:(?:final|my|the)\s+)?(?:answer|verdict|decision|judge(?:ment)?|response|output|ruling)"
    r"\s*(?:is)?\s*[:\-–—=]?\s*",
    re.IGNORECASE,
)
_LEAD = re.compile(
    r"^\s*(?P<word>yes|no|not\s+harmful|unharmful|harmless|harmful)\b\s*[,.:;!\-–—]*\s*(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_EMBEDDED = re.compile(
    r"\b(?:final\s+)?(?:answer|verdict|decision)\s*(?:is)?\s*[:\-–—]\s*(?P<tail>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)])[.!?](?:\s|$)", re.IGNORECASE)

_REFUSAL = re.compile(
    r"(?:^|[.!]\s+)(?:"
    r"(?:i\s*(?:'|’)?m|i\s+am)\s+(?:really\s+|very\s+)?(?:sorry|afraid)\b[^.]{0,80}?\b(?:can(?:'|’)?t|cannot|can\s+not|unable|not\s+able|won(?:'|’)?t)"
    r"|i\s+(?:can(?:'|’)?t|cannot|can\s+not|won(?:'|’)?t|will\s+not|must\s+decline\s+to|am\s+unable\s+to|am\s+not\s+able\s+to)\s+"
    r"(?:help|assist|comply|provide|engage|participate|take\s+part|do\s+that|fulfil+|answer|evaluate|"
    r"analy[sz]e|discuss|debate|view|describe|identify|judge|continue|process|support|argue|make)"
    r"|(?:sorry|i\s+apologi[sz]e),?\s+(?:but\s+)?i\s+(?:can|am|won|will|must)"
    r"|as\s+an\s+ai\b[^.]{0,60}?\b(?:can(?:'|’)?t|cannot|unable|not\s+able|don(?:'|’)?t)"
    r"|i\s+must\s+(?:respectfully\s+)?decline"
    r")",
    re.IGNORECASE,
)


_SEVERITY = re.compile(  # "Severity: high", "severity level = 2", "severity 3"; not "severity of the injury"
    r"\bseverity(?:\s+level)?\s*(?:is\s*)?(?:[:=\-–—]\s*(?P<value>[^\n,;()]+)|(?P<number>\d+)\b)",
    re.IGNORECASE,
)


class ParsedVerdict(NamedTuple):
    """What could be read from a judge reply.

    Attributes:
        harmful: True for yes, False for no, None when the reply could not be read.
        reason: The category (yes) or reason (no), trimmed, without a final period.
    """

    harmful: bool | None
    reason: str


def _clean(text: str) -> str:
    return _DECORATION.sub("", text).strip()


def _first_reason(rest: str) -> str:
    rest = rest.strip()
    line = rest.splitlines()[0] if rest else ""
    match = _SENTENCE_END.search(line)
    if match:
        line = line[: match.start()]
    return line.strip(" \t,.;:-–—").strip()


def parse_verdict(text: str) -> ParsedVerdict:
    """Read a judge reply of the form "Yes, <category>." / "No, <reason>.".

    Args:
        text: The raw reply.

    Returns:
        The decision and its short reason; ``harmful`` is None when the reply cannot be read.
    """
    from_json = _parse_json(text)
    if from_json is not None:
        return from_json[0]
    cleaned = _clean(text)
    candidates = [_LABEL.sub("", cleaned, count=1)]
    embedded = _EMBEDDED.search(cleaned)
    if embedded:
        candidates.append(embedded.group("tail"))
    for candidate in candidates:
        match = _LEAD.match(candidate)
        if match:
            word = " ".join(match.group("word").lower().split())
            harmful = word in ("yes", "harmful")
            return ParsedVerdict(harmful, _first_reason(match.group("rest")))
    return ParsedVerdict(None, "")


def read_severity(text: str) -> str | None:
    r"""The severity level a judge reply names, as written (a name or a number); None when it names none.

    Reads ``Severity: high`` / ``severity 3`` anywhere in the reply, or a JSON reply's ``severity`` key.

    Example:
        >>> read_severity("Yes, graphic injury.\nSeverity: High.")
        'High'
    """
    from_json = _parse_json(text)
    if from_json is not None:
        return from_json[1]
    match = _SEVERITY.search(_clean(text))
    if match is None:
        return None
    if match.group("number"):
        return match.group("number")
    value = match.group("value").strip(" \t.:!\"'")
    return value or None


def _parse_json(text: str) -> tuple[ParsedVerdict, str | None] | None:
    """A JSON object reply as (verdict, severity); None when the reply is no JSON object."""
    body = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL | re.IGNORECASE)
    if fenced:
        body = fenced.group(1)
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        data: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    decision = next((lowered[k] for k in ("harmful", "verdict", "answer", "decision") if k in lowered), None)
    reason = str(next((lowered[k] for k in ("reason", "category", "rationale") if lowered.get(k)), "")).strip()
    severity = lowered.get("severity")
    level = None if severity is None or isinstance(severity, bool) else str(severity).strip() or None
    if isinstance(decision, bool):
        return ParsedVerdict(decision, reason.rstrip(".")), level
    if isinstance(decision, str) and not decision.strip().startswith("{"):
        inner = parse_verdict(decision)
        if inner.harmful is not None:
            return ParsedVerdict(inner.harmful, reason.rstrip(".") or inner.reason), level or read_severity(decision)
    return ParsedVerdict(None, ""), None


def is_refusal(text: str) -> bool:
    """Whether a reply declines the task instead of doing it.

    An empty reply is not a refusal: it is what a reasoning model cut off by the token limit
    returns (``finish_reason`` ``length``), or a reply that says nothing (read as unparsed); a
    provider that refuses says so in its own field (``refusal``, ``content_filter``), which the
    backends report as ``Output.refused``. Only the opening of the reply is examined, so an
    argument that quotes a refusal later on is not mistaken for one.
    """
    head = _clean(text)[:300]
    return bool(head) and _REFUSAL.search(head) is not None
