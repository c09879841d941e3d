"""A run's policy in the debate: prompts, configuration identity, severity."""

from __future__ import annotations

import asyncio
import hashlib
import io
from typing import Any

import pytest
from PIL import Image

from vhd.backends.scripted import ScriptedBackend
from vhd.config import AnnotateConfig
from vhd.debate.engine import Debate
from vhd.debate.identity import config_identity, digest
from vhd.debate.parse import parse_verdict, read_severity
from vhd.debate.prompts import Prompts
from vhd.media.encoded import EncodedImage
from vhd.policy import default_policy, parse_policy
from vhd.records import Kind, Role, Status

POLICY = """\
name: acme-moderation
version: "2026-11"
categories:
  - id: violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury", "threats with a weapon"]
    allows: ["educational medical imagery such as X-rays"]
severity:
  - {name: low, meaning: suggestive or mild}
  - {name: medium, meaning: clear but not graphic}
  - {name: high, meaning: graphic or explicit}
"""

# Digests of the system prompts and the configuration hash of vhd before policies existed
# (computed on main at 2d2b0cb): the default policy must leave both byte for byte.
BEFORE_PROMPTS = "18a31639d502ddb6714f2c06daf5861f23fe044892a1669d03fb261a81eb5f62"
BEFORE_HASH = "04ed1f99a4793fa2ae11041bdd3ea0626b8efd9cca7ab0f75d215b8d86c689a7"


def img() -> EncodedImage:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, "PNG")
    return EncodedImage(buf.getvalue(), "image/png", 8, 8)


def run(script: dict[str, Any], prompts: Prompts) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend("test", {"script": script})
    d = Debate({r: backend for r in Role}, AnnotateConfig(), prompts, [])
    return asyncio.run(d.run(Kind.IMAGE, [img()])), backend


@pytest.mark.parametrize("policy", [None, default_policy()])
def test_default_policy_leaves_prompts_and_hash_as_before(policy: Any) -> None:
    backend = ScriptedBackend("demo")
    prompts = Prompts(policy=policy)
    assert prompts.policy is None
    d = Debate({r: backend for r in Role}, AnnotateConfig(), prompts, [])
    texts = [d.system_prompt(r, k, 5) for r in Role for k in Kind]
    assert hashlib.sha256("\x00".join(texts).encode()).hexdigest() == BEFORE_PROMPTS
    assert digest(config_identity(AnnotateConfig(), {r: backend for r in Role}, prompts, [])) == BEFORE_HASH


def test_custom_policy_enters_the_hash_by_content() -> None:
    backend = ScriptedBackend("demo")
    roles = {r: backend for r in Role}
    policy = parse_policy(POLICY)
    with_policy = digest(config_identity(AnnotateConfig(), roles, Prompts(policy=policy), []))
    assert with_policy != BEFORE_HASH
    relaid = parse_policy("# same content\n" + POLICY.replace('"2026-11"', "'2026-11'"))
    assert digest(config_identity(AnnotateConfig(), roles, Prompts(policy=relaid), [])) == with_policy
    other = parse_policy(POLICY.replace("X-rays", "CT scans"))
    assert digest(config_identity(AnnotateConfig(), roles, Prompts(policy=other), [])) != with_policy


def test_an_exception_sentence_reaches_the_judge_and_the_debaters() -> None:
    policy = parse_policy(POLICY)
    script = {
        "default": "1. An argument.",
        "rules": [
            {"when": {"tag": "judge", "system": "medical imagery such as X-rays"}, "reply": "No, an X-ray."},
            {"when": {"tag": "judge"}, "reply": "Yes, graphic injury."},
        ],
    }
    result, backend = run(script, Prompts(policy=policy))
    assert result.verdict.harmful is False and result.verdict.reason == "an X-ray"
    for tag, messages in backend.calls:  # every role reads the exception, the image debaters too
        assert "educational medical imagery such as X-rays" in messages[0].text, tag
    # without the policy the same script decides harmful: the rule matched the policy's sentence
    before, _ = run(script, Prompts())
    assert before.verdict.harmful is True


def test_overridden_templates_still_get_the_policy() -> None:
    policy = parse_policy(POLICY)
    prompts = Prompts({"judge_image": "Judge by this: $definition\n$severity\nAnswer yes or no."}, policy=policy)
    text = prompts.system_prompt("judge", "image", rounds=2, n_frames=1)
    assert text.startswith("Judge by this: The policy names these categories")
    assert "Severity: <level>" in text and text.endswith("Answer yes or no.")
    assert text.count("X-rays") == 1


@pytest.mark.parametrize(
    ("reply", "level"),
    [
        ("Yes, graphic injury.\nSeverity: high", "high"),
        ("Yes, graphic injury. Severity: HIGH.", "high"),
        ("Yes, graphic injury.\nseverity 2", "medium"),
        ('{"harmful": true, "reason": "graphic injury", "severity": "low"}', "low"),
        ('```json\n{"answer": "Yes, graphic injury.", "severity": 3}\n```', "high"),
        ("Yes, graphic injury.", None),
    ],
)
def test_severity_is_read_onto_the_verdict(reply: str, level: str | None) -> None:
    result, backend = run(
        {"default": "1. An argument.", "rules": [{"when": {"tag": "judge"}, "reply": reply}]},
        Prompts(policy=parse_policy(POLICY)),
    )
    assert result.verdict.harmful is True and result.verdict.status is Status.OK
    assert result.verdict.severity == level
    judge_system = backend.calls[-1][1][0].text
    assert 'write a second line "Severity: <level>"' in judge_system
    assert "- medium: clear but not graphic" in judge_system


@pytest.mark.parametrize("reply", ["Yes, graphic injury.\nSeverity: extreme", "Yes, graphic injury.\nSeverity 4"])
def test_a_level_the_scale_lacks_is_unparsed_with_the_reply_kept(reply: str) -> None:
    result, _ = run(
        {"default": "1. An argument.", "rules": [{"when": {"tag": "judge"}, "reply": reply}]},
        Prompts(policy=parse_policy(POLICY)),
    )
    assert result.verdict.harmful is None and result.verdict.status is Status.UNPARSED
    assert "unknown severity level" in result.verdict.reason and "low, medium, high" in result.verdict.reason
    assert result.turns[-1].role is Role.JUDGE and result.turns[-1].text == reply


def test_without_a_scale_severity_is_never_set() -> None:
    result, _ = run(
        {"default": "1. An argument.", "rules": [{"when": {"tag": "judge"}, "reply": "Yes, gore.\nSeverity: high"}]},
        Prompts(),
    )
    assert result.verdict.harmful is True and result.verdict.severity is None


def test_parser_does_not_take_prose_for_a_level() -> None:
    assert read_severity("Yes, severity of the injury.") is None
    assert parse_verdict("Yes, severity of the injury.").reason == "severity of the injury"
    assert parse_verdict('{"harmful": false, "reason": "an X-ray."}') == (False, "an X-ray")
    assert parse_verdict("No, fine.\nSeverity: low").harmful is False
