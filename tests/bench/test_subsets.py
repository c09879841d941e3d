"""``vhd bench --subset NAME=FILE``: a subset's false-positive rate on its own, in table, JSON and HTML."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from tests.bench.fake_detector import RedDetector
from vhd.bench.pipeline import benchmark, build_detectors
from vhd.bench.subsets import load_subsets, parse_subset
from vhd.cli.main import main
from vhd.errors import ConfigError


def _edgy(tmp_path: Path, media: Path) -> Path:
    """A subset beside the media: three main samples, green (which fails), one harmful, one new, one missing."""
    (media / "extra").mkdir()
    Image.new("RGB", (40, 30), (220, 200, 200)).save(media / "extra" / "xray.png")  # red share .86: flagged
    with (media / "edgy.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful"])
        w.writerows([["pink.png", "no"], ["blue1.png", "no"], ["green.png", "no"]])
        w.writerows([["red1.png", "yes"], ["extra/xray.png", "no"], ["missing.png", "no"]])
    return media / "edgy.csv"


def test_parse_subset() -> None:
    assert parse_subset("medical=sets/med.csv") == ("medical", Path("sets/med.csv"))
    for bad in ("medical", "=x.csv", "a b=x.csv", "medical="):
        with pytest.raises(ConfigError, match="NAME=FILE"):
            parse_subset(bad)


def test_load_subsets_errors(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    _, media = labelled
    edgy = _edgy(tmp_path, media)
    with pytest.raises(ConfigError, match="given twice"):
        load_subsets([f"a={edgy}", f"a={edgy}"], options=None)
    with pytest.raises(ConfigError, match="--subset nope: cannot read labels file"):
        load_subsets([f"nope={tmp_path / 'nope.csv'}"])


@pytest.mark.slow
def test_subset_false_positive_rate(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    edgy = _edgy(tmp_path, media)
    out = tmp_path / "report"
    report = benchmark(
        labels,
        build_detectors(["red", "strict=red"], sets=["strict.threshold=0.95"]),
        out,
        media=media,
        resamples=200,
        plots=False,
        subsets=[f"edgy={edgy}"],
    )
    assert RedDetector.calls == 2 * 11  # the main ten and xray.png, each once per detector
    assert report.results[0].groups["all"].binary.n == 10  # xray.png is not in the main numbers
    (sub,) = report.subsets
    assert (sub.name, sub.samples, sub.unharmful, sub.harmful) == ("edgy", 5, 4, 1)
    assert any("missing.png" in p for p in sub.problems)
    red, strict = sub.fpr["red"], sub.fpr["strict"]
    assert red.value == pytest.approx(3 / 4) and red.n == 4  # pink and xray flagged, green failed (counts flagged)
    assert strict.value == pytest.approx(1 / 4)  # only the failure
    assert red.low is not None and red.high is not None and red.low <= red.value <= red.high
    assert sub.failed == {"red": 1, "strict": 1}

    md = (out / "subsets.md").read_text().splitlines()
    assert md[0] == "| Detector | edgy FPR % (n=4) |"
    assert md[2].startswith("| red | 75.0 [") and md[3].startswith("| strict | 25.0 [")
    rows = list(csv.DictReader((out / "subsets.csv").open()))
    assert [(r["detector"], r["subset"], float(r["fpr"]), r["failed"]) for r in rows] == [
        ("red", "edgy", 0.75, "1"),
        ("strict", "edgy", 0.25, "1"),
    ]
    data = json.loads((out / "results.json").read_text())
    got = data["subsets"][0]
    assert got["name"] == "edgy" and got["harmful_left_out"] == 1
    assert got["detectors"]["red"]["fpr"]["value"] == pytest.approx(0.75)
    page = (out / "index.html").read_text()
    assert "<h2>Subsets</h2>" in page and "<th>edgy (n=4)</th>" in page and "<td>75.0 [" in page


@pytest.mark.slow
def test_cli_subset_table_and_json(
    tmp_path: Path, labelled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    labels, media = labelled
    edgy = _edgy(tmp_path, media)
    args = ["bench", "--labels", str(labels), "--media", str(media), "--detector", "red", "--no-plots"]
    args += ["--subset", f"edgy={edgy}", "--subset", f"again={edgy}", "--bootstrap", "50", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "r")]) == 1  # green fails
    text = capsys.readouterr().out
    assert "| Detector | edgy FPR % (n=4) | again FPR % (n=4) |" in text and "| red | 75.0 [" in text
    assert main([*args, "--out", str(tmp_path / "r"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["subsets"]] == ["edgy", "again"]
    assert data["subsets"][1]["detectors"]["red"]["fpr"]["value"] == pytest.approx(0.75)
    bad = ["bench", "--labels", str(labels), "--detector", "red", "--subset", "bad", "--out", str(tmp_path / "r")]
    assert main(bad) == 2
    assert "--subset 'bad' must be NAME=FILE" in capsys.readouterr().err
