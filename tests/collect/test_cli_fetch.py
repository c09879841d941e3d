from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.collect.conftest import jpeg_bytes, png_bytes
from tests.collect.media_server import MediaServer, Route
from vhd.cli.main import main
from vhd.collect.fetch_settings import parse_size
from vhd.errors import ConfigError


def _listing(tmp_path: Path, urls: list[str]) -> Path:
    path = tmp_path / "urls.csv"
    path.write_text("url,keyword\n" + "".join(f"{u},toy\n" for u in urls))
    return path


def test_fetch_command_json_summary_and_exit_codes(
    server: MediaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = server.add("/a.png", Route(body=png_bytes()))
    dead = server.add("/dead", Route(status=404))
    busy = server.add("/busy", Route(status=503))
    out = tmp_path / "m"
    base = ["fetch", "--out", str(out), "--allow-private", "--retries", "0", "--no-progress"]
    assert main([*base, str(_listing(tmp_path, [good, dead])), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"]["ok"] == 1 and summary["counts"]["failed"] == 1 and summary["retryable"] == 0
    assert main([*base, str(_listing(tmp_path, [good, dead])), "--strict"]) == 1
    text = capsys.readouterr().out
    assert "fetched 0 file(s)" in text and "1 fetched earlier" in text and "http-404 1" in text
    assert main([*base, str(_listing(tmp_path, [good, busy])), "--report", str(tmp_path / "r.json")]) == 1
    assert "retryable failures are fetched again" in capsys.readouterr().out
    assert [r["error"] for r in json.loads((tmp_path / "r.json").read_text())] == ["", "http-503"]


def test_fetch_command_limits_block_list_and_usage_errors(
    server: MediaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small, big, listed = png_bytes("red", (16, 16)), jpeg_bytes("blue", (400, 400)), png_bytes("green")
    urls = [
        server.add("/s.png", Route(body=small)),
        server.add("/b.jpg", Route(body=big)),
        server.add("/l.png", Route(body=listed)),
    ]
    blocks = tmp_path / "block.txt"
    blocks.write_text(hashlib.sha256(listed).hexdigest() + "\n")
    out = tmp_path / "m"
    args = [
        "fetch",
        str(_listing(tmp_path, urls)),
        "--out",
        str(out),
        "--allow-network",
        "127.0.0.1/32",
        "--no-progress",
    ]
    assert main([*args, "--max-image-size", "2k", "--block-hashes", str(blocks), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == {
        "ok": 1,
        "failed": 0,
        "rejected": 1,
        "blocked": 1,
        "invalid": 0,
        "duplicate": 0,
    }
    assert main([*args, "--max-image-size", "lots"]) == 2
    assert "not a size" in capsys.readouterr().err
    assert main([*args, "--allow-network", "10.0.0.0/99"]) == 2
    assert main(["fetch", str(tmp_path / "none.csv"), "--out", str(out)]) == 2
    assert "cannot read URL list" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "value"),
    [("50MB", 50 << 20), ("2GB", 2 << 30), ("512k", 512 << 10), ("1.5M", 3 << 19), ("800", 800), ("10 MiB", 10 << 20)],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "MB", "-5", "0", "5 parsecs"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_size(text)
