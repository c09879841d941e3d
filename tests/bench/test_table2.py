"""The Table 2 layout (`vhd.bench.table2`): columns per test set, dashes where modalities differ."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from vhd.bench.evaluate import DetectorResult, GroupResult
from vhd.bench.metrics import binary_result
from vhd.bench.table2 import set_modality, table2, to_csv, to_latex, to_markdown, write_table2


def result(label: str, truth: list[bool], decisions: list[bool]) -> DetectorResult:
    binary = binary_result(truth, [decisions], resamples=200)
    return DetectorResult(label, {}, {"all": GroupResult(binary)}, None, [])


# SMID-like: 2 harmful, 6 unharmful (unbalanced, as the paper's SMID split)
SMID = [True, True, False, False, False, False, False, False]
VIDEOS = [True, True, False, False]


def test_avg_is_plain_accuracy_and_balanced_accuracy_sits_beside_it(tmp_path: Path) -> None:
    results = {
        "SMID": [result("base", SMID, [True] + [False] * 7), result("img", SMID, [True] * 2 + [False] * 6)],
        "Videos": [result("base", VIDEOS, [True, False, False, False])],
    }
    t = table2(results, set_modalities={"SMID": "image", "Videos": "video"}, detector_modalities={"img": "image"})
    assert t.labels == ["base", "img"] and t.sets == ["SMID", "Videos"]
    base_smid = t.cells[0][0]
    assert base_smid is not None
    assert base_smid["harmful_acc"].value == 0.5 and base_smid["unharmful_acc"].value == 1.0
    assert base_smid["accuracy"].value == 7 / 8  # the paper's Avg.: over all samples
    assert base_smid["balanced_acc"].value == 0.75  # labelled Bal., beside it
    assert t.cells[1][1] is None  # an image checkpoint on the video set: "-"
    md = to_markdown(t)
    assert "| SMID Harm. | SMID Unharm. | SMID Avg. | SMID Bal. |" in md.replace("| Model ", "")
    assert "87.50 [" in md and "balanced accuracy" in md
    img_row = next(line for line in md.splitlines() if line.startswith("| img |"))
    assert img_row.endswith("| - | - | - | - |")
    rows = list(csv.DictReader(io.StringIO(to_csv(t))))
    assert {(r["model"], r["test_set"]) for r in rows} == {(m, s) for m in ("base", "img") for s in ("SMID", "Videos")}
    dash = next(r for r in rows if r["model"] == "img" and r["test_set"] == "Videos")
    assert dash["accuracy"] == "-"
    assert float(next(r for r in rows if r["model"] == "img" and r["test_set"] == "SMID")["accuracy"]) == 100.0
    tex = to_latex(t)
    assert r"\multicolumn{4}{c}{SMID}" in tex and "87.50" in tex
    files = write_table2(tmp_path, t)
    assert sorted(f.name for f in files) == ["table2.csv", "table2.json", "table2.md", "table2.tex"]
    assert json.loads((tmp_path / "table2.json").read_text())["rows"][1]["Videos"] is None


def test_set_modality() -> None:
    assert set_modality(["image", "image"]) == "image"
    assert set_modality(["image", "video"]) is None
