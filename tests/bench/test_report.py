from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from PIL import Image

from vhd.bench.pipeline import benchmark, build_detectors
from vhd.cli.main import main


def _numbers(obj: object) -> list[float]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _numbers(v)]
    return [float(obj)] if isinstance(obj, int | float) and not isinstance(obj, bool) else []


@pytest.mark.slow
def test_report_files(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    out = tmp_path / "report"
    dets = build_detectors(["red", "bright=hive"])
    report = benchmark(labels, dets, out, media=media, resamples=200)
    names = {p.relative_to(out).as_posix() for p in report.files}
    assert {"table1.md", "table1.csv", "table1.tex", "metrics.csv", "results.json", "index.html"} <= names
    assert {"breakdown.md", "plots/roc_pr.png", "plots/reliability.png", "plots/category_recall.png"} <= names

    # Table 1 parses: a header, a separator, one row per detector, bold best values
    md = (out / "table1.md").read_text().strip().splitlines()
    assert md[0].startswith("| Detector | Answered | Images Harm. | Images Unharm. | Images Avg. | Images Multi-class")
    assert [ln.split("|")[1].strip() for ln in md[2:]] == ["red", "bright"]
    assert "**" in md[2] + md[3]
    rows = list(csv.DictReader((out / "table1.csv").open()))
    red = report.results[0].groups["image"].binary.values
    assert float(rows[0]["Images Harm."]) == pytest.approx(100 * red["harmful_acc"].value, abs=0.005)
    assert rows[1]["Images Multi-class"] != ""  # multi-class through the crosswalk
    tex = (out / "table1.tex").read_text()
    assert tex.startswith(r"\begin{tabular}") and r"\textbf{" in tex and tex.count(r"\\") == 4

    # hand count: harmful red1 red2 red3 blue2 dark; unharmful pink blue1 gray green white; green fails
    all_red = report.results[0].groups["all"].binary
    assert all_red.n == 10 and all_red.n_answered == 9 and all_red.n_harmful == 5
    assert all_red.values["harmful_acc"].value == pytest.approx(3 / 5)  # red1, red2, red3 >= 0.5
    assert all_red.values["unharmful_acc"].value == pytest.approx(2 / 5)  # pink, white red enough; green failed

    # every number of metrics.csv is in results.json
    data = json.loads((out / "results.json").read_text())
    in_json = {round(x, 9) for x in _numbers(data)}
    for row in csv.DictReader((out / "metrics.csv").open()):
        for key in ("value", "low", "high", "n"):
            if row[key] not in ("", "n/a"):
                assert round(float(row[key]), 9) in in_json, (row, key)
    assert data["samples"] == 10 and data["detectors"][0]["run"]["failed"] == 1
    assert "green confuses me" in next(iter(data["failures"]["red"].values()))
    assert set(data["detectors"][0]["groups"]) == {"all", "image", "real", "synthetic"}
    assert not any(math.isnan(x) for x in _numbers(data))

    for png in (out / "plots").glob("*.png"):
        with Image.open(png) as im:
            assert im.format == "PNG" and im.width > 100 and im.height > 100

    html = (out / "index.html").read_text()
    thumbs = sorted((out / "thumbs").iterdir())
    assert thumbs and all(t.name.endswith("_blur.jpg") for t in thumbs)
    assert all(f"thumbs/{t.name}" in html for t in thumbs)
    assert "plots/roc_pr.png" in html and "table1.tex" in html


@pytest.mark.slow
def test_unblurred_previews_and_cli(
    tmp_path: Path, labelled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    labels, media = labelled
    config = tmp_path / "bench.toml"
    config.write_text('[detectors.strict]\nthreshold = 0.95\ncategory = "F"\n')
    out = tmp_path / "r"
    argv = [
        "bench",
        "--labels",
        str(labels),
        "--media",
        str(media),
        "--detector",
        "red",
        "--detector",
        "strict=red",
        "--config",
        str(config),
        "--set",
        "red.threshold=0.3",
        "--out",
        str(out),
        "--no-plots",
        "--bootstrap",
        "50",
        "--unblurred-previews",
    ]
    assert main(argv) == 1  # green.png fails: work remains
    printed = capsys.readouterr().out
    assert "red: 0 cached, 10 run, 1 failed" in printed and "| strict |" in printed
    data = json.loads((out / "results.json").read_text())
    assert data["detectors"][1]["run"]["identity"]["options"] == {"threshold": 0.95, "category": "F"}
    assert data["detectors"][0]["run"]["identity"]["options"] == {"threshold": 0.3}
    clear = [t for t in (out / "thumbs").iterdir() if not t.name.endswith("_blur.jpg")]
    assert clear and "onclick" in (out / "index.html").read_text()
    assert not (out / "plots").exists()
    # a second run takes everything from the cache
    assert main(argv) == 1
    assert "red: 9 cached, 1 run, 1 failed" in capsys.readouterr().out


def test_cli_errors(tmp_path: Path, labelled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    labels, media = labelled
    base = ["bench", "--labels", str(labels), "--media", str(media), "--out", str(tmp_path / "o")]
    assert main([*base, "--detector", "nosuch"]) == 2
    assert "valid detectors" in capsys.readouterr().err
    assert main([*base, "--detector", "red", "--set", "other.x=1"]) == 2
    assert "no --detector has" in capsys.readouterr().err
    assert main([*base, "--detector", "red", "--set", "oops"]) == 2
    assert "LABEL.key=value" in capsys.readouterr().err
    assert main(base) == 2
    assert "no detector given" in capsys.readouterr().err
