"""Coverage: a detector's failures stay in its numbers (counted wrong) and every table says how many.

`vhd bench` and `vhd compare` share the rule (`vhd.bench.metrics.counted_wrong`): a sample without
an answer counts as wrong, and coverage (answered / total) is shown beside the numbers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from vhd.bench.pipeline import benchmark, build_detectors
from vhd.compare.result import ConfigResult
from vhd.compare.runner import score_config
from vhd.compare.single import SampleOutcome


@pytest.fixture
def report(tmp_path: Path, labelled: tuple[Path, Path]) -> tuple[Path, object]:
    labels, media = labelled
    out = tmp_path / "report"
    return out, benchmark(labels, build_detectors(["red"]), out, media=media, resamples=50, plots=False)


def test_failures_count_as_wrong_and_coverage_is_shown(report: tuple[Path, object]) -> None:
    out, rep = report
    red = rep.results[0]  # type: ignore[attr-defined]
    b = red.groups["all"].binary
    # 10 samples; green.png (unharmful) fails: it stays in the numbers as a wrong answer
    assert (b.n, b.n_answered, b.total) == (10, 9, 10)
    assert b.values["coverage"].value == pytest.approx(0.9)
    assert b.values["harmful_acc"].value == pytest.approx(3 / 5)
    assert b.values["unharmful_acc"].value == pytest.approx(2 / 5)  # pink, white wrong; green failed
    assert b.values["accuracy"].value == pytest.approx(5 / 10)
    assert b.values["accuracy"].n == 10
    assert sum(map(sum, b.confusion)) == 9  # what it answered
    assert red.coverage == (9, 10)

    md = (out / "table1.md").read_text().splitlines()
    assert md[0].startswith("| Detector | Answered | Images Harm.")
    assert md[2].startswith("| red | 9/10 |")
    row = next(csv.DictReader((out / "table1.csv").open()))
    assert (row["answered"], row["samples"]) == ("9", "10")
    assert float(row["Images Unharm."]) == pytest.approx(40.0)
    assert "9/10" in (out / "table1.tex").read_text()
    assert "9/10" in (out / "breakdown.md").read_text()
    html = (out / "index.html").read_text()
    assert "<td>9/10</td>" in html and "counts as wrong" in html
    data = json.loads((out / "results.json").read_text())
    det = data["detectors"][0]
    assert det["coverage"] == {"answered": 9, "samples": 10, "failures_count_as_wrong": True}
    assert det["groups"]["all"]["binary"]["answered"] == 9
    assert det["groups"]["all"]["binary"]["metrics"]["coverage"]["value"] == pytest.approx(0.9)


def test_bench_and_compare_count_the_same_way(report: tuple[Path, object]) -> None:
    _, rep = report
    items = rep.run.bench.items  # type: ignore[attr-defined]
    preds = rep.run.detectors[0].predictions  # type: ignore[attr-defined]
    truth = [i.harmful for i in items]
    outcomes = [SampleOutcome(preds[i.id].harmful, preds[i.id].score, 0, 0, 1) for i in items]
    config = score_config(ConfigResult("red", "single", {}, [outcomes]), truth, resamples=50)
    bench = rep.results[0].groups["all"].binary.values  # type: ignore[attr-defined]
    for ours, theirs in (("accuracy", "accuracy"), ("f1", "f1"), ("tpr", "harmful_acc"), ("tnr", "unharmful_acc")):
        assert config.metrics[ours] == bench[theirs], ours
    assert config.metrics["coverage"] == bench["coverage"]
    assert (config.answered, config.asked) == (9, 10)
