"""A two-category policy with exceptions, for the tests of the detectors that take a policy text."""

from __future__ import annotations

from pathlib import Path

POLICY = """\
name: acme-moderation
version: "2026-11"
allows: ["news photographs reported without gore"]
categories:
  - id: violence
    name: Violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury", "threats with a weapon"]
    allows: ["educational medical imagery such as X-rays"]
  - id: nudity
    description: Exposed bodies shown for arousal.
severity:
  - {name: low, meaning: suggestive or mild}
  - {name: high, meaning: graphic or explicit}
"""

EXCEPTION = "educational medical imagery such as X-rays"
WIDE_EXCEPTION = "news photographs reported without gore"


def write_policy(folder: Path) -> Path:
    """The policy as a YAML file in ``folder``."""
    path = folder / "acme.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return path
