"""The "Writing a policy" page stays true: its policies load, its default excerpt is the shipped file."""

from __future__ import annotations

import re
from pathlib import Path

from vhd.policy import parse_policy

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "policy.md"
DEFAULT = ROOT / "src" / "vhd" / "policy" / "data" / "vhd11k.yaml"


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_the_pages_policies_load() -> None:
    complete = [b for b in yaml_blocks() if "..." not in b]
    assert len(complete) == 2
    for block in complete:
        assert parse_policy(block, source="docs/policy.md").name == "acme-moderation"


def test_the_worked_example_is_the_shipped_default() -> None:
    (excerpt,) = [b for b in yaml_blocks() if "name: vhd11k" in b]
    shipped = DEFAULT.read_text(encoding="utf-8").splitlines()
    for line in excerpt.splitlines():
        if line.strip() and "..." not in line:
            assert line in shipped, line


def test_readme_tour_mentions_policy() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "--policy" in readme and "docs/policy.md" in readme
