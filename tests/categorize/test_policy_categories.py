"""`vhd categorize --policy`: the policy's categories are the ones assigned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhd.categorize import categorize
from vhd.cli.main import main
from vhd.errors import ConfigError

POLICY = """\
name: acme-moderation
version: "2026-11"
categories:
  - id: violence
    name: Violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury", "threats with a weapon"]
    allows: ["educational medical imagery such as X-rays"]
  - id: drugs
    description: Drug use shown or promoted.
"""


def script(tmp_path: Path) -> str:
    rules = [
        {"when": {"tag": "categorize", "text": "Violence: Physical harm"}, "reply": "A"},
        {"when": {"tag": "categorize"}, "reply": "None"},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"default": "None", "rules": rules}))
    return f"scripted:{path}"


def test_the_policys_categories_are_assigned(store_path: Path, tmp_path: Path) -> None:
    policy = tmp_path / "acme.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    summary = categorize(store_path, method="llm", model=script(tmp_path), policy=policy)
    assert summary.taxonomy == "acme-moderation@2026-11"
    assert summary.counts == {"Violence": summary.categorized} and summary.categorized > 0


def test_the_config_files_policy_is_used_and_flags_conflict(store_path: Path, tmp_path: Path) -> None:
    (tmp_path / "acme.yaml").write_text(POLICY, encoding="utf-8")
    (tmp_path / "vhd.toml").write_text('policy = "acme.yaml"\n', encoding="utf-8")
    summary = categorize(store_path, method="llm", model=script(tmp_path), config=tmp_path / "vhd.toml")
    assert summary.taxonomy == "acme-moderation@2026-11"
    with pytest.raises(ConfigError, match="not both"):
        categorize(store_path, method="llm", model=script(tmp_path), policy=tmp_path / "acme.yaml", taxonomy="vhd11k")


def test_cli_policy_flag(store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "acme.yaml").write_text(POLICY, encoding="utf-8")
    args = ["categorize", "--store", str(store_path), "--method", "llm", "--model", script(tmp_path)]
    assert main([*args, "--policy", str(tmp_path / "acme.yaml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["taxonomy"] == "acme-moderation@2026-11"
