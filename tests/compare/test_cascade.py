"""Cascade thresholds picked on a labelled set (replayed by hand), and the cascade row of `vhd compare`."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pytest
from PIL import Image

from vhd.cli.main import main
from vhd.compare.cascade import OFF, candidate_pairs, pick_thresholds, replay
from vhd.detectors import registry

TRUTH = [True, True, True, False, False, False]
STAGE = [0.95, 0.6, 0.5, 0.4, 0.05, None]  # None: the stage gave no decision
DEBATE = [True, True, False, False, False, True]  # the debate is right on 4 of 6


def test_replay_by_hand() -> None:
    # band (0.1, 0.9): sample 0 harmful (0.95), sample 4 unharmful (0.05); the other four debated
    p = replay([(0.1, 0.9)], [STAGE], DEBATE, TRUTH, stage_calls=[1.0], debate_calls=5.0)
    assert p.debate_share == pytest.approx(4 / 6)
    assert p.calls_per_sample == pytest.approx((6 * 1 + 4 * 5) / 6)
    # right: 0 (stage), 1 (debate yes), 3 (debate no), 4 (stage); wrong: 2 and 5 (debate)
    assert p.accuracy == pytest.approx(4 / 6)
    everything = replay([(0.45, 0.45)], [STAGE], DEBATE, TRUTH, stage_calls=[1.0], debate_calls=5.0)
    assert everything.debate_share == pytest.approx(1 / 6) and everything.accuracy == pytest.approx(5 / 6)
    off = replay([OFF], [STAGE], DEBATE, TRUTH, stage_calls=[1.0], debate_calls=5.0)
    assert off.debate_share == 1 and off.accuracy == pytest.approx(4 / 6)


def test_pick_keeps_accuracy_and_minimises_calls() -> None:
    pick = pick_thresholds([STAGE], DEBATE, TRUTH, tolerance=0.0, debate_calls=5.0, z=0.0)
    assert pick.debate.accuracy == pytest.approx(4 / 6) and pick.target == pytest.approx(4 / 6)
    assert pick.chosen.accuracy >= pick.target
    # no candidate decides more samples at that accuracy (the curve holds every candidate tried)
    assert pick.chosen.calls_per_sample == min(p.calls_per_sample for p in pick.curve if p.accuracy >= pick.target)
    assert pick.chosen.calls_per_sample < pick.debate.calls_per_sample
    front = pick.pareto()
    assert all(
        a.calls_per_sample <= b.calls_per_sample and a.accuracy < b.accuracy for a, b in itertools.pairwise(front)
    )
    assert pick.to_dict()["thresholds"] == [list(pick.thresholds[0])]
    # two stages: the second one (perfect) takes over what the first leaves
    second = [0.99, 0.99, 0.99, 0.01, 0.01, 0.01]
    two = pick_thresholds([STAGE, second], DEBATE, TRUTH, tolerance=0.0, z=0.0)
    assert two.chosen.accuracy == 1.0 and two.chosen.debate_share == 0.0
    # with a confidence margin the chosen stage is never below the debate on what it takes
    careful = pick_thresholds([STAGE], DEBATE, TRUTH, tolerance=0.0)
    assert careful.chosen.stage_gap_low >= 0.0


def test_a_later_stage_may_not_spend_the_first_stages_margin() -> None:
    # 40 samples: stage 1 is sure and right on 30 (the debate right on 24 of them) and unsure on
    # 10; stage 2 guesses on those 10 (right on 5), where the debate is right on 9.
    truth = [i % 2 == 0 for i in range(40)]
    first: list[float | None] = [0.99 if t else 0.01 for t in truth[:30]] + [None] * 10  # no decision
    second: list[float | None] = [0.5] * 30 + [0.9 if i % 4 < 2 else 0.1 for i in range(10)]
    debate: list[bool | None] = [t if i >= 6 else not t for i, t in enumerate(truth[:30])]
    debate += [t if i else not t for i, t in enumerate(truth[30:])]
    overall_only = pick_thresholds([first, second], debate, truth, tolerance=0.01, z=0.0)
    assert overall_only.chosen.debate_share == pytest.approx(10 / 40)  # stage 2 takes nothing
    assert overall_only.thresholds[1] == (0.0, 1.0) or overall_only.chosen.stage_gap >= -0.01
    # scored as a whole, stage 2 deciding the ten looks better than all-debate (35/40 vs 33/40)
    both = replay([(0.5, 0.5), (0.5, 0.5)], [first, second], debate, truth, stage_calls=[1, 1], debate_calls=5)
    assert both.accuracy == pytest.approx(35 / 40) and overall_only.debate.accuracy == pytest.approx(33 / 40)
    assert both.stage_gap == pytest.approx(-0.4)  # but it is 4 in 10 worse than the debate on what it takes


def test_candidates_cover_the_scores() -> None:
    pairs = candidate_pairs([0.2, 0.8, None], points=3)
    assert OFF in pairs and all(lo <= hi for lo, hi in pairs)
    assert any(lo > 0.2 for lo, _ in pairs) and any(hi < 0.8 for _, hi in pairs)


def test_compare_gains_a_cascade_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    folder = tmp_path / "set"
    folder.mkdir()
    rows = []
    for i, (rgb, harmful) in enumerate(
        [((250, 0, 0), "yes"), ((240, 10, 0), "yes"), ((0, 0, 0), "no"), ((10, 0, 9), "no")]
    ):
        Image.new("RGB", (32, 32), rgb).save(folder / f"s{i}.png")
        rows.append([f"s{i}.png", harmful])
    labels = folder / "labels.csv"
    with labels.open("w", newline="") as fh:
        csv.writer(fh).writerows([["path", "harmful"], *rows])
    out = tmp_path / "cmp"
    argv = ["compare", "--labels", str(labels), "--model", "scripted:demo", "--out", str(out), "--rounds", "1"]
    argv += ["--k", "1", "--no-progress", "--cascade", "cheap=red"]
    assert main(argv) == 0
    data = json.loads((out / "compare.json").read_text())
    rows_by_name = {c["name"]: c for c in data["configs"]}
    debate, cascade = rows_by_name["debate-r1"], rows_by_name["cascade-r1"]
    # the scripted judge always says no: the debate gets half right; the red stage decides all four correctly
    assert debate["metrics"]["accuracy"]["value"] == 0.5
    assert cascade["metrics"]["accuracy"]["value"] == 1.0 and cascade["calls_per_sample"] == 1.0
    assert cascade["family"] == "cascade" and cascade["params"]["thresholds_picked"] is True
    assert (out / "cascade_curve.csv").exists()
    assert "cascade-r1" in capsys.readouterr().out
    fixed = [*argv, "--cascade-thresholds", "0.0:1.0", "--out", str(tmp_path / "fixed")]
    assert main(fixed) == 0
    fixed_rows = {c["name"]: c for c in json.loads((tmp_path / "fixed" / "compare.json").read_text())["configs"]}
    assert fixed_rows["cascade-r1"]["params"]["debate_share"] == 1.0  # a band that never decides
