from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.policy import ACME_POLICY
from vhd.debate.prompts import default_templates
from vhd.policy import MAX_POLICY_BYTES, PolicyError, default_policy, is_default, load_policy, parse_policy
from vhd.policy.load import policy_json_schema, shipped_json_schema
from vhd.taxonomy import default_taxonomy

ISSUE_EXAMPLE = ACME_POLICY


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str, name: str = "policy.yaml") -> str:
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path, text, name))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_issue_example_loads(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, ISSUE_EXAMPLE))
    assert policy.key == "acme-moderation@2026-11"
    assert policy.categories[0].allows == ["educational medical imagery such as X-rays"]
    assert policy.severity_names == ["low", "high"]
    assert policy.severity_level("2") == "high"
    assert policy.severity_level("HIGH") == "high"
    assert policy.severity_level("3") is None
    assert not is_default(policy)


def test_unknown_key_names_its_line(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("    allows:", "    alows:")
    message = error_of(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'policy.yaml'}:7: categories[0]: unknown key 'alows'")


def test_duplicate_category_id_names_both_lines(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("severity:", "  - id: violence\n    description: Again.\nseverity:")
    message = error_of(tmp_path, text)
    assert re.search(r":8: categories\[1\]\.id: duplicate category id 'violence' \(first on line 4\)", message)


def test_empty_scale(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.split("severity:")[0] + "severity: []\n"
    message = error_of(tmp_path, text)
    assert ":8: severity: the severity scale is empty" in message


def test_wrong_type_names_line_and_fix(tmp_path: Path) -> None:
    message = error_of(tmp_path, ISSUE_EXAMPLE.replace('version: "2026-11"', "version: 3"))
    assert ":2: version: Input should be a valid string; quote it" in message
    text = ISSUE_EXAMPLE.replace('forbids: ["graphic injury", "threats with a weapon"]', "forbids: 4")
    message = error_of(tmp_path, text)
    assert ":6: categories[0].forbids: " in message


def test_duplicate_yaml_key_and_aliases_refused(tmp_path: Path) -> None:
    message = error_of(tmp_path, ISSUE_EXAMPLE + 'version: "2"\n')
    assert ":11: top level: duplicate key 'version' (first on line 2)" in message
    aliased = ISSUE_EXAMPLE.replace("description: Physical", "description: &d Physical") + "description: *d\n"
    assert "aliases" in error_of(tmp_path, aliased)


def test_over_the_size_cap_is_refused_before_parsing(tmp_path: Path) -> None:
    # Invalid YAML past the cap: the size error comes first, so parsing never started.
    text = ISSUE_EXAMPLE + "# " + "x" * MAX_POLICY_BYTES + "\n: [unclosed\n"
    message = error_of(tmp_path, text)
    assert "over 2 MB" in message


def test_syntax_error_names_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, ISSUE_EXAMPLE.replace("  - {name: high", "  - {name: high,,"))
    assert re.search(r"policy\.yaml:10: YAML syntax error", message)


def test_toml_loads_and_errors_name_line(tmp_path: Path) -> None:
    toml = """\
name = "acme-moderation"
version = "2026-11"

[[categories]]
id = "violence"
description = "Physical harm to people or animals."
forbids = ["graphic injury", "threats with a weapon"]
allows = ["educational medical imagery such as X-rays"]

[[severity]]
name = "low"
meaning = "suggestive or mild"

[[severity]]
name = "high"
meaning = "graphic or explicit"
"""
    from_toml = load_policy(write(tmp_path, toml, "p.toml"))
    from_yaml = load_policy(write(tmp_path, ISSUE_EXAMPLE))
    assert from_toml.content_hash == from_yaml.content_hash
    message = error_of(tmp_path, toml.replace('meaning = "graphic', 'meanin = "graphic'), "p.toml")
    assert ":16: severity[1]: unknown key 'meanin'" in message


def test_content_hash_ignores_layout_but_not_content(tmp_path: Path) -> None:
    base = load_policy(write(tmp_path, ISSUE_EXAMPLE))
    relaid = ISSUE_EXAMPLE.replace('version: "2026-11"', "# a comment\nversion: '2026-11'")
    assert parse_policy(relaid).content_hash == base.content_hash
    changed = ISSUE_EXAMPLE.replace("X-rays", "CT scans")
    assert parse_policy(changed).content_hash != base.content_hash


def test_example_severity_must_be_on_the_scale(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace(
        "severity:",
        "    examples:\n      - {path: a.png, harmful: true, severity: extreme}\nseverity:",
    )
    assert "which the scale lacks" in error_of(tmp_path, text)


def test_shipped_schema_is_the_generated_one() -> None:
    assert shipped_json_schema() == policy_json_schema()


def test_default_policy_matches_the_taxonomy_and_the_definition_templates() -> None:
    policy = default_policy()
    assert is_default(policy) and is_default(None)
    assert policy.to_taxonomy().to_dict() == default_taxonomy().to_dict()
    assert policy.to_taxonomy().digest == default_taxonomy().digest
    templates = default_templates()
    assert policy.definition_for("image") == templates["definition_image"]
    assert policy.definition_for("video") == templates["definition_video"]
    assert load_policy("vhd11k") is policy
