from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhd.cli.main import main
from vhd.collect.keywords import Keyword, format_keywords, load_keywords
from vhd.errors import ConfigError


def test_packaged_list_is_the_papers_45_keywords() -> None:
    words = load_keywords()
    assert len(words) == 45
    assert len({w.name for w in words}) == 45
    unharmful = {w.name for w in words if not w.harmful}
    assert unharmful == {"culinary knife in hand", "animated blood", "toy"}
    names = {w.name for w in words}
    assert {"knife in hand", "gun", "animated gun", "cruelty in the animal kingdom", "lack of self control"} <= names


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("k.yaml", "keywords:\n  - {name: knife, harmful: true}\n  - {name: spoon, harmful: false}\n"),
        ("k.yml", "knife: yes\nspoon: no\n"),
        ("k.json", json.dumps([{"name": "knife", "harmful": True}, {"keyword": "spoon", "harmful": "no"}])),
        ("k.csv", "keyword,harmful\nknife,yes\nspoon,no\n\n"),
        ("k.txt", "# my words\nknife\nspoon, unharmful\n"),
    ],
)
def test_user_files_replace_the_list(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert load_keywords(path) == [Keyword("knife", True), Keyword("spoon", False)]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("dup.txt", "knife\nKnife\n", "listed twice"),
        ("bad.csv", "keyword,harmful\nknife,maybe\n", "yes/no"),
        ("none.csv", "word\nknife\n", "'keyword'"),
        ("empty.txt", "# nothing\n", "no keywords"),
        ("bad.json", "{not json", "not valid JSON"),
        ("k.toml", "x = 1", "must end in"),
    ],
)
def test_bad_files_say_what_to_fix(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_keywords(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read keyword file"):
        load_keywords(tmp_path / "nope.yaml")


def test_formats_round_trip(tmp_path: Path) -> None:
    words = load_keywords()
    (tmp_path / "k.csv").write_text(format_keywords(words, "csv"))
    (tmp_path / "k.json").write_text(format_keywords(words, "json"))
    assert load_keywords(tmp_path / "k.csv") == words
    assert load_keywords(tmp_path / "k.json") == words
    table = format_keywords(words, "table")
    assert "45 keywords: 42 harmful, 3 unharmful" in table
    assert table.splitlines()[2].split() == ["alcohol", "yes"]


def test_cli_prints_and_filters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["keywords", "--format", "json", "--unharmful"]) == 0
    assert [w["name"] for w in json.loads(capsys.readouterr().out)] == [
        "culinary knife in hand",
        "animated blood",
        "toy",
    ]
    path = tmp_path / "mine.txt"
    path.write_text("spoon\tno\n")
    assert main(["keywords", "--keywords", str(path), "--harmful"]) == 1
    assert main(["keywords", "--keywords", str(path), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "spoon,no"
