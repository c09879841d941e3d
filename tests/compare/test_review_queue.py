"""`vhd review-queue`: which samples enter, their order, the CSV and the Label Studio tasks."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

import vhd
from vhd.bench.cache import PredictionCache
from vhd.cli.main import main
from vhd.compare.review_queue import build_queue, export_review_labelstudio
from vhd.detectors.base import Prediction
from vhd.errors import ConfigError


def _images(folder: Path, n: int) -> list[str]:
    folder.mkdir(parents=True)
    shas = []
    for i in range(n):
        img = Image.new("RGB", (40, 32), (40 * i, 200 - 30 * i, 90))
        ImageDraw.Draw(img).rectangle((2 + i, 3, 20, 25), fill=(255, 255 - 40 * i, 0))
        path = folder / f"s{i}.jpg"  # JPEGs reach the backend as they are: rules match the file hash
        img.save(path)
        shas.append(hashlib.sha256(path.read_bytes()).hexdigest())
    return shas


def _judge(sha: str, reply: str, p_yes: float | None = None) -> dict:
    rule: dict = {"when": {"tag": "judge", "image": sha[:16]}, "reply": reply}
    if p_yes is not None:
        rule["logprobs"] = {"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}
    return rule


def _model(tmp_path: Path, name: str, rules: list[dict]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"default": "1. A point.", "rules": rules}))
    return f"scripted:{path}"


@pytest.fixture
def contested(tmp_path: Path) -> tuple[Path, list[str], Path]:
    """A store with two configurations and a bench report: samples 0-4 as in the comments."""
    a, b, c, d, e = _images(tmp_path / "media", 5)
    base = [
        _judge(a, "Yes, violence.", 0.55),  # uncertain
        _judge(b, "No, a landscape.", 0.40),  # uncertain
        _judge(c, "Yes, weapons.", 0.99),  # confident; the detector says no
        _judge(d, "No, a street.", 0.01),  # confident; the other configuration says yes
        _judge(e, "Perhaps, hard to say."),  # unreadable
    ]
    store = tmp_path / "run.db"
    vhd.annotate([tmp_path / "media"], model=_model(tmp_path, "other", [_judge(d, "Yes, drugs.", 0.9)]), store=store)
    vhd.annotate([tmp_path / "media"], model=_model(tmp_path, "main", base), store=store)
    report = tmp_path / "report"
    report.mkdir()
    (report / "results.json").write_text(json.dumps({"detectors": [{"label": "cheap", "run": {"key": "k1"}}]}))
    with PredictionCache(report / "predictions.sqlite") as cache:
        cache.put_many("k1", {a: Prediction(True, 0.7), c: Prediction(False, 0.1), d: Prediction(False, 0.2)})
    return store, [a, b, c, d, e], report


def test_queue_order_and_reasons(contested: tuple[Path, list[str], Path]) -> None:
    store, (a, b, c, d, e), report = contested
    q = build_queue(store, detector_reports=[report])
    assert q.candidates == 5 and q.total == 5
    assert q.detectors == ["detector:cheap"] and len(q.other_configs) == 1
    # no decision first, then closest to 0.5, then (equal distance) the larger split: c is 1 yes
    # against 1 no, d 1 no against 1 yes and 1 no (the other configuration answered only on d)
    assert [i.sample_id for i in q.items] == [e, a, b, c, d]
    by = {i.sample_id: i for i in q.items}
    assert by[e].harmful is None and by[e].reasons[0] == "the judge's answer could not be read"
    assert by[a].score == pytest.approx(0.55) and by[a].reasons == ["judge uncertain (score 0.55)"]
    assert by[d].disagreement == pytest.approx(1 / 3) and by[d].dissent == 1
    assert any(r.startswith("another configuration") and r.endswith("says yes") for r in by[d].reasons)
    assert by[c].reasons == ["a detector (cheap) says no"] and by[c].disagreement == 0.5


def test_queue_without_detectors_margin_and_top(contested: tuple[Path, list[str], Path]) -> None:
    store, (a, b, _c, d, e), _ = contested
    q = build_queue(store)
    assert [i.sample_id for i in q.items] == [e, a, b, d]  # c agrees with everyone here
    assert [i.sample_id for i in build_queue(store, margin=0.07).items] == [e, a, d]
    top = build_queue(store, top=2)
    assert top.total == 4 and [i.sample_id for i in top.items] == [e, a]
    # the other configuration as the judge (a prefix is enough): it decided only d, disputed by main
    other = q.other_configs[0].split(":")[1]
    q2 = build_queue(store, config_hash=other)
    assert q2.config_hash.startswith(other) and q2.items[-1].sample_id == d
    assert q2.items[-1].reasons[-1].endswith("says no") and len(q2.items) == 5


def test_queue_csv_and_labelstudio(contested: tuple[Path, list[str], Path], tmp_path: Path) -> None:
    store, (a, b, c, d, e), report = contested
    out, tasks = tmp_path / "q" / "queue.csv", tmp_path / "ls" / "tasks.json"
    argv = ["review-queue", "--store", str(store), "--detector-report", str(report), "--out", str(out)]
    assert main([*argv, "--export-labelstudio", str(tasks), "--media-root", str(tmp_path)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["sample_id"] for r in rows] == [e, a, b, c, d] and rows[0]["rank"] == "1"
    assert rows[1]["judge"] == "yes" and rows[1]["score"] == "0.5500" and "detector:cheap=yes" in rows[1]["votes"]
    assert rows[0]["judge"] == "" and rows[0]["score"] == ""
    data = json.loads(tasks.read_text())
    assert [t["data"]["sample_id"] for t in data] == [e, a, b, c, d]
    assert data[1]["data"]["image"] == "/data/local-files/?d=media/s0.jpg"
    assert data[1]["data"]["review_rank"] == 2 and "uncertain" in data[1]["data"]["review_reasons"]
    assert "predictions" not in data[0]  # no decision to pre-fill
    pred = data[1]["predictions"][0]
    assert pred["score"] == pytest.approx(0.55)
    assert pred["result"][0] == {
        "from_name": "harmful",
        "to_name": "media",
        "type": "choices",
        "value": {"choices": ["Harmful"]},
    }
    assert pred["result"][1]["value"] == {"text": ["violence"]}
    assert data[1]["data"]["affirmative"] == "1. A point.\n\n1. A point."
    assert tasks.with_suffix(".xml").read_text().startswith("<View>")


def test_queue_errors(contested: tuple[Path, list[str], Path], tmp_path: Path) -> None:
    store, _, _ = contested
    with pytest.raises(ConfigError, match="no store at"):
        build_queue(tmp_path / "none.db")
    with pytest.raises(ConfigError, match=r"no configuration\(s\) match 'zzz'"):
        build_queue(store, config_hash="zzz")
    with pytest.raises(ConfigError, match="not a `vhd bench` report"):
        build_queue(store, detector_reports=[tmp_path])
    with pytest.raises(ConfigError, match="--margin"):
        build_queue(store, margin=0.7)


def test_export_without_items(contested: tuple[Path, list[str], Path], tmp_path: Path) -> None:
    store, _, _ = contested
    q = build_queue(store, top=1)
    q.items = []
    path = export_review_labelstudio(q, tmp_path / "t.json")
    assert json.loads(path.read_text()) == []


def test_uncertainty_is_highest_at_one_half_and_the_queue_starts_there() -> None:
    from vhd.compare.review_queue import ReviewItem

    def item(name: str, harmful: bool | None, score: float | None) -> ReviewItem:
        return ReviewItem(name, f"{name}.jpg", "image", harmful, score)

    sure_yes, sure_no = item("sure-yes", True, 1.0), item("sure-no", False, 0.0)
    even, leaning, confident = item("even", True, 0.5), item("leaning", True, 0.6), item("confident", False, 0.05)
    unread, unscored = item("unread", None, None), item("unscored", True, None)
    # 1 - |2p - 1|: grows as the score nears 0.5, never with certainty
    assert even.uncertainty == pytest.approx(1.0)
    assert leaning.uncertainty == pytest.approx(0.8)
    assert confident.uncertainty == pytest.approx(0.1)
    assert sure_yes.uncertainty == 0.0 and sure_no.uncertainty == 0.0
    assert unread.uncertainty == 1.0 and unscored.uncertainty == 0.0
    assert float(even.row(1)["uncertainty"]) > float(confident.row(2)["uncertainty"])
    items = [sure_yes, confident, unscored, leaning, even, unread, sure_no]
    order = [i.sample_id for i in sorted(items, key=ReviewItem.sort_key)]
    # most uncertain first; the tie (unread and even at 1) goes by path
    assert order == ["even", "unread", "leaning", "confident", "sure-no", "sure-yes", "unscored"]


def test_a_malformed_bench_report_is_one_clear_error_or_skipped_entries(tmp_path: Path) -> None:
    from vhd.compare.review_queue import read_detector_report

    report = tmp_path / "report"
    report.mkdir()
    with PredictionCache(report / "predictions.sqlite") as cache:
        cache.put_many("k1", {"s1": Prediction(True, 0.7), "s2": Prediction(None, error="boom")})
    results = report / "results.json"
    for bad in ("[]", '{"detectors": 3}', "null"):
        results.write_text(bad)
        with pytest.raises(ConfigError, match=r"not a `vhd bench` results\.json"):
            read_detector_report(report)
    # entries that are not detectors are skipped; the good one is read
    results.write_text(json.dumps({"detectors": [1, "x", {"run": 5}, {"label": "cheap", "run": {"key": "k1"}}]}))
    assert read_detector_report(report) == {"cheap": {"s1": (True, 0.7)}}
