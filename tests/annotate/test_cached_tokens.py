"""The cached-token share: ``usage.prompt_tokens_details.cached_tokens`` read, summed, reported and priced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from tests.servers.chat_server import ChatServer
from vhd.backends.openai_payload import parse_response
from vhd.cli.main import main
from vhd.config import Price


def _reply(body: dict) -> str:
    system = body["messages"][0]["content"]
    system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
    return "No, plain colours." if "judge" in system else "1. A reason.\n2. Another."


def test_parse_and_price() -> None:
    body = {
        "choices": [{"message": {"content": "No"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 768}},
    }
    assert parse_response(body).cached_tokens == 768
    assert parse_response({**body, "usage": {"prompt_tokens": 5}}).cached_tokens == 0
    bad = {**body, "usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": "x"}}}
    assert parse_response(bad).cached_tokens == 0
    price = Price(input=2.0, output=8.0, cached_input=0.5)
    assert price.cost(1000, 10, 768) == pytest.approx((232 * 2.0 + 768 * 0.5 + 10 * 8.0) / 1e6)
    assert Price(input=2.0, output=8.0).cost(1000, 10, 768) == pytest.approx((1000 * 2.0 + 10 * 8.0) / 1e6)


def test_annotate_reports_the_cached_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    media = tmp_path / "media"
    media.mkdir()
    for i in range(3):
        Image.new("RGB", (32, 32), (40 * i, 90, 10)).save(media / f"{i}.png")
    with ChatServer(reply=_reply, usage=(100, 5), cached_tokens=60) as srv:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[backends.openai]\nbase_url = "{srv.base_url}"\n'
            '[prices."openai:m"]\ninput = 10.0\noutput = 20.0\ncached_input = 1.0\n'
        )
        argv = ["annotate", str(media), "--model", "openai:m", "--store", str(tmp_path / "s.db"), "--config", str(cfg)]
        assert main([*argv, "--no-progress", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
    calls = 3 * 5
    assert summary["usage"]["calls"] == calls and summary["usage"]["cached_tokens"] == calls * 60
    assert summary["cached_share"] == pytest.approx(0.6)
    assert summary["usage"]["cost"] == pytest.approx(calls * (40 * 10.0 + 60 * 1.0 + 5 * 20.0) / 1e6)
    with ChatServer(reply=_reply, usage=(100, 5), cached_tokens=60) as srv:
        cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
        assert main([*argv[:5], str(tmp_path / "t.db"), "--config", str(cfg), "--no-progress"]) == 0
    assert "(60% of prompt tokens from the endpoint's cache)" in capsys.readouterr().out
