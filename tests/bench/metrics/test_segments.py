from __future__ import annotations

import pytest

from vhd.bench.metrics import (
    BOUNDARY_ERROR,
    SegmentMetrics,
    match_spans,
    merge_spans,
    segment_result,
    span_iou,
)
from vhd.records import Segment


def _v(res, name):  # type: ignore[no-untyped-def]
    return res.values[name].value


def test_hand_computed_example() -> None:
    truth = [[(10.0, 20.0)], [(30.0, 40.0)]]
    pred = [[Segment(11.0, 21.0, True)], [Segment(50.0, 60.0, True), Segment(30.0, 40.0, False)]]
    res = segment_result(truth, pred, resamples=0)
    assert (res.n_true, res.n_pred, res.matched) == (2, 2, 1)
    assert _v(res, "segment_precision") == pytest.approx(0.5)
    assert _v(res, "segment_recall") == pytest.approx(0.5)
    assert _v(res, "segment_f1") == pytest.approx(0.5)
    # overlap 9 s of 20 s predicted and 20 s true
    assert _v(res, "duration_precision") == pytest.approx(9 / 20)
    assert _v(res, "duration_recall") == pytest.approx(9 / 20)
    assert _v(res, "duration_f1") == pytest.approx(9 / 20)
    assert _v(res, BOUNDARY_ERROR) == pytest.approx(1.0)
    assert res.values[BOUNDARY_ERROR].n == 2
    assert _v(res, "coverage") == 1.0


def test_iou_threshold_is_configurable() -> None:
    truth, pred = [[(10.0, 20.0)]], [[(10.0, 16.0)]]  # IoU 0.6
    assert span_iou((10.0, 20.0), (10.0, 16.0)) == pytest.approx(0.6)
    assert _v(segment_result(truth, pred, resamples=0), "segment_f1") == 1.0
    strict = segment_result(truth, pred, iou=0.7, resamples=0)
    assert _v(strict, "segment_f1") == 0.0
    assert _v(strict, BOUNDARY_ERROR) is None
    # duration-weighted metrics do not depend on the threshold
    assert _v(strict, "duration_precision") == 1.0
    assert _v(strict, "duration_recall") == pytest.approx(0.6)


def test_matching_is_one_to_one() -> None:
    # one long prediction over two true spans matches at most one of them
    res = segment_result([[(0.0, 4.0), (5.0, 10.0)]], [[(0.0, 10.0)]], resamples=0)
    assert res.matched == 1 and _v(res, "segment_recall") == 0.5 and _v(res, "segment_precision") == 1.0
    # two predictions inside one true span: one match, one false alarm
    res = segment_result([[(0.0, 10.0)]], [[(0.0, 6.0), (6.5, 10.0)]], resamples=0)
    assert res.matched == 1 and _v(res, "segment_precision") == 0.5


def test_matching_finds_the_most_pairs() -> None:
    truth = [(0.0, 10.0), (10.5, 20.0)]
    pred = [(5.0, 15.0), (0.0, 4.0)]  # the first prefers truth 0, which only the second can have
    assert match_spans(truth, pred, iou=0.1) == [(0, 1), (1, 0)]


def test_adjacent_harmful_segments_are_one_event() -> None:
    assert merge_spans([Segment(15.0, 20.0, True), Segment(10.0, 15.0, True), Segment(20.0, 30.0, False)]) == [
        (10.0, 20.0)
    ]
    res = segment_result([[(10.0, 20.0)]], [[Segment(10.0, 15.0, True), Segment(15.0, 20.0, True)]], resamples=0)
    assert res.matched == 1 and _v(res, BOUNDARY_ERROR) == 0.0
    # a gap joins only when asked
    apart = [[Segment(10.0, 14.0, True), Segment(15.0, 20.0, True)]]
    assert segment_result([[(10.0, 20.0)]], apart, resamples=0).n_pred == 2
    assert segment_result([[(10.0, 20.0)]], apart, merge_gap_s=1.0, resamples=0).n_pred == 1


def test_unanswered_video_misses_its_spans() -> None:
    res = segment_result([[(0.0, 5.0)], [(0.0, 5.0)]], [[(0.0, 5.0)], None], resamples=0)
    assert _v(res, "segment_recall") == 0.5
    assert _v(res, "coverage") == 0.5 and res.n_answered == 1


def test_undefined_without_true_spans() -> None:
    res = segment_result([[], []], [[(0.0, 1.0)], []], resamples=0)
    assert _v(res, "segment_recall") is None and _v(res, "segment_f1") is None
    assert _v(res, "duration_f1") is None
    assert _v(res, "segment_precision") == 0.0
    res = segment_result([[]], [[]], resamples=0)
    assert _v(res, "segment_precision") is None


def test_bootstrap_intervals_resample_videos() -> None:
    truth = [[(10.0, 20.0)], [(0.0, 8.0), (30.0, 35.0)], [], [(5.0, 9.0)]] * 5
    pred = [[(11.0, 20.0)], [(0.0, 8.0)], [(3.0, 4.0)], [(40.0, 50.0)]] * 5
    m = SegmentMetrics(resamples=200)
    for t, p in zip(truth, pred, strict=True):
        m.update(t, p)
    res = m.compute()
    assert res.n_videos == 20
    for name, val in res.values.items():
        if name == "coverage":
            continue
        assert val.low is not None and val.high is not None, name
        assert val.low <= val.value <= val.high, name
    assert res.values["segment_f1"].low < res.values["segment_f1"].high
    # the same video repeated: every resample gives the same number
    same = segment_result([[(10.0, 20.0)]] * 6, [[(11.0, 20.0)]] * 6, resamples=100)
    f1 = same.values["duration_f1"]
    assert f1.low == pytest.approx(f1.value) and f1.high == pytest.approx(f1.value)
    assert same.values[BOUNDARY_ERROR].low == pytest.approx(0.5)  # median of [1, 0] per video


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="one entry per video"):
        segment_result([[]], [])
    with pytest.raises(ValueError, match="iou"):
        SegmentMetrics(iou=0.0)


def test_to_dict_and_rows() -> None:
    res = segment_result([[(0.0, 2.0)]], [[(0.0, 2.0)]], resamples=0)
    d = res.to_dict()
    assert d["metrics"]["segment_f1"]["value"] == 1.0 and d["iou"] == 0.5 and d["true_s"] == 2.0
    assert {r["metric"] for r in res.to_rows()} >= {"segment_f1", "duration_f1", BOUNDARY_ERROR}
