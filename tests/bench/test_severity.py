"""Severity in ``vhd bench``: labels' levels against a detector's, confusion by level, weighted kappa."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from tests.bench.conftest import ROWS
from vhd.bench.data import load_bench_set
from vhd.bench.metrics import (
    NO_LEVEL,
    NOT_HARMFUL,
    SeverityMetrics,
    SeverityScale,
    infer_scale,
    weighted_kappa_value,
)
from vhd.bench.pipeline import benchmark, build_detectors
from vhd.cli.main import main
from vhd.errors import ConfigError

# the labels' level of each harmful row of conftest.ROWS (dark: harmful, no level)
LEVELS = {"red1.png": "high", "red2.png": "HIGH", "red3.png": "1", "blue2.png": "low", "dark.png": ""}


def _severity_labels(path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful", "categories", "severity"])
        for name, _colour, harmful, cats, _source, _split in ROWS:
            w.writerow([name, harmful, cats, LEVELS.get(name, "")])
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weights", ["quadratic", "linear"])
def test_weighted_kappa_equals_sklearn(seed: int, weights: str) -> None:
    rng = random.Random(seed)
    a = [rng.randrange(4) for _ in range(60)]
    b = [min(3, max(0, x + rng.choice([-2, -1, 0, 0, 1]))) for x in a]
    v = weighted_kappa_value(a, b, 4, weights=weights, resamples=300, seed=seed)
    assert v.value == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights=weights))
    assert v.low is not None and v.high is not None and v.low <= v.value <= v.high and v.n == 60


def test_weighted_kappa_weighs_distance() -> None:
    truth = [0, 1, 2, 0, 1, 2]
    near = [0, 1, 1, 0, 1, 2]  # one high called low
    far = [0, 1, 0, 0, 1, 2]  # one high called unharmful
    assert weighted_kappa_value(truth, near, 3).value > weighted_kappa_value(truth, far, 3).value  # type: ignore[operator]


def test_weighted_kappa_undefined_and_bad_input() -> None:
    assert weighted_kappa_value([1, 1], [1, 1], 3, resamples=50).value is None  # one level everywhere
    assert weighted_kappa_value([], [], 3).n == 0
    with pytest.raises(ValueError, match="same samples"):
        weighted_kappa_value([0], [0, 1], 3)
    with pytest.raises(ValueError, match=r"0\.\.2"):
        weighted_kappa_value([0, 3], [0, 1], 3)


def test_scale_reads_names_and_numbers() -> None:
    scale = SeverityScale.parse("low, medium ,high")
    assert scale.levels == ("low", "medium", "high")
    assert [scale.find(x) for x in ("HIGH", "2", "4", "0", "extreme", None)] == [
        "high",
        "medium",
        None,
        None,
        None,
        None,
    ]
    assert scale.steps() == [NOT_HARMFUL, "low", "medium", "high"]
    for bad in ("low,,high", "low,LOW", "none,high", ""):
        with pytest.raises(ConfigError):
            SeverityScale.parse(bad)


def test_infer_scale() -> None:
    assert infer_scale([]) is None
    assert infer_scale(["3", "1"]) == SeverityScale(("1", "2", "3"))
    assert infer_scale(["High", "low"]) == SeverityScale(("low", "medium", "high", "critical"))
    assert infer_scale(["severe", "mild"]) == SeverityScale(("mild", "moderate", "severe", "extreme"))
    with pytest.raises(ConfigError, match="--severity-scale"):
        infer_scale(["gory", "tame"])


def test_severity_metrics_confusion() -> None:
    m = SeverityMetrics(SeverityScale(("low", "high")), resamples=100)
    truth = [NOT_HARMFUL, "low", "high", "high", None, NOT_HARMFUL]
    pred = [NOT_HARMFUL, "high", "high", None, "low", "unknown-level"]
    r = m.update(truth, pred).compute()
    assert r.steps == [NOT_HARMFUL, "low", "high"]
    assert r.confusion == [[1, 0, 0, 1], [0, 0, 1, 0], [0, 0, 1, 1]]  # the harmful-without-level label left out
    assert r.n == 5 and r.answered == 3
    assert r.exact.value == pytest.approx(2 / 5)
    assert r.kappa.value == pytest.approx(
        cohen_kappa_score([0, 1, 2], [0, 2, 2], labels=[0, 1, 2], weights="quadratic")
    )
    assert r.to_dict()["columns"][-1] == NO_LEVEL


def test_labels_file_severity(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    _, media = labelled
    bench = load_bench_set(_severity_labels(media / "sev.csv"))
    got = {Path(i.path).name: i.severity for i in bench.items}
    assert got["red1.png"] == "high" and got["red3.png"] == "1" and got["dark.png"] is None and got["pink.png"] is None
    bad = media / "bad.csv"
    bad.write_text("path,harmful,severity\nred1.png,yes,high\npink.png,no,high\n")
    bench = load_bench_set(bad)
    assert len(bench.items) == 1
    assert "row 3: severity 'high' on an unharmful row" in str(bench.problems[0])


def _expected() -> tuple[list[list[int]], float]:
    # red scores: red1 .98 high, red2 .78 low, red3 .55 low, pink .71 low, white .94 high; green fails
    # labels: red1 high, red2 high, red3 low (1), blue2 low, dark harmful without a level (left out)
    confusion = [[2, 1, 1, 1], [1, 1, 0, 0], [0, 1, 1, 0]]
    truth = [2, 2, 1, 1, 0, 0, 0, 0]  # red1 red2 red3 blue2 pink blue1 gray white
    pred = [2, 1, 1, 0, 1, 0, 0, 2]
    return confusion, float(cohen_kappa_score(truth, pred, labels=[0, 1, 2], weights="quadratic"))


@pytest.mark.slow
def test_bench_reports_severity(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    _, media = labelled
    labels = _severity_labels(media / "sev.csv")
    out = tmp_path / "report"
    dets = build_detectors(["red", "plain=red"], sets=["red.levels=low,high"])
    report = benchmark(labels, dets, out, resamples=200, plots=False, severity_scale=SeverityScale(("low", "high")))
    confusion, kappa = _expected()
    sev = report.results[0].groups["all"].severity
    assert sev is not None and sev.confusion == confusion and sev.n == 9 and sev.answered == 8
    assert sev.kappa.value == pytest.approx(kappa) and sev.kappa.low is not None
    assert sev.exact.value == pytest.approx(4 / 9)
    assert report.results[1].groups["all"].severity is None  # a detector without levels: no severity numbers

    data = json.loads((out / "results.json").read_text())
    assert data["severity_scale"] == ["low", "high"]
    assert data["detectors"][0]["groups"]["all"]["severity"]["confusion"] == confusion
    assert data["detectors"][1]["groups"]["all"]["severity"] is None
    metrics = {(r["detector"], r["group"], r["metric"]): r for r in csv.DictReader((out / "metrics.csv").open())}
    assert float(metrics[("red", "all", "severity_kappa_quadratic")]["value"]) == pytest.approx(kappa)
    md = (out / "severity.md").read_text()
    assert (
        "## red" in md
        and "| label \\ detector | none | low | high | no level |" in md
        and "| none | 2 | 1 | 1 | 1 |" in md
    )
    assert "plain" not in md
    page = (out / "index.html").read_text()
    assert "<h2>Severity</h2>" in page and "<td>none</td><td>2</td><td>1</td><td>1</td><td>1</td>" in page


@pytest.mark.slow
def test_cli_severity_scale_inferred_and_bad_level(
    tmp_path: Path, labelled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, media = labelled
    labels = media / "sev.csv"
    with labels.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful", "severity"])
        w.writerows([["red1.png", "yes", "high"], ["red2.png", "yes", "gory"], ["blue1.png", "no", ""]])
    out = tmp_path / "r"
    args = ["bench", "--labels", str(labels), "--detector", "red", "--set", "red.levels=low,high"]
    assert main([*args, "--out", str(out), "--no-plots", "--bootstrap", "50", "--no-progress"]) == 2
    assert "--severity-scale" in capsys.readouterr().err  # gory: no order to infer
    rc = main([*args, "--severity-scale", "low,high", "--out", str(out), "--no-plots", "--bootstrap", "50", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    sev = data["results"][0]["groups"]["all"]["severity"]
    assert sev["n"] == 2 and sev["confusion"] == [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]]
    problems = json.loads((out / "results.json").read_text())["problems"]
    assert any("severity 'gory' is not on the scale (low, high): dropped" in p["message"] for p in problems)


@pytest.mark.slow
def test_cli_scale_from_a_policy(
    tmp_path: Path, labelled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, media = labelled
    labels = _severity_labels(media / "sev.csv")
    policy = tmp_path / "p.yaml"
    policy.write_text(
        'name: p\nversion: "1"\ncategories:\n  - {id: harm, description: Harm.}\n'
        "severity:\n  - {name: low, meaning: mild}\n  - {name: high, meaning: graphic}\n",
        encoding="utf-8",
    )
    args = ["bench", "--labels", str(labels), "--detector", "red", "--set", "red.levels=low,high", "--no-plots"]
    args += ["--bootstrap", "50", "--out", str(tmp_path / "r"), "--json"]
    assert main([*args, "--policy", str(policy)]) == 1  # green fails
    sev = json.loads(capsys.readouterr().out)["results"][0]["groups"]["all"]["severity"]
    assert sev["steps"] == ["none", "low", "high"] and sev["n"] == 9
    assert main([*args, "--policy", str(policy), "--severity-scale", "low,high"]) == 2
    assert "--severity-scale or --policy, not both" in capsys.readouterr().err
    policy.write_text(policy.read_text().split("severity:")[0], encoding="utf-8")
    assert main([*args, "--policy", str(policy)]) == 2
    assert "has no severity scale" in capsys.readouterr().err


def test_a_store_as_labels_gives_the_judges_severity(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    from vhd.annotate.api import annotate
    from vhd.bench.store_source import load_bench_set_from_store
    from vhd.config import AnnotateConfig

    _, media = labelled
    policy = tmp_path / "p.yaml"
    policy.write_text(
        'name: p\nversion: "1"\ncategories:\n  - {id: harm, description: Harm.}\n'
        "severity:\n  - {name: low, meaning: mild}\n  - {name: high, meaning: graphic}\n",
        encoding="utf-8",
    )
    script = {"default": "1. An argument.", "rules": [{"when": {"tag": "judge"}, "reply": "Yes, harm.\nSeverity: 2"}]}
    cfg = AnnotateConfig(model="scripted:sev", backends={"scripted": {"script": script}})
    store = tmp_path / "s.db"
    annotate([media / "red1.png", media / "blue1.png"], store=store, config=cfg, policy=policy, rounds=1)
    bench = load_bench_set_from_store(store)
    assert [(i.harmful, i.severity) for i in bench.items] == [(True, "high"), (True, "high")]
