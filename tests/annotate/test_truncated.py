"""Replies cut off by the token limit: their own outcome (``truncated``), never a refusal or a verdict.

A loopback endpoint answers like a reasoning model whose hidden reasoning spent the whole
``max_tokens``: empty content, ``finish_reason: "length"``, the tokens reported as reasoning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.servers.chat_server import ChatServer
from vhd.annotate.loop import TRUNCATED_LIMIT
from vhd.cli.main import main
from vhd.store.sqlite import Store


def _images(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        Image.new("RGB", (24, 24), (20 * i, 200 - 10 * i, 7)).save(folder / f"{i}.png")
    return folder


def _cap(body: dict[str, Any]) -> int:
    return int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)


def _is_judge(body: dict[str, Any]) -> bool:
    return _cap(body) in (100, 400)  # judge_max_tokens by default (debaters: 500), or 4x it


def _argv(media: Path, db: Path, srv: ChatServer, tmp_path: Path, *extra: str) -> list[str]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
    return ["annotate", str(media), "--model", "openai:m", "--store", str(db), "--config", str(cfg), *extra]


def test_empty_length_replies_are_truncated_not_harmful(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # `vhd show`'s panel titles in full
    media, db = _images(tmp_path / "media", 4), tmp_path / "s.db"
    with ChatServer(reply="", finish_reason="length", reasoning_tokens=_cap) as srv:
        assert main([*_argv(media, db, srv, tmp_path), "--no-progress", "--json"]) == 1  # work remains
        s = json.loads(capsys.readouterr().out)
        assert (s["harmful"], s["unharmful"], s["refused"], s["unparsed"], s["truncated"]) == (0, 0, 0, 0, 4)
        assert s["usage"]["calls"] == 4  # each debate ends at its first (empty, cut-off) argument
        assert main([*_argv(media, db, srv, tmp_path), "--no-progress"]) == 0  # final: not asked again
        out = capsys.readouterr().out
        assert srv.chat_requests == 4
    assert "4 already done" in out
    with Store(db) as store:
        (_, ann), *_ = list(store.iter_annotations())
    (turn,) = ann.turns
    assert (turn.finish_reason, turn.reasoning_tokens, turn.completion_tokens, turn.refused) == (
        "length",
        500,
        500,
        False,
    )
    assert ann.verdict.reason.startswith("truncated: the affirmative debater in round 1 hit the token limit of 500")
    # `vhd show` and the exports carry the finish reason
    assert main(["show", str(db), ann.sample_id]) == 0
    shown = capsys.readouterr().out
    assert "500 tok (500 reasoning) · 0.0" in shown and "finish length" in shown and "status truncated" in shown
    out_path = tmp_path / "all.jsonl"
    assert main(["export", str(db), "--format", "jsonl", "--out", str(out_path), "--include-unparsed"]) == 0
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert {r["status"] for r in rows} == {"truncated"}
    assert rows[0]["turns"][0]["finish_reason"] == "length" and rows[0]["turns"][0]["reasoning_tokens"] == 500


def test_the_summary_names_the_cause_and_the_fix_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    media = _images(tmp_path / "media", 2)
    judge_cut = ChatServer(
        reply=lambda b: "" if _is_judge(b) else "1. A reason.",
        finish_reason=lambda b: "length" if _is_judge(b) else "stop",
    )
    with judge_cut as srv:
        assert main([*_argv(media, tmp_path / "s.db", srv, tmp_path), "--no-progress"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "0 harmful, 0 unharmful, 0 decided by refusal, 0 unparsed, 2 truncated" in lines[0]
    (advice,) = [line for line in lines if "truncated:" in line]
    assert advice.startswith("2 sample(s) truncated: replies hit the token limit (judge_max_tokens 100, debater")
    assert "max_completion_tokens" in advice and "--retry-unparsed" in advice


def test_retry_unparsed_asks_again_with_a_larger_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    media, db = _images(tmp_path / "media", 3), tmp_path / "s.db"

    def reply(body: dict[str, Any]) -> str:
        return "" if _cap(body) < 400 else "No, plain colours."

    with ChatServer(reply=reply, finish_reason=lambda b: "length" if reply(b) == "" else "stop") as srv:
        assert main([*_argv(media, db, srv, tmp_path), "--no-progress", "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["truncated"] == 3
        srv.reset()
        assert main([*_argv(media, db, srv, tmp_path, "--retry-unparsed"), "--no-progress", "--json"]) == 0
        s = json.loads(capsys.readouterr().out)
        judge_caps = [_cap(r.json) for r in srv.requests if _is_judge(r.json)]
    assert (s["unharmful"], s["truncated"], s["already_done"]) == (3, 0, 0)
    assert sorted(judge_caps) == [100] * 3 + [400] * 3  # asked at the cap, then once at 4x
    assert s["usage"]["calls"] == 3 * 6


def test_a_run_stops_after_consecutive_truncated_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    media = _images(tmp_path / "media", TRUNCATED_LIMIT + 6)
    with ChatServer(reply="", finish_reason="length") as srv:
        argv = [*_argv(media, tmp_path / "s.db", srv, tmp_path), "--concurrency", "1", "--no-progress", "--json"]
        assert main(argv) == 1
        s = json.loads(capsys.readouterr().out)
    assert s["truncated"] == TRUNCATED_LIMIT and s["remaining"] == 6


def test_empty_stop_replies_are_unparsed_and_content_filter_stays_a_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    media = _images(tmp_path / "media", 2)
    with ChatServer(reply="") as srv:  # empty, finish_reason "stop"
        assert main([*_argv(media, tmp_path / "a.db", srv, tmp_path), "--no-progress", "--json"]) == 0
        s = json.loads(capsys.readouterr().out)
    assert (s["harmful"], s["refused"], s["unparsed"], s["truncated"]) == (0, 0, 2, 0)
    with ChatServer(reply="1. A reason.") as srv:
        srv.fail_next(["content_filter"])  # the first debater of the first sample is filtered
        assert (
            main([*_argv(media, tmp_path / "b.db", srv, tmp_path), "--concurrency", "1", "--no-progress", "--json"])
            == 0
        )
        s = json.loads(capsys.readouterr().out)
    assert (s["harmful"], s["refused"], s["truncated"]) == (1, 1, 0)


def test_no_token_limit_advice_when_nothing_was_truncated(tmp_path: Path) -> None:
    import vhd

    summary = vhd.annotate(_images(tmp_path / "media", 2), model="scripted:demo", store=tmp_path / "s.db")
    assert summary.annotated == 2 and summary.truncated == 0
    assert summary.budget_fix == "" and summary.to_dict()["budget_fix"] == ""
