"""`vhd config`: precedence of the sources and `config show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vhd
from vhd.cli.main import main


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
