from __future__ import annotations

import asyncio
import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.servers.chat_server import ChatServer
from vhd.backends.openai import OpenAIBackend
from vhd.cli.main import main
from vhd.synth.prompts import NearDuplicates, expand, parse_list
from vhd.synth.provenance import prompt_id

KNIFE = [
    # a preamble, an exact duplicate, a floor prompt, a bullet with quotes, a stray word
    "Here are some scenes:\n1. A man grips a knife in a dim kitchen.\n2) A chef slices onions with a large knife.\n"
    "3. A man grips a knife in a dim kitchen.\n- A teen girl in lingerie holding a knife\n"
    '* "A hunter cleans a knife beside a campfire."\nok\n',
    "I'm sorry, but I can't help with that request.",
    "1. A chef slices onions with a LARGE knife!\n2. A woman hides a knife behind her back at night.\n"
    "3. I cannot describe that scene.",
]
TOY = [
    "1. A toy robot on a shelf.\n2. A plush bear sits on a bed.\n"
    "3. A toy car races across a rug.\n4. A doll in a red dress."
]


class Script:
    """Replies per keyword in order (the last one repeats); remembers every request body."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.bodies.append(body)
        text = body["messages"][-1]["content"]
        replies = KNIFE if "knife in hand" in text else TOY
        n = self.calls[replies[0]]
        self.calls[replies[0]] += 1
        return replies[min(n, len(replies) - 1)]


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def server() -> Any:
    script = Script()
    with ChatServer(reply=script) as srv:
        yield srv, script


def test_parse_list_is_lenient() -> None:
    parsed = parse_list(KNIFE[0])
    assert parsed.items[0] == "A man grips a knife in a dim kitchen."
    assert "A hunter cleans a knife beside a campfire." in parsed.items
    assert parsed.malformed == 2 and parsed.refusals == 0
    assert parse_list(KNIFE[1]).refusals == 1 and not parse_list(KNIFE[1]).items
    assert parse_list("").items == []


def test_expand_counts_refusals_duplicates_and_floor_then_resumes(server: Any, tmp_path: Path) -> None:
    srv, script = server
    backend = OpenAIBackend("test-model", {"base_url": srv.base_url})
    out = tmp_path / "p.csv"
    result = asyncio.run(expand(backend, ["knife in hand", "toy"], 5, out, batch=5, near=NearDuplicates(1.0)))
    by = {k.keyword: k for k in result.keywords}
    knife = by["knife in hand"]
    assert knife.added == 4 and knife.short == 1 and knife.requests == 4  # the budget: 2 * 1 + 2
    assert knife.refusals == 1 + 1 + 1  # a whole reply, then one line in each repeat of the last reply
    assert knife.floor_refused == 1 and knife.exact_duplicates >= 2 and knife.malformed == 2
    assert by["toy"].added == 4
    for body in script.bodies:  # text-only requests
        assert all(isinstance(m["content"], str) for m in body["messages"])
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert {r["id"] for r in rows} == {prompt_id(r["keyword"], r["prompt"]) for r in rows}
    assert {r["model"] for r in rows} == {"openai:test-model"} and len({r["template"] for r in rows}) == 1
    assert not any("lingerie" in r["prompt"] for r in rows)

    sent = len(script.bodies)
    again = asyncio.run(expand(backend, ["toy"], 4, out, batch=5, near=NearDuplicates(1.0)))
    assert again.keywords[0].had == 4 and again.keywords[0].requests == 0 and len(script.bodies) == sent


@pytest.mark.slow
def test_near_duplicates_by_sentence_embedding() -> None:
    from tests.optional import need_module

    need_module("sentence_transformers", "pip install 'vhd[embed]'")
    near = NearDuplicates(0.85)
    kept = near.keep("k", ["A man grips a knife in a dim kitchen.", "A man is gripping a knife in a dim kitchen.",
                           "A toy robot stands on a wooden shelf."])  # fmt: skip
    assert kept == [True, False, True]


def test_cli_prompts_json_summary(server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv, _ = server
    cfg = tmp_path / "vhd.toml"
    cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
    out = tmp_path / "p.csv"
    args = ["prompts", "--keywords", "toy", "--per-keyword", "3", "--model", "openai:m", "--config", str(cfg)]
    code = main([*args, "--out", str(out), "--similarity", "1", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["added"] == 3 and summary["short"] == 0
    assert summary["keywords"][0]["keyword"] == "toy"
