from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from vhd.bench.calibration import best_threshold, fit_calibration, load_calibrations, reliability, save_calibrations
from vhd.bench.pipeline import benchmark, build_detectors
from vhd.errors import ConfigError
from vhd.taxonomy import default_taxonomy
from vhd.taxonomy.crosswalk import load_crosswalk


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def test_ece_by_hand() -> None:
    rel = reliability([1, 0, 1, 1], [0.95, 0.05, 0.15, 0.85])
    # bins: 0.0-0.1 {0.05:0}, 0.1-0.2 {0.15:1}, 0.8-0.9 {0.85:1}, 0.9-1.0 {0.95:1}
    assert rel.ece == pytest.approx((0.05 + 0.85 + 0.15 + 0.05) / 4)
    assert [b["count"] for b in rel.bins] == [1, 1, 1, 1]


def test_platt_matches_logistic_regression_and_temperature_helps() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    score = 1 / (1 + np.exp(-(3.0 * (y - 0.5) + rng.normal(0, 1.5, 400))))  # overconfident scores
    platt = fit_calibration(y.tolist(), score.tolist(), method="platt")
    lr = LogisticRegression(C=1e10, max_iter=1000).fit(_logit(score).reshape(-1, 1), y)
    assert platt.a == pytest.approx(lr.coef_[0][0], rel=1e-4)
    assert platt.b == pytest.approx(lr.intercept_[0], rel=1e-3, abs=1e-4)

    temp = fit_calibration(y.tolist(), score.tolist(), method="temperature")
    assert temp.b == 0

    def nll(f: object) -> float:
        return -float(
            np.mean([yy * math.log(f(s)) + (1 - yy) * math.log(1 - f(s)) for yy, s in zip(y, score, strict=True)])
        )  # type: ignore[operator]

    assert nll(temp) < nll(lambda s: s)


def test_threshold_maximises_balanced_accuracy() -> None:
    assert best_threshold([0, 0, 1, 1], [0.1, 0.3, 0.35, 0.9]) == pytest.approx(0.35)
    with pytest.raises(ConfigError, match="both harmful and unharmful"):
        fit_calibration([1, 1], [0.2, 0.3])


def test_save_and_load(tmp_path: Path) -> None:
    cal = fit_calibration([0, 1, 0, 1], [0.2, 0.7, 0.4, 0.9], method="platt", detector_key="k")
    path = save_calibrations(tmp_path / "c.json", {"det": cal})
    assert load_calibrations(path)["det"] == cal
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="--calibrate"):
        load_calibrations(tmp_path / "bad.json")


@pytest.mark.slow
def test_calibrate_split_then_reuse(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    out = tmp_path / "r"
    rep = benchmark(labels, build_detectors(["red"]), out, media=media, calibrate_split="cal", plots=False, resamples=0)
    saved = json.loads((out / "calibration.json").read_text())
    assert saved["detectors"]["red"]["n"] == 4 and saved["detectors"]["red"]["method"] == "temperature"
    all_red = rep.results[0].groups["all"].binary
    assert all_red.n == 6 and all_red.n_answered == 5  # 6 test rows, green fails (and counts as wrong)
    rep2 = benchmark(
        labels,
        build_detectors(["red"]),
        tmp_path / "r2",
        media=media,
        calibration_file=out / "calibration.json",
        plots=False,
        resamples=0,
    )
    thr = saved["detectors"]["red"]["threshold"]
    preds = rep2.run.detectors[0].predictions.values()
    assert all(p.harmful == (p.score >= thr) for p in preds if p.score is not None)


def test_crosswalk_covers_every_scheme() -> None:
    cw = load_crosswalk()
    codes = set(default_taxonomy().codes)
    assert set(cw.schemes) == {
        "nudenet",
        "hod",
        "hive",
        "llavaguard",
        "shieldgemma2",
        "llama_guard",
        "openai_moderation",
        "unsafebench",
    }
    assert len(cw.schemes["hive"]) == 43 and len(cw.schemes["unsafebench"]) == 11
    assert len(cw.schemes["llama_guard"]) == 14 and len(cw.schemes["llavaguard"]) == 9
    assert (
        len(cw.schemes["hod"]) == 6 and cw.scheme_for("hod") == "hod" and cw.scheme_for("llamaguard") == "llama_guard"
    )
    for table in cw.schemes.values():
        for m in table.values():
            assert set(m.to) <= codes
    assert cw.scheme_for("hive") == "hive" and cw.scheme_for("red") is None
    assert cw.to_vhd("hive", {"very_bloody": 0.2, "YES_PILLS": 0.9}) == ["B", "A"]
    assert cw.to_vhd("openai_moderation", ["hate", "violence"]) == ["A"]  # hate is text-only
    assert cw.to_vhd("openai_moderation", ["hate"], images=False) == ["G"]
    assert "FEMALE_GENITALIA_EXPOSED" in cw.to_scheme("nudenet", "F")


def test_bad_crosswalk_file(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("version: 1\nschemes:\n  x: {labels: {a: {to: nope}}}\n")
    with pytest.raises(ConfigError, match=r"x\.a"):
        load_crosswalk(bad)


@pytest.mark.parametrize(
    "text", ['{"detectors": []}', "[]", '{"detectors": {"a": []}}', '{"detectors": {"a": {"a": 1}}}']
)
def test_malformed_calibration_file_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="re-create it with --calibrate"):
        load_calibrations(path)
