from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.detectors.api_server import ApiServer, Request
from tests.detectors.conftest import drawn, predict_once
from vhd.detectors.openai_moderation import OpenAIModerationDetector
from vhd.detectors.registry import create_detector
from vhd.errors import BackendUnavailableError
from vhd.records import Kind
from vhd.taxonomy.crosswalk import default_crosswalk

KEY = "sk-test"
KNIFE, FLOWER = drawn("gray"), drawn("green")
NAMES = list(default_crosswalk().schemes["openai_moderation"])
IMAGE_CATEGORIES = ("sexual", "violence", "self-harm")


def result(scores: dict[str, float]) -> dict[str, Any]:
    full = dict.fromkeys(NAMES, 0.0001) | scores
    return {
        "flagged": any(s >= 0.5 for s in full.values()),
        "categories": {k: s >= 0.5 for k, s in full.items()},
        "category_scores": full,
        "category_applied_input_types": {k: ["image"] if k.split("/")[0] in IMAGE_CATEGORIES else [] for k in full},
    }


ANSWERS = {
    KNIFE.data_url: result({"violence": 0.82, "violence/graphic": 0.61, "self-harm": 0.3}),
    FLOWER.data_url: result({"sexual": 0.2}),
}


def moderation_answer(request: Request) -> tuple[int, Any, dict[str, str]]:
    if request.headers.get("authorization") != f"Bearer {KEY}":
        return 401, {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}, {}
    body = request.json
    url = body["input"][0]["image_url"]["url"]
    return 200, {"id": "modr-1", "model": body["model"], "results": [ANSWERS[url]]}, {}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ApiServer(moderation_answer) as srv:
        yield srv


def det(server: ApiServer, spec: str = "openai-moderation", **options: Any) -> OpenAIModerationDetector:
    d = create_detector(spec, {"base_url": server.url + "/v1", **options})
    assert isinstance(d, OpenAIModerationDetector)
    return d


def test_flagged_image(server: ApiServer) -> None:
    pred = predict_once(det(server), Kind.IMAGE, [KNIFE])
    assert pred.harmful is True and pred.categories == ["A"]
    assert pred.score == pytest.approx(0.82)
    assert pred.labels["violence/graphic"] == pytest.approx(0.61)
    req = server.requests[-1]
    assert req.path == "/v1/moderations"
    assert req.json["model"] == "omni-moderation-latest"
    assert req.json["input"] == [{"type": "image_url", "image_url": {"url": KNIFE.data_url}}]


def test_unflagged_image_and_threshold(server: ApiServer) -> None:
    pred = predict_once(det(server), Kind.IMAGE, [FLOWER])
    assert pred.harmful is False and pred.categories == [] and pred.score == pytest.approx(0.2)
    low = predict_once(det(server, threshold=0.1), Kind.IMAGE, [FLOWER])
    assert low.harmful is True and low.categories == ["F"]
    both = predict_once(det(server, threshold=0.25), Kind.IMAGE, [KNIFE])
    assert both.categories == ["A", "D"]


def test_model_from_spec_and_video(server: ApiServer) -> None:
    pred = predict_once(det(server, "openai-moderation:omni-moderation-2024-09-26"), Kind.VIDEO, [FLOWER, KNIFE])
    assert pred.harmful is True
    assert [r.json["model"] for r in server.requests] == ["omni-moderation-2024-09-26"] * 2


def test_retries_then_answers(server: ApiServer) -> None:
    server.fail_next([429, 500])
    pred = predict_once(det(server), Kind.IMAGE, [KNIFE])
    assert pred.harmful is True and len(server.requests) == 3


def test_rejected_key_is_a_one_line_error(server: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    pred = predict_once(det(server), Kind.IMAGE, [KNIFE])
    assert pred.harmful is None and pred.error is not None
    assert "$OPENAI_API_KEY" in pred.error and "\n" not in pred.error
    assert "sk-wrong" not in pred.error


def test_check_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOD_KEY", raising=False)
    d = create_detector("openai-moderation", {"api_key_env": "MOD_KEY"})
    with pytest.raises(BackendUnavailableError, match="MOD_KEY is not set"):
        asyncio.run(d.check())


def test_identity() -> None:
    base = create_detector("openai-moderation").identity()
    assert base["model"] == "omni-moderation-latest"
    assert create_detector("openai-moderation", {"threshold": 0.3}).identity() != base
    assert create_detector("openai-moderation", {"base_url": "http://127.0.0.1:1/v1"}).identity() == base
