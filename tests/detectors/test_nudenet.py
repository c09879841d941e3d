from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from vhd.detectors.base import Prediction
from vhd.detectors.nudenet import HARMFUL_LABELS, NUDENET_LABELS, NudeNetDetector
from vhd.detectors.registry import create_detector
from vhd.errors import ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

pytest.importorskip("nudenet")


@pytest.fixture(scope="module")
def detector() -> NudeNetDetector:
    det = create_detector("nudenet")
    assert isinstance(det, NudeNetDetector)
    asyncio.run(det.check())
    return det


def test_defaults_are_the_papers_four_labels() -> None:
    det = NudeNetDetector("nudenet")
    assert (
        set(det.opts.labels)
        == set(HARMFUL_LABELS)
        == {
            "FEMALE_BREAST_EXPOSED",
            "FEMALE_GENITALIA_EXPOSED",
            "ANUS_EXPOSED",
            "MALE_GENITALIA_EXPOSED",
        }
    )
    assert set(HARMFUL_LABELS) <= set(NUDENET_LABELS)
    assert det.opts.threshold == 0.0


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea", "camera"])
def test_real_inference_on_photos(detector: NudeNetDetector, photo: Callable[[str], EncodedImage], name: str) -> None:
    pred = asyncio.run(detector.predict(Kind.IMAGE, [photo(name)]))
    assert pred.error is None
    assert isinstance(pred.harmful, bool)
    assert pred.score is not None and 0.0 <= pred.score <= 1.0
    assert all(label in NUDENET_LABELS and 0.0 < conf <= 1.0 for label, conf in pred.labels.items())
    assert pred.categories == (["F"] if pred.harmful else [])
    assert pred.latency_s > 0


def test_astronaut_face_is_found(detector: NudeNetDetector, photo: Callable[[str], EncodedImage]) -> None:
    # The astronaut portrait shows a woman's face: NudeNet's FACE_FEMALE class must fire, which proves
    # the real weights ran on the decoded pixels (a benign class, so it never makes the image harmful).
    pred = asyncio.run(detector.predict(Kind.IMAGE, [photo("astronaut")]))
    assert "FACE_FEMALE" in pred.labels


def test_harmful_labels_are_configurable(photo: Callable[[str], EncodedImage]) -> None:
    det = create_detector("nudenet", {"labels": "face_female, FACE_MALE"})
    assert isinstance(det, NudeNetDetector)
    pred = asyncio.run(det.predict(Kind.IMAGE, [photo("astronaut")]))
    assert pred.harmful is True
    assert pred.score == pytest.approx(max(v for k, v in pred.labels.items() if k.startswith("FACE_")))
    assert pred.categories == ["F"]
    strict = create_detector("nudenet", {"labels": ["FACE_FEMALE"], "threshold": 1.0})
    assert asyncio.run(strict.predict(Kind.IMAGE, [photo("astronaut")])).harmful is False


def test_judge_rule() -> None:
    det = NudeNetDetector("n", options={"threshold": "0.5"})
    pred = det.judge(
        [
            {"class": "FACE_FEMALE", "score": 0.9, "box": [0, 0, 1, 1]},
            {"class": "ANUS_EXPOSED", "score": 0.3, "box": [0, 0, 1, 1]},
            {"class": "MALE_GENITALIA_EXPOSED", "score": 0.6, "box": [0, 0, 1, 1]},
            {"class": "MALE_GENITALIA_EXPOSED", "score": 0.7, "box": [0, 0, 1, 1]},
        ]
    )
    assert pred.harmful is True and pred.score == pytest.approx(0.7)
    assert pred.labels == {"FACE_FEMALE": 0.9, "ANUS_EXPOSED": 0.3, "MALE_GENITALIA_EXPOSED": 0.7}
    none = det.judge([{"class": "ANUS_EXPOSED", "score": 0.3, "box": [0, 0, 1, 1]}])
    assert none == Prediction(False, score=0.0, labels={"ANUS_EXPOSED": 0.3})


def test_video_is_judged_frame_by_frame(detector: NudeNetDetector, photo: Callable[[str], EncodedImage]) -> None:
    frames = [photo("coffee"), photo("astronaut")]
    video = asyncio.run(detector.predict(Kind.VIDEO, frames))
    singles = [asyncio.run(detector.predict(Kind.IMAGE, [f])) for f in frames]
    assert video.harmful == any(p.harmful for p in singles)
    assert video.labels.keys() == {k for p in singles for k in p.labels}


def test_undecodable_image_is_a_per_sample_error(detector: NudeNetDetector) -> None:
    pred = asyncio.run(detector.predict(Kind.IMAGE, [EncodedImage(b"not an image", "image/jpeg", 1, 1)]))
    assert pred.harmful is None and pred.error is not None and pred.error.startswith("nudenet failed")


def test_identity_changes_with_options() -> None:
    a = NudeNetDetector("a").identity()
    b = NudeNetDetector("b", options={"threshold": 0.5}).identity()
    assert a != b and a["labels"] == sorted(HARMFUL_LABELS)
    assert NudeNetDetector("c").identity() == a  # the label is not part of the identity


@pytest.mark.parametrize(
    ("options", "fragment"),
    [({"labels": "NOSE"}, "unknown NudeNet class"), ({"threshold": 2}, "threshold"), ({"colour": 1}, "colour")],
)
def test_bad_options(options: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        NudeNetDetector("n", options=options)


def test_rejects_a_model() -> None:
    with pytest.raises(ConfigError, match="takes no model"):
        create_detector("nudenet:foo")
