"""`vhd runs`, `vhd config`, `vhd show` id prefixes, `vhd export`'s file split, on real stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.cli.main import main


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store annotated twice with the scripted backend: 2 rounds, then 1 round."""
    tmp = tmp_path_factory.mktemp("runs")
    make_images(tmp / "media", 12)
    store = tmp / "s.db"
    vhd.annotate([tmp / "media"], model="scripted:demo", store=store, progress=False)
    vhd.annotate([tmp / "media"], model="scripted:demo", store=store, rounds=1, progress=False)
    return store


def test_runs_lists_and_diffs(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(two_runs), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["annotated"] for r in rows] == [12, 12]
    assert rows[0]["config_hash"] != rows[1]["config_hash"]
    assert main(["runs", str(two_runs), "--diff", "1", rows[1]["id"][:8], "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["same_config"] is False
    assert diff["changed"]["config.debate.rounds"] == {"a": 2, "b": 1}
    assert main(["runs", str(two_runs)]) == 0
    text = capsys.readouterr().out
    assert "  1  " in text and "scripted:demo" in text
    assert main(["runs", str(two_runs), "--diff", "1", "9"]) == 2
    assert "no run '9'" in capsys.readouterr().err


def test_show_says_how_many_characters_an_id_needs(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(two_runs), "abc"]) == 2
    err = capsys.readouterr().err
    assert "at least 6 characters" in err and "has 3" in err


def test_export_csv_split_is_said_and_kind_writes_exactly_the_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.media.conftest import make_video

    make_images(tmp_path / "m", 2)
    make_video(tmp_path / "m" / "clip.mp4", 12)
    store = tmp_path / "s.db"
    vhd.annotate([tmp_path / "m"], model="scripted:demo", store=store, progress=False)
    assert main(["export", str(store), "-o", str(tmp_path / "x.csv")]) == 0
    out = capsys.readouterr().out
    assert "x_images.csv" in out and "x_videos.csv" in out and "separate files" in out
    assert main(["export", str(store), "--kind", "video", "-o", str(tmp_path / "v.csv"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["files"] == [str(tmp_path / "v.csv")] and got["split_by_kind"] is False and got["written"] == 1


def test_config_precedence_and_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flag > VHD_* > --config > user config > defaults; tables merged key by key."""
    from vhd.config import config_sources, load_config, user_config_path

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("VHD_NO_USER_CONFIG")
    user = user_config_path()
    assert user == tmp_path / "xdg" / "vhd" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("concurrency = 4\n[debate]\nrounds = 3\ntemperature = 0.9\n[media]\nframes = 7\n")
    project = tmp_path / "vhd.toml"
    project.write_text("[debate]\nrounds = 1\n")
    cfg = load_config(project)
    assert (cfg.debate.rounds, cfg.debate.temperature, cfg.media.frames, cfg.concurrency) == (1, 0.9, 7, 4)
    monkeypatch.setenv("VHD_CONCURRENCY", "9")
    assert load_config(project).concurrency == 9
    assert load_config(project).with_overrides(concurrency=2).concurrency == 2  # the flag
    sources = {k: (v, s) for k, v, s in config_sources(project)}
    assert sources["debate.rounds"] == (1, f"--config {project}")
    assert sources["debate.temperature"] == (0.9, f"user config {user}")
    assert sources["concurrency"] == (9, "env VHD_CONCURRENCY")
    assert sources["debate.judge_max_tokens"] == (100, "default")
    monkeypatch.setenv("VHD_NO_USER_CONFIG", "1")
    assert load_config(project).debate.temperature == 0.5
    user.write_text("[debate]\nrounds = 99\n")
    monkeypatch.delenv("VHD_NO_USER_CONFIG")
    with pytest.raises(vhd.errors.ConfigError, match="user config"):
        load_config(None)


def test_config_show_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VHD_MODEL", "scripted:demo")
    assert main(["config", "show", "--json"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["model"]["value"] == "scripted:demo" and rows["model"]["source"] == "env VHD_MODEL"
    assert main(["config", "path"]) == 0
    assert "ignored: VHD_NO_USER_CONFIG is set" in capsys.readouterr().out
