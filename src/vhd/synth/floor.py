"""The safety floor: prompts that put minors together with sexual content are refused, always.

It cannot be turned off. `vhd prompts` applies it to every prompt a model writes (besides
counting the model's own refusals), and `vhd generate` applies it again to every prompt a user
brings. The check is a packaged term lexicon: a prompt is refused when it names a minor and a
sexual term, or uses a term that means both. Matching is on lower-cased words after folding
common obfuscations (digits for letters, separators inside words), so "t33n" and "s-e-x" count.
It errs on the side of refusing: a refused prompt is counted and reported, never generated.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

MINOR_TERMS: Final = frozenset(
    {
        "child", "children", "childs", "kid", "kids", "kiddie", "minor", "minors", "underage", "infant",
        "infants", "baby", "babies", "toddler", "toddlers", "preteen", "preteens", "pre-teen", "tween",
        "tweens", "teen", "teens", "teenage", "teenager", "teenagers", "adolescent", "adolescents",
        "juvenile", "juveniles", "schoolgirl", "schoolgirls", "schoolboy", "schoolboys", "boy", "boys",
        "girl", "girls", "youngster", "youngsters", "pubescent", "prepubescent", "daughter", "son",
        "niece", "nephew", "student", "pupil", "kindergarten", "kindergartner", "loli", "lolita", "shota",
    }
)  # fmt: skip
"""Words that name a minor (``girl``/``boy`` included on purpose: the floor errs towards refusing)."""

SEXUAL_TERMS: Final = frozenset(
    {
        "sex", "sexy", "sexual", "sexually", "sexualized", "sexualised", "nude", "nudes", "nudity", "naked",
        "undressed", "undressing", "undress", "topless", "bottomless", "porn", "porno", "pornographic",
        "pornography", "erotic", "erotica", "explicit", "nsfw", "lewd", "intercourse", "genital", "genitals",
        "breasts", "nipples", "lingerie", "seductive", "seductively", "provocative", "aroused", "arousal",
        "orgasm", "masturbating", "masturbation", "molest", "molested", "molesting", "fondle", "fondling",
        "grope", "groping", "stripping", "striptease", "xxx", "fetish", "bdsm", "rape", "raped", "incest",
    }
)  # fmt: skip
"""Words of sexual content."""

BOTH_TERMS: Final = frozenset(
    {"csam", "cp", "pedo", "pedophile", "pedophilia", "paedophile", "paedophilia", "jailbait", "lolicon", "shotacon"}
)
"""Words that alone mean sexual content involving minors."""

_AGE = re.compile(r"\b(\d{1,2})\s*-?\s*(?:years?|yrs?|yo)\b(?:\s*-?\s*old)?")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
_SEPARATED = re.compile(r"\b(?:[a-z][.\-_*]){2,}[a-z]\b")


def _words(text: str) -> set[str]:
    folded = unicodedata.normalize("NFKC", text).lower()
    joined = _SEPARATED.sub(lambda m: re.sub(r"[.\-_*]", "", m.group(0)), folded)
    words = set(re.findall(r"[a-z0-9@$-]+", joined))
    for word in list(words):
        plain = word.translate(_LEET)
        words.add(plain)
        words.update(p for p in plain.split("-") if p)
    return words


def floor_reason(text: str) -> str | None:
    """Why the safety floor refuses a prompt, or None when it may be generated.

    Args:
        text: A prompt (or any text).

    Returns:
        A one-line reason naming the matched terms, or None.
    """
    words = _words(text)
    both = sorted(words & BOTH_TERMS)
    if both:
        return f"safety floor: sexual content involving minors ({both[0]})"
    minors = sorted(words & MINOR_TERMS)
    ages = [int(m.group(1)) for m in _AGE.finditer(text.lower()) if int(m.group(1)) < 18]
    if ages:
        minors.append(f"{ages[0]} years old")
    sexual = sorted(words & SEXUAL_TERMS)
    if minors and sexual:
        return f"safety floor: minors ({minors[0]}) with sexual content ({sexual[0]})"
    return None


def allowed(text: str) -> bool:
    """True when the safety floor lets the prompt through."""
    return floor_reason(text) is None
