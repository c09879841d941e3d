"""Read a model's category answer ("A, F", "F. Explicit and Sexual Content", "Categories: B; D") as codes.

Models decorate answers freely: markdown, bullets, numbering, a "Categories:" prefix, full
names with or without their letter, lower case, "and" between items. `parse_answer` accepts all
of those and never guesses from prose when a clear list is present. An answer that names no
category and does not say "none" is `unparsed`, never an empty success.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from vhd.taxonomy.taxonomy import Taxonomy

_MARKDOWN = re.compile(r"[*`#>]+|(?<!\w)_+|_+(?!\w)")
_LINE_MARK = re.compile(r"^[ \t]*(?:[-•·+]|\d{1,2}[.)])[ \t]+", re.MULTILINE)
_PREFIX = re.compile(
    r"^[ \t]*(?:final[ \t]+)?(?:answer|harm[ \t]+)?(?:categor(?:y|ies)|answer|codes?|labels?|classes|class|result)"
    r"[ \t]*(?:\([^)]*\))?[ \t]*[:=\-][ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_NOT_APPLICABLE = re.compile(r"(?<![0-9A-Za-z])n/a(?![0-9A-Za-z])", re.IGNORECASE)
_SPLIT = re.compile(r"[,;/|\n]+|\s+(?:and|or|&|\+)\s+", re.IGNORECASE)
_TRAILING = re.compile(r"\s+(?:appl(?:y|ies)|fits?|match(?:es)?|here)$", re.IGNORECASE)
_STRIP = " \t\"'“”‘’.:()[]{}!?-"
_SEGMENT_CODE = re.compile(r"(?:(?:categor(?:y|ies)|code|class|option)\s+)?\(?([A-Za-z])\)?", re.IGNORECASE)
_NONE = re.compile(
    r"^(?:none(?: of (?:the|these)(?: above| categories)?)?|no(?:ne)? (?:harm |harmful )?categor(?:y|ies)"
    r"(?: applies| apply| fits?)?|not applicable|n/?a|nothing|no harm)$",
    re.IGNORECASE,
)
_PROSE = (
    re.compile(r"\bcategor(?:y|ies)\s+([A-Z](?:\s*(?:,|and|&|/)\s*[A-Z])*)\b"),
    re.compile(r"\(([A-Z])\)"),
    re.compile(r"(?:^|\s)([A-Z])[.)](?:\s|$)"),
    re.compile(r"\b(?:is|are|be|choose|pick|select)\s+([A-Z])\b"),
)


@dataclass(frozen=True)
class ParsedAnswer:
    """What a category answer says.

    Attributes:
        codes: Category codes named, in taxonomy order, without repeats.
        status: ``ok`` (codes found, or an explicit "none"/unharmful), or ``unparsed``.
        none: The answer said that no category applies (or named the unharmful class).
    """

    codes: tuple[str, ...]
    status: Literal["ok", "unparsed"]
    none: bool = False


@functools.lru_cache(maxsize=32)
def _name_patterns(taxonomy: Taxonomy) -> list[tuple[re.Pattern[str], str]]:
    patterns = []
    for cat in sorted(taxonomy.classes, key=lambda c: -len(c.name)):
        words = re.findall(r"[0-9A-Za-z]+", cat.name.replace("&", " and "))
        body = r"[\W_]+".join("(?:and|&)" if w.lower() == "and" else re.escape(w) for w in words)
        # Swallow a preceding letter code ("F. ", "(F) ", "F - ") so it is not read a second time.
        lead = r"(?:(?<![A-Za-z])(?:\([A-Za-z]\)|[A-Za-z][ \t]*[.):\-])[ \t]*)?"
        patterns.append((re.compile(rf"{lead}(?<![0-9A-Za-z]){body}(?![0-9A-Za-z])", re.IGNORECASE), cat.code))
    return patterns


def _clean(text: str) -> str:
    text = _NOT_APPLICABLE.sub("none", text)
    text = _MARKDOWN.sub(" ", text)
    text = _LINE_MARK.sub("", text)
    return _PREFIX.sub("", text)


def parse_answer(text: str, taxonomy: Taxonomy) -> ParsedAnswer:
    """Read the category codes a model's answer names.

    Args:
        text: The answer, e.g. ``"A, F"``, ``"**Categories:** B; D"``, ``"Explicit and Sexual
            Content"``, a numbered list, ``"None"``.
        taxonomy: The taxonomy the model was asked about.

    Returns:
        The codes (taxonomy order); status ``unparsed`` when no category and no "none" could be
        read.
    """
    found: set[str] = set()
    said_none = False
    unharmful = taxonomy.unharmful.code
    rest = _clean(text or "")
    for pattern, code in _name_patterns(taxonomy):
        if pattern.search(rest):
            found.add(code)
            rest = pattern.sub(" , ", rest)
    for segment in _SPLIT.split(rest):
        seg = _TRAILING.sub("", segment.strip(_STRIP)).strip(_STRIP)
        if not seg:
            continue
        if _NONE.fullmatch(seg):
            said_none = True
            continue
        m = _SEGMENT_CODE.fullmatch(seg)
        if m and (m.group(1).upper() in taxonomy.codes or m.group(1).upper() == unharmful):
            found.add(m.group(1).upper())
    if not found and not said_none:
        for pattern in _PROSE:
            for m in pattern.finditer(rest):
                found.update(c for c in re.findall(r"[A-Z]", m.group(1)) if c in taxonomy.codes or c == unharmful)
    if unharmful in found:
        found.discard(unharmful)
        said_none = True
    codes = tuple(c for c in taxonomy.codes if c in found)
    if codes:
        return ParsedAnswer(codes, "ok", False)
    return ParsedAnswer((), "ok", True) if said_none else ParsedAnswer((), "unparsed", False)
