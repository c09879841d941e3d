"""`vhd bench` holds no per-sample objects for the run: predictions on disk, work streamed, bootstrap in blocks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.bench.conftest import ROWS, make_images, write_labels
from vhd.bench import metrics
from vhd.bench.data import BenchItem, load_bench_set
from vhd.bench.evaluate import evaluate_detector
from vhd.bench.predictions import PredictionLog
from vhd.bench.runner import DetectorRun, _Job, run_bench
from vhd.detectors.base import Prediction
from vhd.detectors.registry import create_detector
from vhd.taxonomy.taxonomy import default_taxonomy


def test_prediction_log_is_a_mapping_in_first_put_order() -> None:
    log = PredictionLog()
    log.put("b", Prediction(True, score=np.float32(0.75), categories=["A"], latency_s=2.0))
    log.put("a", Prediction(None, error="boom"))
    log.put("c", Prediction(False, score=0.1, labels={"x": 0.5}, latency_s=1.0))
    log.put("b", Prediction(False, score=0.25, latency_s=4.0))  # replaced in place, as a dict does
    assert list(log) == ["b", "a", "c"] and len(log) == 3
    assert [sid for sid, _ in log.items()] == ["b", "a", "c"]
    assert log["b"] == Prediction(False, score=0.25, latency_s=4.0)
    assert log.get("zz") is None and "a" in log and "zz" not in log
    with pytest.raises(KeyError):
        log["zz"]
    assert (log.failed, log.answered, log.latency_s) == (1, 2, 5.0)
    first = PredictionLog({"x": Prediction(True, score=np.float32(0.5), boxes=[{"box": (1, 2, 3, 4)}])})
    got = first["x"]
    assert type(got.score) is float and got.score == 0.5 and got.boxes == [{"box": [1, 2, 3, 4]}]
    log.close()


def test_run_bench_keeps_predictions_on_disk(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    run = run_bench(load_bench_set(labels, media=media), [create_detector("red")])
    (det,) = run.detectors
    assert isinstance(det.predictions, PredictionLog), "a dict of every prediction came back"
    assert len(det.predictions) == len(ROWS) and det.failed == 1  # the green image
    by_hand = DetectorRun(det.label, det.name, det.key, det.identity, det.multiclass, dict(det.predictions.items()))
    assert det.failed == by_hand.failed and det.mean_latency_s == pytest.approx(by_hand.mean_latency_s)


def test_evaluation_from_the_log_equals_evaluation_from_a_dict(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    bench = load_bench_set(labels, media=media)
    run = run_bench(bench, [create_detector("red"), create_detector("hive")])
    for det in run.detectors:
        as_dict = DetectorRun(det.label, det.name, det.key, det.identity, det.multiclass, dict(det.predictions.items()))
        as_dict.computed, as_dict.wall_s = det.computed, det.wall_s
        tax = default_taxonomy()
        a = evaluate_detector(det, bench.items, tax, resamples=50).to_dict()
        b = evaluate_detector(as_dict, bench.items, tax, resamples=50).to_dict()
        assert a == b


def test_work_is_fed_through_a_bounded_queue(tmp_path: Path) -> None:
    """The runner never draws more than a few samples ahead of the ones finished."""
    make_images(tmp_path / "m")
    rows = [(f"{k}_{name}", *rest) for k in range(6) for name, *rest in ROWS]
    for k in range(6):
        for name, *_ in ROWS:
            (tmp_path / "m" / f"{k}_{name}").write_bytes((tmp_path / "m" / name).read_bytes() + bytes([k]))
    bench = load_bench_set(write_labels(tmp_path / "m" / "l.csv", rows))
    drawn = 0
    ahead: list[int] = []

    def work() -> Iterator[tuple[BenchItem, list[int]]]:
        nonlocal drawn
        for item in bench.items:
            drawn += 1
            yield item, [0]

    dets = [create_detector("red", {"delay": 0.001})]
    run = DetectorRun("red", "red", "k", {}, True)
    assert isinstance(run.predictions, PredictionLog)
    job = _Job(dets, [run], [run.predictions], None, None, 2, lambda done, total: ahead.append(drawn - done))
    asyncio.run(job.run(work(), len(bench.items), 2))
    assert run.computed == len(bench.items) == 60
    assert max(ahead) <= 2 * 2 + 2 + 1  # queue of 2 x workers, one in each worker, the one being put


def test_bootstrap_blocks_equal_one_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    for n in (1, 7, 1000):
        one = np.random.default_rng(3).integers(0, n, (100, n))
        assert (np.concatenate(list(metrics.resample_blocks(n, 100, 3))) == one).all()
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300).tolist()
    pred = [None if k % 17 == 0 else bool(v) for k, v in enumerate(rng.integers(0, 2, 300))]
    scores = [None if p is None else float(s) for p, s in zip(pred, rng.random(300), strict=True)]
    whole = metrics.binary_result(y, [pred], scores, resamples=200).to_dict()
    mean = metrics.mean_value([float(v) for v in y], 200)
    monkeypatch.setattr(metrics.values, "BLOCK_CELLS", 1000)  # 3 resamples a block
    assert len(list(metrics.resample_blocks(300, 200, 0))) == 67
    assert metrics.binary_result(y, [pred], scores, resamples=200).to_dict() == whole
    assert metrics.mean_value([float(v) for v in y], 200) == mean
