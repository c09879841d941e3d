from __future__ import annotations

import asyncio

import pytest

from tests.detectors.conftest import drawn
from vhd.detectors.base import Prediction, best_scores, first_line, judge_one_image
from vhd.errors import MissingDependencyError

RED = drawn("red")


def judge(n: int) -> Prediction:
    return Prediction(n > 0, score=float(n))


def test_judge_one_image_runs_then_judges_with_latency() -> None:
    pred = asyncio.run(judge_one_image("demo", [RED], lambda image: len(image.data), judge, fatal=()))
    assert pred.harmful is True and pred.score == float(len(RED.data)) and pred.latency_s > 0


def test_judge_one_image_takes_one_image_only() -> None:
    pred = asyncio.run(judge_one_image("demo", [RED, RED], lambda image: 1, judge, fatal=()))
    assert pred.harmful is None and pred.error == "demo judges one image at a time, got 2"


def test_judge_one_image_keeps_a_samples_error_and_raises_fatal_ones() -> None:
    def broken(image: object) -> int:
        raise ValueError("  cannot decode\nsecond line")

    pred = asyncio.run(judge_one_image("demo", [RED], broken, judge, fatal=(MissingDependencyError,)))
    assert pred.harmful is None and pred.error == "demo failed: cannot decode" and pred.latency_s > 0

    def missing(image: object) -> int:
        raise MissingDependencyError("nudenet", "nudenet")

    with pytest.raises(MissingDependencyError):
        asyncio.run(judge_one_image("demo", [RED], missing, judge, fatal=(MissingDependencyError,)))


def test_best_scores_and_first_line() -> None:
    found = [{"class": "A", "score": 0.2}, {"class": "B", "score": 0.9}, {"class": "A", "score": 0.7}]
    assert best_scores(found, "class") == {"A": 0.7, "B": 0.9}
    assert best_scores([], "label") == {}
    assert first_line(RuntimeError()) == "RuntimeError"
    assert first_line(RuntimeError("\n top\nrest")) == "top"
