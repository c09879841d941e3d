"""Per-frame scores over time -> harmful spans (hysteresis, joining), and the Detector interface around it."""

from __future__ import annotations

import asyncio

import pytest
from PIL import Image

from tests.bench.fake_detector import RedDetector
from vhd.detectors.base import Prediction
from vhd.detectors.timeline import spans_from_scores
from vhd.media.image import encode_image
from vhd.records import Segment


def _spans(segments: list[Segment]) -> list[tuple[float, float]]:
    return [(s.start_s, s.end_s) for s in segments]


def test_threshold_and_frame_durations() -> None:
    times = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    scores = [0.1, 0.9, 0.8, 0.2, 0.1, 0.7]
    spans = spans_from_scores(times, scores, merge_gap_s=0.0, decided_by="q16")
    # each frame stands until the next one; the last for one step (no end given)
    assert _spans(spans) == [(1.0, 3.0), (5.0, 6.0)]
    assert spans[0].harmful is True and spans[0].score == 0.9 and spans[0].decided_by == "q16"
    assert _spans(spans_from_scores(times, scores, merge_gap_s=0.0, end_s=5.5)) == [(1.0, 3.0), (5.0, 5.5)]


def test_hysteresis_keeps_a_span_open_above_low() -> None:
    times = [float(t) for t in range(6)]
    scores = [0.2, 0.9, 0.4, 0.45, 0.9, 0.1]
    assert _spans(spans_from_scores(times, scores, merge_gap_s=0.0)) == [(1.0, 2.0), (4.0, 5.0)]
    assert _spans(spans_from_scores(times, scores, low=0.3, merge_gap_s=0.0)) == [(1.0, 5.0)]
    # a frame at 0.4 alone never opens a span
    assert spans_from_scores(times, [0.4] * 6, low=0.3) == []


def test_joining_and_minimum_duration() -> None:
    times = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    scores = [0.9, 0.1, 0.9, 0.1, 0.1, 0.1, 0.9]
    assert _spans(spans_from_scores(times, scores, merge_gap_s=0.0)) == [(0.0, 0.5), (1.0, 1.5), (3.0, 3.5)]
    assert _spans(spans_from_scores(times, scores, merge_gap_s=0.5)) == [(0.0, 1.5), (3.0, 3.5)]
    assert _spans(spans_from_scores(times, scores, merge_gap_s=0.5, min_duration_s=1.0)) == [(0.0, 1.5)]


def test_missing_scores_and_bad_input() -> None:
    assert _spans(spans_from_scores([0.0, 1.0, 2.0], [0.9, None, 0.9], merge_gap_s=0.0)) == [(0.0, 1.0), (2.0, 3.0)]
    assert spans_from_scores([], []) == []
    with pytest.raises(ValueError, match="one entry per frame"):
        spans_from_scores([0.0], [])
    with pytest.raises(ValueError, match="backwards"):
        spans_from_scores([1.0, 0.5], [0.1, 0.2])
    with pytest.raises(ValueError, match="low"):
        spans_from_scores([0.0], [0.1], threshold=0.5, low=0.6)


def _frame(red: bool) -> object:
    return encode_image(Image.new("RGB", (16, 16), (250, 10, 10) if red else (10, 10, 250)))


def test_a_frame_scoring_detector_places_harm_in_time() -> None:
    det = RedDetector("red")
    assert det.scores_frames
    frames = [_frame(r) for r in (False, True, True, False, False)]
    times = [0.0, 2.0, 4.0, 6.0, 8.0]
    spans = asyncio.run(det.predict_segments(times, frames, end_s=10.0))  # type: ignore[arg-type]
    assert spans is not None and _spans(spans) == [(2.0, 6.0)] and spans[0].decided_by == "red"


def test_a_video_native_detector_has_no_frame_scores() -> None:
    class Native(RedDetector):
        video_native = True

    det = Native("native")
    assert not det.scores_frames
    assert asyncio.run(det.predict_segments([0.0], [_frame(True)])) is None  # type: ignore[list-item]
    with pytest.raises(NotImplementedError):
        asyncio.run(det.score_frames([_frame(True)]))  # type: ignore[list-item]


def test_prediction_keeps_its_segments() -> None:
    pred = Prediction(True, score=0.9, segments=[Segment(1.0, 2.0, True, score=0.9, decided_by="red")])
    back = Prediction.from_dict(pred.to_dict())
    assert back.segments == pred.segments
    assert "segments" not in Prediction(False).to_dict() and Prediction.from_dict({"harmful": False}).segments is None


def test_the_debate_detector_reports_its_verdicts_segments() -> None:
    from vhd.detectors.debate import verdict_segments
    from vhd.records import Verdict

    spans = [Segment(0.0, 4.0, False, decided_by="screen"), Segment(4.0, 9.0, True, score=0.8, decided_by="debate")]
    assert verdict_segments(Verdict(harmful=True, reason="x", segments=spans)) == spans
    assert verdict_segments(Verdict(harmful=False, reason="x")) is None
