"""`vhd annotate` over two loopback endpoints: the per-endpoint figures in the summary and the printout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.annotate.test_api import judge_reply, make_images
from tests.servers.chat_server import ChatServer
from vhd.cli.main import main

pytestmark = pytest.mark.usefixtures("clean_openai_env")


@pytest.fixture
def clean_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_annotate_reports_each_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "m", 6)
    with ChatServer(judge_reply, latency=0.01) as a, ChatServer(judge_reply, latency=0.01) as b:
        b.fail_next(["503"])
        cfg = tmp_path / "vhd.toml"
        cfg.write_text(f'[backends.openai]\nbase_urls = ["{a.base_url}", "{b.base_url}"]\nbackoff_base = 0.01\n')
        args = ["annotate", str(tmp_path / "m"), "--model", "openai:m", "--config", str(cfg), "--no-progress"]
        assert main([*args, "--store", str(tmp_path / "run.db"), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        endpoints = summary["endpoints"]
        assert set(endpoints) == {a.base_url, b.base_url}
        assert endpoints[a.base_url]["requests"] == a.chat_requests > 0
        assert endpoints[b.base_url]["requests"] == b.chat_requests > 0
        assert endpoints[b.base_url]["errors"] == 1 and endpoints[b.base_url]["cooldowns"] == 1
        assert sum(e["requests"] - e["errors"] for e in endpoints.values()) == summary["usage"]["calls"] == 30
        assert main([*args, "--store", str(tmp_path / "again.db"), "--stage-wise"]) == 0
        printed = capsys.readouterr().out
        assert f"endpoint {a.base_url}: " in printed and f"endpoint {b.base_url}: " in printed
