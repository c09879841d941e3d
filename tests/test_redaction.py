"""Secrets in URLs (userinfo, key-like query parameters) never reach a store, a screen or an export."""

import json
from pathlib import Path

import pytest

from tests.servers.chat_server import ChatServer
from tests.test_annotate import judge_reply, make_images
from vhd.cli.main import main
from vhd.redaction import redact, redact_command, redact_text, redact_url
from vhd.store.sqlite import Store

SECRET = "Zq7abc123SECRETvalue"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"https://user:{SECRET}@api.example.com/v1", "https://***@api.example.com/v1"),
        (f"https://{SECRET}@api.example.com/v1", "https://***@api.example.com/v1"),
        (f"https://h.example.com/v1?api-key={SECRET}", "https://h.example.com/v1?api-key=***"),
        (f"https://h/v1?api-version=2024-10-21&key={SECRET}", "https://h/v1?api-version=2024-10-21&key=***"),
        (f"https://h/v1?token={SECRET}&x=1", "https://h/v1?token=***&x=1"),
        (f"https://h/b/c.jpg?sv=2022&sig={SECRET}&se=2030", "https://h/b/c.jpg?sv=2022&sig=***&se=2030"),
        (
            f"https://s3/o?X-Amz-Credential=AK%2F1&X-Amz-Signature={SECRET}",
            "https://s3/o?X-Amz-Credential=***&X-Amz-Signature=***",
        ),
        (f"https://h/v1?access_token={SECRET}#top", "https://h/v1?access_token=***#top"),
        (f"https://h/v1?subscription-key={SECRET}", "https://h/v1?subscription-key=***"),
        (f"https://h/v1?client_secret={SECRET}", "https://h/v1?client_secret=***"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://h/v1?api-version=2024-10-21&page=2", "https://h/v1?api-version=2024-10-21&page=2"),
        ("https://user@h/v1", "https://***@h/v1"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert redact({"backends": {"openai": {"base_url": url}}}) == {"backends": {"openai": {"base_url": expected}}}


def test_redact_reaches_every_string_of_a_config() -> None:
    config = {
        "backends": {"openai": {"base_url": f"https://u:{SECRET}@h/v1", "extra_headers": [f"https://h/?sig={SECRET}"]}},
        "prompts": {"judge_image": "@prompt.txt"},
        "concurrency": 16,
        "api_key": "x",
    }
    out = redact(config)
    assert SECRET not in json.dumps(out)
    assert out["prompts"] == {"judge_image": "@prompt.txt"} and out["concurrency"] == 16
    assert out["api_key"] == "<redacted>"


def test_redact_text_and_command_hide_url_secrets() -> None:
    text = f"POST https://u:{SECRET}@api.example.com/v1/chat?key={SECRET} failed"
    assert SECRET not in redact_text(text)
    assert "https://***@api.example.com/v1/chat?key=***" in redact_text(text)
    command = f"vhd fetch https://cdn.example.com/a.jpg?sig={SECRET} --out m/"
    assert redact_command(command) == "vhd fetch https://cdn.example.com/a.jpg?sig=*** --out m/"
    assert redact_command(f"vhd crawl --setting base_url=https://u:{SECRET}@h/v1") == (
        "vhd crawl --setting base_url=https://***@h/v1"
    )


@pytest.mark.parametrize("where", ["userinfo", "query"])
def test_base_url_secret_never_reaches_store_show_or_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    make_images(tmp_path / "m", 2)
    db = tmp_path / "s.db"
    with ChatServer(reply=judge_reply) as srv:
        if where == "userinfo":
            base_url = f"http://user:{SECRET}@127.0.0.1:{srv.port}/v1"
        else:
            base_url = f"http://127.0.0.1:{srv.port}/v1?api-key={SECRET}"
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[backends.openai]\nbase_url = "{base_url}"\nbackoff_base = 0.01\nmax_retries = 0\n')
        code = main(
            [
                "annotate",
                str(tmp_path / "m"),
                "--model",
                "openai:m",
                "--store",
                str(db),
                "--config",
                str(cfg),
                "--no-progress",
            ]
        )
        assert code in (0, 1)
        assert srv.log, "the backend reached the loopback server"
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err
    with Store(db) as st:
        [run] = st.runs()
        assert "127.0.0.1" in json.dumps(run.config)
    for f in tmp_path.glob("s.db*"):
        assert SECRET.encode() not in f.read_bytes(), f
    for fmt in ("jsonl", "vhd11k-csv"):
        target = tmp_path / f"a.{fmt}"
        assert main(["export", str(db), "--format", fmt, "--include-unparsed", "-o", str(target)]) == 0
        assert SECRET not in target.read_text()
    assert main(["show", str(db), str(tmp_path / "m" / "img_000.png"), "--json"]) in (0, 1, 2)
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err


def test_detector_identities_hide_url_secrets() -> None:
    from vhd.detectors.base import Detector

    class Plain(Detector):
        name = "plain"

        async def predict_images(self, kind, images):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    ident = Plain("p", None, {"base_url": f"https://u:{SECRET}@h/v1?token={SECRET}", "threshold": 0.5}).identity()
    assert SECRET not in json.dumps(ident)
    assert ident["options"]["threshold"] == 0.5
