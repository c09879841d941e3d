"""Planted harm reasons in known groups, for testing discovery (clustering must recover them)."""

from __future__ import annotations

PLANTED: dict[str, list[str]] = {
    "violence": [
        "graphic violence",
        "bloody fight",
        "person being stabbed",
        "gunshot wound",
        "violent attack",
        "assault with a weapon",
        "blood and injuries",
        "brutal beating",
    ],
    "sexual": [
        "nudity",
        "explicit sexual content",
        "adult content",
        "pornographic material",
        "sexual activity",
        "naked body",
        "sexually suggestive pose",
        "erotic imagery",
    ],
    "substances": [
        "drug use",
        "alcohol abuse",
        "smoking marijuana",
        "heroin injection",
        "heavy drinking",
        "cocaine use",
        "illegal drugs",
        "drunk driving",
    ],
    "animals": [
        "animal cruelty",
        "dog being beaten",
        "animal abuse",
        "hurting a cat",
        "neglected animals",
        "cruelty to horses",
    ],
    "hate": [
        "nazi symbols",
        "racist imagery",
        "hate speech",
        "swastika",
        "white supremacy",
        "antisemitic content",
    ],
}
"""Group name to reasons."""
