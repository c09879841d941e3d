from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.policy import ACME_POLICY
from vhd.cli.main import main
from vhd.debate.prompts import default_templates

POLICY = ACME_POLICY


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "acme.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return path


def test_check_a_valid_policy(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(policy)]) == 0
    assert "valid policy acme-moderation@2026-11" in capsys.readouterr().out
    assert main(["policy", "check", str(policy), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is True and data["severity"] == ["low", "high"] and data["exceptions"] == 1


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("forbids:", "forbidz:"), ":6: categories[0]: unknown key 'forbidz'"),
        (("severity:\n  - {name: low, meaning: suggestive or mild}\n  - {name: high, meaning: graphic or explicit}\n",
          "severity: []\n"), ":8: severity: the severity scale is empty"),
    ],
)  # fmt: skip
def test_check_an_invalid_policy_exits_1_with_the_line(
    policy: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str], expected: str
) -> None:
    policy.write_text(POLICY.replace(*change), encoding="utf-8")
    assert main(["policy", "check", str(policy)]) == 1
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1
    assert main(["policy", "check", str(policy), "--json"]) == 1
    assert expected in json.loads(capsys.readouterr().out)["error"]


def test_check_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(tmp_path / "nope.yaml")]) == 1
    assert "cannot read policy file" in capsys.readouterr().err


def test_show_renders_the_exception_into_every_role(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "show", str(policy), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["prompts"]
    assert len(shown) == 6
    for name, text in shown.items():
        assert "educational medical imagery such as X-rays" in text, name
        assert ("Severity: <level>" in text) is name.startswith("judge"), name


def test_show_of_the_default_is_the_paper_definition(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "show", "vhd11k", "--role", "judge", "--kind", "video"]) == 0
    out = capsys.readouterr().out
    assert default_templates()["definition_video"] in out and "Severity" not in out


def test_check_names_a_missing_example_file(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples = "    examples:\n      - {path: here.png, harmful: true}\n      - {path: gone.png, harmful: false}\n"
    text = POLICY.replace("severity:", examples + "severity:")
    policy.write_text(text, encoding="utf-8")
    (policy.parent / "here.png").write_bytes(b"")
    assert main(["policy", "check", str(policy)]) == 1
    assert ":10: categories[0].examples[1].path: no such file 'gone.png'" in capsys.readouterr().err
