"""`vhd annotate --cascade`: stages decide the clear samples, the rest reach the debate.

The stage is the bench tests' red detector (score = the centre pixel's red share; it fails on
green images); the debate runs on the scripted backend. Images: pure red (score 1: decided
harmful), black (score 0: decided unharmful), half red (inside the band: debated) and green (the
stage errs: debated).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from vhd.annotate.cascade import DEBATE, Stage, build_cascade, parse_thresholds
from vhd.cli.main import main
from vhd.detectors import registry
from vhd.detectors.base import Prediction
from vhd.errors import ConfigError
from vhd.store.sqlite import Store

COLOURS = {"red": (255, 0, 0), "black": (0, 0, 0), "half": (128, 0, 0), "green": (0, 255, 0)}


@pytest.fixture
def red_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")


@pytest.fixture
def media(tmp_path: Path) -> Path:
    folder = tmp_path / "media"
    folder.mkdir()
    for name, rgb in COLOURS.items():
        Image.new("RGB", (32, 32), rgb).save(folder / f"{name}.png")
    return folder


def _annotate(media: Path, db: Path, *extra: str) -> list[str]:
    return ["annotate", str(media), "--model", "scripted:demo", "--store", str(db), "--no-progress", *extra]


def test_stages_decide_the_clear_samples_and_the_rest_are_debated(
    red_stage: None, media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "run.db"
    flags = ["--cascade", "cheap=red", "--cascade-thresholds", "0.2:0.8"]
    assert main([*_annotate(media, db, *flags), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["decided_by"] == {"cheap": 2, DEBATE: 2}
    # 4 stage calls + 2 debates of 5 calls (2 rounds x 2 debaters + the judge)
    assert summary["stage_calls"] == 4 and summary["usage"]["calls"] == 4 + 2 * 5
    with Store(db) as store:
        by_path = {Path(s.path).stem: a for s, a in store.iter_annotations()}
        config_hash = by_path["red"].config_hash
        assert store.decided_by_counts(config_hash) == {"cheap": 2, DEBATE: 2}
    red, black, half, green = (by_path[n] for n in ("red", "black", "half", "green"))
    # the stage's score (the JPEG sent to models shifts pure red by a level)
    assert (red.decided_by, red.verdict.harmful) == ("cheap", True) and red.verdict.score == pytest.approx(1, abs=0.01)
    assert (black.decided_by, black.verdict.harmful) == ("cheap", False) and black.verdict.score == pytest.approx(
        0, abs=0.01
    )
    assert "cascade stage cheap (red)" in red.verdict.reason and red.turns == [] and red.usage.calls == 1
    assert half.decided_by == green.decided_by == DEBATE and len(half.turns) == 5 and half.usage.calls == 6
    # resumes: nothing asked again under the same cascade
    assert main([*_annotate(media, db, *flags), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["already_done"] == 4 and again["usage"]["calls"] == 0
    # another band is another configuration
    assert main([*_annotate(media, db, "--cascade", "cheap=red", "--cascade-thresholds", "0.6:0.7"), "--json"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["already_done"] == 0 and other["decided_by"] == {"cheap": 3, DEBATE: 1}

    # show, export and stats say who decided
    assert main(["show", str(db), str(media / "red.png"), "--config-hash", config_hash]) == 0
    assert "decided by: cheap (cascade)" in capsys.readouterr().out
    out = tmp_path / "all.jsonl"
    assert main(["export", str(db), "--format", "jsonl", "--out", str(out), "--config-hash", config_hash]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["decided_by"] for r in records) == ["cheap", "cheap", DEBATE, DEBATE]
    capsys.readouterr()
    stats_out = tmp_path / "stats"
    assert main(["stats", "--store", str(db), "--out", str(stats_out), "--no-plot", "--config-hash", config_hash]) == 0
    assert "decided by (cascade): cheap 2, debate 2" in capsys.readouterr().out
    from vhd.compare.review_queue import build_queue

    queue = build_queue(db, config_hash=config_hash, margin=0.5)
    assert sorted(i.decided_by or "" for i in queue.items) == ["cheap", "cheap", DEBATE, DEBATE]
    assert "decided_by" in queue.to_csv().splitlines()[0]


def test_calibrated_scores_decide(
    red_stage: None, media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # sigmoid(1 * logit(p) + 3): half red (0.502) -> 0.953, above 0.9; black stays ~0 (clamped logit)
    cal = tmp_path / "calibration.json"
    cal.write_text(
        json.dumps({"version": 1, "detectors": {"cheap": {"method": "platt", "a": 1.0, "b": 3.0, "threshold": 0.5}}})
    )
    flags = ["--cascade", "cheap=red", "--cascade-thresholds", "0.2:0.9", "--cascade-calibration", str(cal)]
    assert main([*_annotate(media, tmp_path / "c.db", *flags), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["decided_by"] == {"cheap": 3, DEBATE: 1}


def test_flag_errors_say_what_to_do(
    red_stage: None, media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "e.db"
    assert main(_annotate(media, db, "--cascade", "red")) == 2
    assert "one --cascade-thresholds LOW:HIGH per --cascade stage" in capsys.readouterr().err
    assert main(_annotate(media, db, "--cascade", "red", "--cascade-thresholds", "0.9:0.1")) == 2
    assert "0 <= LOW <= HIGH <= 1" in capsys.readouterr().err
    assert main(_annotate(media, db, "--cascade", "nosuch", "--cascade-thresholds", "0.1:0.9")) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in ("hod", "llamaguard", "nudenet", "vlm"))
    assert main(_annotate(media, db, "--cascade", "debate=red", "--cascade-thresholds", "0.1:0.9")) == 2
    assert "distinct and not 'debate'" in capsys.readouterr().err
    assert not db.exists() or not list(Store(db).iter_annotations())


def test_stage_rule() -> None:
    class Fixed:
        label, name, model, video_native = "s", "fixed", None, False

    stage = Stage(Fixed(), 0.2, 0.8)  # type: ignore[arg-type]
    assert stage.decide(Prediction(True, score=0.9)) is True
    assert stage.decide(Prediction(False, score=0.1)) is False
    assert stage.decide(Prediction(True, score=0.8)) is None  # the band is closed: 0.8 goes on
    assert stage.decide(Prediction(False, score=0.2)) is None
    assert stage.decide(Prediction(None, score=0.99, error="unparsed: x")) is None
    assert stage.decide(Prediction(True, score=None)) is None
    assert stage.decide(Prediction(True, score=0.95, error="refused")) is None
    assert parse_thresholds("0:1") == (0.0, 1.0)
    for bad in ("0.5", "a:b", "0.7:0.2", "-0.1:0.5"):
        with pytest.raises(ConfigError):
            parse_thresholds(bad)
    with pytest.raises(ConfigError, match="no calibration for any stage"):
        build_cascade([Fixed()], ["0.1:0.9"], {"other": lambda s: s})  # type: ignore[list-item]
