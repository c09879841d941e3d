from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.detectors.api_server import ApiServer, Request
from tests.detectors.conftest import drawn, predict_once
from vhd.detectors.hive import HARMFUL_CLASSES, HiveDetector, parse_response
from vhd.detectors.registry import create_detector
from vhd.errors import BackendUnavailableError, ConfigError
from vhd.records import Kind
from vhd.taxonomy.crosswalk import default_crosswalk

KEY = "test-hive-key"
GUN, CAT, PILLS = drawn("black"), drawn("white"), drawn("yellow")

# What Hive answers for each test image: a few heads of its visual moderation model.
SCORES: dict[bytes, dict[str, float]] = {
    GUN.data: {"gun_in_hand": 0.97, "no_gun": 0.03, "general_not_nsfw_not_suggestive": 0.99, "general_nsfw": 0.004},
    CAT.data: {"general_not_nsfw_not_suggestive": 0.98, "general_suggestive": 0.02, "yes_pills": 0.5},
    PILLS.data: {"yes_pills": 0.93, "yes_smoking": 0.95, "no_pills": 0.07},
}


def hive_answer(request: Request) -> tuple[int, Any, dict[str, str]]:
    if request.headers.get("authorization") != f"Token {KEY}":
        return 403, {"message": "Forbidden"}, {}
    scores = SCORES.get(request.files.get("media", b""))
    if scores is None:
        return 200, {"status": [{"status": {"code": "400", "message": "media unreadable"}}]}, {}
    classes = [{"class": name, "score": score} for name, score in scores.items()]
    body = {
        "id": "task-1",
        "code": 200,
        "project_id": 1,
        "user_id": 2,
        "created_on": "2024-01-01T00:00:00.000Z",
        "status": [
            {
                "status": {"code": "0", "message": "SUCCESS"},
                "response": {
                    "input": {"id": "task-1", "media": {"type": "PHOTO", "mimetype": "image/jpeg"}},
                    "output": [{"time": 0, "classes": classes}],
                },
            }
        ],
    }
    return 200, body, {}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    monkeypatch.setenv("HIVE_API_KEY", KEY)
    with ApiServer(hive_answer) as srv:
        yield srv


def hive(server: ApiServer, **options: Any) -> HiveDetector:
    det = create_detector("hive", {"base_url": server.url, "backoff_base": 0, **options})
    assert isinstance(det, HiveDetector)
    return det


def test_the_papers_43_classes_all_mapped() -> None:
    assert len(HARMFUL_CLASSES) == len(set(HARMFUL_CLASSES)) == 43
    hive = default_crosswalk().schemes["hive"]
    assert set(HARMFUL_CLASSES) <= set(hive)  # every harmful class has a category for multi-class scoring
    assert all(set(hive[c].to) <= set("ABCDEFGHIJ") and hive[c].to for c in HARMFUL_CLASSES)


def test_harmful_image(server: ApiServer) -> None:
    pred = predict_once(hive(server), Kind.IMAGE, [GUN])
    assert pred.harmful is True and pred.categories == ["A"]
    assert pred.score == pytest.approx(0.97)
    assert pred.labels["no_gun"] == pytest.approx(0.03)
    req = server.requests[-1]
    assert req.path == "/api/v2/task/sync"
    assert req.files["media"] == GUN.data


def test_threshold_and_score(server: ApiServer) -> None:
    pred = predict_once(hive(server), Kind.IMAGE, [CAT])
    assert pred.harmful is False and pred.categories == []
    assert pred.score == pytest.approx(0.5)  # the highest harmful-class score, below 0.9
    low = predict_once(hive(server, threshold=0.4), Kind.IMAGE, [CAT])
    assert low.harmful is True and low.categories == ["B"]


def test_categories_most_confident_first(server: ApiServer) -> None:
    pred = predict_once(hive(server, labels="yes_pills,gun_in_hand"), Kind.IMAGE, [PILLS])
    assert pred.harmful is True and pred.categories == ["B"] and pred.score == pytest.approx(0.93)
    both = predict_once(hive(server), Kind.IMAGE, [PILLS])
    assert both.score == pytest.approx(0.95)


def test_video_any_frame(server: ApiServer) -> None:
    pred = predict_once(hive(server), Kind.VIDEO, [CAT, GUN])
    assert pred.harmful is True and pred.categories == ["A"]
    assert len(server.requests) == 2


def test_retries_on_429_and_5xx(server: ApiServer) -> None:
    server.fail_next([429, 503])
    pred = predict_once(hive(server), Kind.IMAGE, [GUN])
    assert pred.harmful is True
    assert len(server.requests) == 3


def test_gives_up_after_retries(server: ApiServer) -> None:
    server.fail_next([500] * 3)
    pred = predict_once(hive(server, max_retries=2), Kind.IMAGE, [GUN])
    assert pred.harmful is None and pred.error is not None
    assert "HTTP 500" in pred.error and "3 attempts" in pred.error


def test_task_failure_is_a_per_sample_error(server: ApiServer) -> None:
    pred = predict_once(hive(server), Kind.IMAGE, [drawn("pink")])
    assert pred.harmful is None and pred.error is not None and "code 400" in pred.error


def test_wrong_key_is_reported_without_retry(server: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTHER_KEY", "wrong")
    pred = predict_once(hive(server, api_key_env="OTHER_KEY"), Kind.IMAGE, [GUN])
    assert pred.error is not None and "403" in pred.error and "$OTHER_KEY" in pred.error
    assert len(server.requests) == 1


def test_check_fails_fast_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIVE_API_KEY", raising=False)
    det = create_detector("hive")
    with pytest.raises(BackendUnavailableError, match="HIVE_API_KEY is not set"):
        asyncio.run(det.check())


def test_identity_and_options() -> None:
    base = create_detector("hive").identity()
    assert create_detector("hive", {"threshold": 0.5}).identity() != base
    assert create_detector("hive", {"base_url": "http://127.0.0.1:1", "api_key_env": "X"}).identity() == base
    with pytest.raises(ConfigError, match="threshold"):
        create_detector("hive", {"threshold": 1.5})
    with pytest.raises(ConfigError, match="takes no model"):
        create_detector("hive:v2")


def test_parse_response_rejects_other_shapes() -> None:
    with pytest.raises(ValueError, match="unexpected Hive response"):
        parse_response({"data": []})
