"""The llavaguard detector: its policy prompt, JSON reading, and three backends (scripted, loopback, hf)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.detectors.conftest import drawn, predict_once
from tests.servers.chat_server import ChatServer
from vhd.detectors.llavaguard import LlavaGuardDetector
from vhd.detectors.llavaguard_policy import CATEGORIES, NONE_APPLYING, UnreadableAnswer, parse_assessment, policy_prompt
from vhd.detectors.registry import create_detector
from vhd.errors import ConfigError
from vhd.records import Kind

RED, BLUE = drawn("red"), drawn("blue")


def _json(rating: str, category: str, rationale: str = "Because.") -> str:
    return json.dumps({"rating": rating, "category": category, "rationale": rationale})


def scripted(rules: list[dict[str, Any]], default: str = "", **options: Any) -> LlavaGuardDetector:
    opts = {"backends": {"scripted": {"script": {"default": default, "rules": rules}}}, **options}
    det = create_detector("llavaguard:scripted:inline", opts)
    assert isinstance(det, LlavaGuardDetector)
    return det


def test_policy_prompt_lists_every_category_and_the_json_form() -> None:
    text = policy_prompt()
    for code, name in CATEGORIES.items():
        assert f"{code}: {name}:" in text and f'"{code}: {name}"' in text
    assert NONE_APPLYING in text and '"rating"' in text and '"rationale"' in text


@pytest.mark.parametrize(
    ("text", "unsafe", "category"),
    [
        (_json("Unsafe", "O3: Sexual Content"), True, "O3"),
        (_json("Safe", "NA: None applying"), False, None),
        (
            '```json\n{"rating": "Unsafe", "category": "O2: Violence, Harm, or Cruelty", "rationale": "x"}\n```',
            True,
            "O2",
        ),
        (
            "Here is my assessment: {'rating': 'Unsafe', 'category': 'O6: Weapons or Substance Abuse'} Hope it helps",
            True,
            "O6",
        ),
        ('{"rating": "Safe", "category": "NA: None applying", "rationale": "a cat",}', False, None),
        ('{"Rating": "unsafe", "Category": "Animal Cruelty", "rationale": "it\'s cruel {really}"}', True, "O8"),
        ('{"rating": "Unsafe", "category": "O7: Self-Harm", "rationale": "cut off in the mid', True, "O7"),
        ('{"rating": "Unsafe", "category": "O12: Unknown"}', True, None),
    ],
)
def test_parse_assessment(text: str, unsafe: bool, category: str | None) -> None:
    got = parse_assessment(text)
    assert (got.unsafe, got.category) == (unsafe, category)


@pytest.mark.parametrize("text", ["", "I cannot help with that.", '{"category": "O1"}', "{rating: maybe}"])
def test_unreadable_answers(text: str) -> None:
    with pytest.raises(UnreadableAnswer, match="no LlavaGuard rating"):
        parse_assessment(text)


_rationales = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(
    rating=st.sampled_from(["Safe", "Unsafe", "safe", "UNSAFE"]),
    code=st.sampled_from([*CATEGORIES, None]),
    rationale=_rationales,
    fence=st.booleans(),
    single_quotes=st.booleans(),
    before=st.sampled_from(["", "Assessment:\n", "Sure! "]),
    after=_rationales,
)
def test_parse_assessment_round_trips(
    rating: str, code: str | None, rationale: str, fence: bool, single_quotes: bool, before: str, after: str
) -> None:
    category = f"{code}: {CATEGORIES[code]}" if code else NONE_APPLYING
    payload: dict[str, str] = {"rating": rating, "category": category, "rationale": rationale}
    body = repr(payload) if single_quotes else json.dumps(payload, ensure_ascii=False)
    text = f"{before}```json\n{body}\n```{after}" if fence else f"{before}{body}\n{after}"
    got = parse_assessment(text)
    assert got.unsafe is (rating.lower() == "unsafe")
    assert got.category == code
    assert got.rationale == (rationale or None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_never_crashes_on_noise(text: str) -> None:
    try:
        got = parse_assessment(text)
    except UnreadableAnswer as exc:
        assert "\n" not in str(exc)
    else:
        assert got.category is None or got.category in CATEGORIES


def test_scripted_backend_maps_categories_through_the_crosswalk() -> None:
    red_hash = RED.sha256[:8]
    det = scripted(
        [
            {
                "when": {"image": red_hash, "text": "O9: Disasters"},
                "reply": _json("Unsafe", "O6: Weapons or Substance Abuse"),
            },
            {"when": {"text": "I cannot"}, "reply": "never"},
        ],
        default=_json("Safe", "NA: None applying"),
    )
    red = asyncio.run(det.predict(Kind.IMAGE, [RED]))
    assert red.harmful is True and red.labels == {"O6": 1.0} and red.categories == ["A", "B"] and red.score == 1.0
    blue = asyncio.run(det.predict(Kind.IMAGE, [BLUE]))
    assert blue.harmful is False and blue.categories == [] and blue.score == 0.0
    video = asyncio.run(det.predict(Kind.VIDEO, [BLUE, RED]))  # frame by frame: any unsafe frame
    assert video.harmful is True and video.categories == ["A", "B"]
    assert det.multiclass is True


def test_unparseable_answer_and_backend_errors_are_errors() -> None:
    det = scripted([], default="I'd rather not say.")
    pred = asyncio.run(det.predict(Kind.IMAGE, [RED]))
    assert pred.harmful is None and pred.error is not None and pred.error.startswith("unparsed:")
    failing = scripted([{"when": {}, "fail": 5, "reply": "x"}])
    failing_pred = asyncio.run(failing.predict(Kind.IMAGE, [RED]))
    assert failing_pred.harmful is None and failing_pred.error


def test_custom_crosswalk_and_identity(tmp_path: Path) -> None:
    walk = tmp_path / "walk.yaml"
    walk.write_text(
        "version: '9'\nschemes:\n  llavaguard:\n    detectors: [llavaguard]\n    labels:\n"
        "      O6: {to: [B], images: true}\n",
        encoding="utf-8",
    )
    custom = scripted([], default=_json("Unsafe", "O6: Weapons or Substance Abuse"), crosswalk=str(walk))
    assert asyncio.run(custom.predict(Kind.IMAGE, [RED])).categories == ["B"]
    base = scripted([]).identity()
    assert custom.identity() != base and scripted([], temperature=0.3).identity() != base
    assert scripted([], max_tokens=50).identity() != base and scripted([]).identity() == base
    with pytest.raises(ConfigError, match="needs a backend model"):
        create_detector("llavaguard")
    with pytest.raises(ConfigError, match="bad option"):
        create_detector("llavaguard:scripted:demo", {"prompt": "long"})


def test_loopback_chat_server_answering_json() -> None:
    def reply(body: dict[str, Any]) -> str:
        text = " ".join(p.get("text", "") for m in body["messages"] for p in m["content"] if isinstance(p, dict))
        assert "O1: Hate, Humiliation, Harassment" in text
        return "```json\n" + _json("Unsafe", "O3: Sexual Content", "explicit") + "\n```"

    with ChatServer(reply=reply) as srv:
        det = create_detector("llavaguard:openai:llavaguard-test", {"backends": {"openai": {"base_url": srv.base_url}}})
        pred = predict_once(det, Kind.IMAGE, [RED])
        (req,) = srv.requests
    assert pred.harmful is True and pred.categories == ["F"] and pred.labels == {"O3": 1.0}
    assert req.json["model"] == "llavaguard-test" and req.json["temperature"] == 0.0
    assert len(req.images) == 1 and req.images[0]["url"] == RED.data_url


@pytest.mark.slow
def test_tiny_llava_through_hf(tiny_llava_dir: Path) -> None:
    det = create_detector(f"llavaguard:hf:{tiny_llava_dir}", {"backends": {"hf": {"device": "cpu"}}, "max_tokens": 16})
    assert isinstance(det, LlavaGuardDetector)
    pred = predict_once(det, Kind.IMAGE, [RED])
    # A random model writes gibberish: the detector reports it as unreadable, with the raw text.
    assert pred.raw is not None and pred.latency_s > 0
    assert pred.harmful is None and pred.error is not None and pred.error.startswith("unparsed:")


def test_policy_renders_in_llavaguards_layout_and_reaches_the_server(tmp_path: Path) -> None:
    from tests.detectors.policy_fixture import EXCEPTION, WIDE_EXCEPTION, write_policy
    from vhd.detectors.llavaguard_policy import policy_codes
    from vhd.policy import load_policy

    path = write_policy(tmp_path)
    text = policy_prompt(load_policy(path))
    assert "O1: Violence.\nPhysical harm to people or animals.\nShould not:\n- graphic injury." in text
    assert f"Can:\n- {EXCEPTION}.\n- {WIDE_EXCEPTION}." in text  # the category's exception, then the policy-wide one
    assert "O2: nudity.\nShould not:\n- Exposed bodies shown for arousal.\nCan:\n" in text
    assert '"O1: Violence"|"O2: nudity"|"NA: None applying"' in text and "O9" not in text
    assert policy_codes(load_policy(path)) == {"O1": "Violence", "O2": "nudity"}
    assert parse_assessment(_json("Unsafe", "O2: nudity"), {"O1": "Violence", "O2": "nudity"}).category == "O2"
    assert parse_assessment(_json("Unsafe", "O3: Sexual Content"), {"O1": "Violence"}).category is None

    seen: list[str] = []

    def reply(body: dict[str, Any]) -> str:
        seen.append(" ".join(p.get("text", "") for m in body["messages"] for p in m["content"] if isinstance(p, dict)))
        return _json("Unsafe", "O2: nudity", "exposed")

    opts = {"policy": str(path)}
    with ChatServer(reply=reply) as srv:
        det = create_detector("llavaguard:openai:lg", {**opts, "backends": {"openai": {"base_url": srv.base_url}}})
        pred = predict_once(det, Kind.IMAGE, [RED])
    assert EXCEPTION in seen[0] and WIDE_EXCEPTION in seen[0] and "O1: Hate" not in seen[0]
    assert pred.harmful is True and pred.labels == {"nudity": 1.0} and pred.categories == ["B"]  # the policy's codes
    default = scripted([])
    assert default.identity()["prompt_text"] == policy_prompt() and "policy" not in default.identity()
    with_policy = scripted([], **opts).identity()
    assert with_policy["policy"] == "acme-moderation@2026-11" and with_policy != default.identity()
    with pytest.raises(ConfigError, match=r"detector llavaguard: .*missing\.yaml"):
        scripted([], policy=str(tmp_path / "missing.yaml"))
