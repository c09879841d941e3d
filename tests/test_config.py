from pathlib import Path

import pytest

from vhd.config import DEFAULT_MODEL, MODEL_ENV, AnnotateConfig, load_config
from vhd.errors import ConfigError


def test_defaults_follow_the_paper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    c = AnnotateConfig()
    assert c.debate.rounds == 2 and c.debate.temperature == 0.5
    assert c.role_settings("affirmative") == (0.5, 500)
    assert c.role_settings("judge") == (0.5, 100)
    assert c.media.frames == 5 and c.media.first_frames == 4000
    assert c.role_model("judge") == DEFAULT_MODEL


def test_precedence_flags_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "vhd.toml"
    f.write_text(
        'model = "openai:file-model"\n[roles.judge]\nmodel = "openai:judge-from-file"\ntemperature = 0.0\n'
        '[debate]\nrounds = 3\n[backends.openai]\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    c = load_config(f)
    assert c.role_model("affirmative") == "openai:file-model"
    assert c.role_model("judge") == "openai:judge-from-file"
    assert c.role_settings("judge") == (0.0, 100)
    assert c.debate.rounds == 3
    assert c.base_dir == str(tmp_path.resolve())
    monkeypatch.setenv(MODEL_ENV, "openai:env-model")
    assert AnnotateConfig().role_model("negative") == "openai:env-model"
    assert c.role_model("negative") == "openai:file-model"  # the file's model beats the env var
    c2 = c.with_overrides(debaters="scripted:demo", judge="scripted:demo2")
    assert c2.role_model("affirmative") == "scripted:demo" and c2.role_model("judge") == "scripted:demo2"
    # a --model flag beats the file's model and its per-role models
    c3 = c.with_overrides(model="openai:llama3.2-vision:11b")
    assert c3.role_model("negative") == c3.role_model("judge") == "openai:llama3.2-vision:11b"
    assert c3.role_settings("judge") == (0.0, 100)  # other per-role settings stay


def test_yaml_and_errors(tmp_path: Path) -> None:
    y = tmp_path / "c.yaml"
    y.write_text("debate:\n  rounds: 1\nmedia:\n  max_side: 512\n")
    assert load_config(y).media.max_side == 512
    bad = tmp_path / "bad.toml"
    bad.write_text("[debate]\nrouns = 2\n")
    with pytest.raises(ConfigError, match=r"debate\.rouns"):
        load_config(bad)
    bad.write_text("[debate\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="concurrency"):
        AnnotateConfig().with_overrides(concurrency=0)
