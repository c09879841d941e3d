"""The API detectors (Hive, OpenAI moderation) against hostile servers on 127.0.0.1.

A server that trickles its answer, sends an endless or huge body, or JSON nested 200,000 deep
costs one image its prediction (an error that says why), within the configured timeout, never the
run. The per-test timeouts make the code before these limits fail rather than hang.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.detectors.api_server import ApiServer
from tests.detectors.conftest import drawn, predict_once
from tests.detectors.test_hive import KEY as HIVE_KEY
from tests.detectors.test_hive import hive_answer
from tests.detectors.test_openai_moderation import KEY as OPENAI_KEY
from tests.detectors.test_openai_moderation import moderation_answer
from tests.servers.chat_server import Failure
from vhd.detectors.registry import create_detector
from vhd.records import Kind

IMAGES = {"hive": drawn("black"), "openai-moderation": drawn("gray")}  # images each server knows


@pytest.fixture(params=["hive", "openai-moderation"])
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ApiServer, str]]:
    """(detector name, its loopback server, its base_url)."""
    name = request.param
    monkeypatch.setenv("HIVE_API_KEY", HIVE_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ApiServer(hive_answer if name == "hive" else moderation_answer) as srv:
        yield name, srv, srv.url if name == "hive" else srv.url + "/v1"


def predict(api: tuple[str, ApiServer, str], **options: Any) -> tuple[str | None, float]:
    name, _, url = api
    det = create_detector(name, {"base_url": url, **options})
    start = time.monotonic()
    pred = predict_once(det, Kind.IMAGE, [IMAGES[name]])
    return pred.error, time.monotonic() - start


@pytest.mark.timeout(30)
def test_a_trickled_answer_ends_at_the_timeout(api: tuple[str, ApiServer, str]) -> None:
    api[1].hostile_next([Failure.trickle(every=0.3, seconds=30, in_headers=True)])
    error, took = predict(api, timeout=1, max_retries=0)
    assert error is not None and "timed out" in error
    assert took < 1 + 3


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (Failure.endless(limit=256 << 20), "went past the cap of 32 MiB"),
        (Failure.huge(100 << 30), "is 100 GiB, over the cap of 32 MiB"),
        (Failure.deep(200_000), "lists and objects"),
        (Failure.deep(50_000), "nested 50000 levels deep"),
    ],
    ids=["endless", "huge", "deep-200k", "deep-50k"],
)
def test_a_bomb_is_that_images_error(api: tuple[str, ApiServer, str], failure: Failure, said: str) -> None:
    api[1].hostile_next([failure])
    error, _ = predict(api, max_retries=0)
    assert error is not None and said in error, error


def test_the_next_image_is_answered_after_a_bomb(api: tuple[str, ApiServer, str]) -> None:
    api[1].hostile_next([Failure.deep(200_000)])
    assert predict(api, max_retries=0)[0] is not None
    error, _ = predict(api, max_retries=0)
    assert error is None
