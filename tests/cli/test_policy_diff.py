"""``vhd policy diff A B INPUTS --model M``: the flips in text and as JSON, exit 0, errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from vhd.cli.main import main

V1 = """\
name: acme
version: "1"
categories:
  - id: violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury"]
"""
V2 = V1.replace('version: "1"', 'version: "2"') + '    allows: ["educational medical imagery such as X-rays"]\n'


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    from vhd.config import MediaConfig
    from vhd.media.load import load_sample, media_settings
    from vhd.records import Kind, MediaItem

    media = tmp_path / "media"
    media.mkdir()
    Image.new("RGB", (16, 16), (230, 230, 230)).save(media / "xray.png")
    Image.new("RGB", (16, 16), (0, 0, 200)).save(media / "blue.png")
    seen = load_sample(MediaItem(path=media / "xray.png", kind=Kind.IMAGE), media_settings(MediaConfig())).images[0]
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "default": "1. An argument.",
                "rules": [
                    {"when": {"tag": "judge", "system": "X-rays"}, "reply": "No, an educational X-ray."},
                    {"when": {"tag": "judge", "image": seen.sha256[:16]}, "reply": "Yes, violence."},
                    {"when": {"tag": "judge"}, "reply": "No, nothing harmful."},
                ],
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "v1.yaml").write_text(V1, encoding="utf-8")
    (tmp_path / "v2.yaml").write_text(V2, encoding="utf-8")
    return tmp_path / "v1.yaml", tmp_path / "v2.yaml", media, rules


def test_json_and_text(setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    v1, v2, media, rules = setup
    argv = ["policy", "diff", str(v1), str(v2), str(media), "--model", f"scripted:{rules}", "--rounds", "1"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["flips"] == 1 and len(data["samples"]) == 1
    (flip,) = data["samples"]
    assert Path(flip["path"]).name == "xray.png" and flip["changes"] == ["decision"]
    assert flip["a"]["reason"] == "violence" and flip["b"]["reason"] == "an educational X-ray"
    assert data["compared"] == 2 and data["calls"] == {"made": 12, "shared": 0}

    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "xray.png: decision harmful -> unharmful" in text
    assert "  A acme@1: harmful (category violence): violence" in text
    assert "  B acme@2: unharmful: an educational X-ray" in text
    assert "1 of 2 sample(s) changed from acme@1 to acme@2; model calls: 12 made, 0 shared" in text


def test_errors_exit_2(setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    v1, _, media, rules = setup
    bad = v1.parent / "bad.yaml"
    bad.write_text(V1.replace("forbids:", "forbidz:"), encoding="utf-8")
    assert main(["policy", "diff", str(v1), str(bad), str(media), "--model", f"scripted:{rules}"]) == 2
    assert "bad.yaml:6" in capsys.readouterr().err
    assert main(["policy", "diff", str(v1), str(v1), str(media / "nope"), "--model", f"scripted:{rules}"]) == 2
    assert "input not found" in capsys.readouterr().err
