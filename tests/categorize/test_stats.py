from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from tests.categorize.conftest import sample_id
from vhd.categorize import compute_stats, write_stats
from vhd.categorize.stats_plot import read_drawn_counts
from vhd.cli.main import main
from vhd.store import Store
from vhd.store.categories import Assignment, Categorization, harmful_annotations, save_categorization
from vhd.taxonomy import load_taxonomy

ASSIGNED = {"nude": "F", "blood": "AE", "drugs": "B", "nazi": "GA", "refusal": "F"}  # dog: none


def assign(store: Store, method: str = "llm", table: dict[str, str] = ASSIGNED) -> None:
    tax = load_taxonomy()
    for item in harmful_annotations(store):
        name = next(k for k in (*ASSIGNED, "dog") if sample_id(k) == item.sample.id)
        cat = Categorization(
            item.annotation_id, method, tax.name, tax.version, tax.digest, "m", "ok",
            [Assignment(c, tax.get(c).name, 1.0) for c in table.get(name, "")],
        )  # fmt: skip
        save_categorization(store, cat)


def test_counts_follow_the_store(store: Store) -> None:
    assign(store)
    stats = compute_stats(store)
    assert stats.columns == ["image/real", "image/synthetic", "video/real", "video/synthetic"]
    rows = {r.code: r.counts for r in stats.categories}
    assert rows["F"] == {"image/real": 2, "image/synthetic": 0, "video/real": 0, "video/synthetic": 0}
    assert rows["A"] == {"image/real": 0, "image/synthetic": 1, "video/real": 0, "video/synthetic": 1}
    assert rows["E"]["image/synthetic"] == 1 and rows["B"]["video/real"] == 1 and rows["G"]["video/synthetic"] == 1
    assert sum(r.total for r in stats.categories) == 7  # a sample may count in several
    assert stats.totals == {
        "annotations": 10, "harmful": 6, "unharmful": 2, "refused": 1, "unparsed": 1, "truncated": 0, "errors": 1,
        "harmful_categorized": 5, "harmful_uncategorized": 1,
    }  # fmt: skip
    keywords = {r.group: (r.samples, r.harmful) for r in stats.keywords}
    assert keywords["nudity"] == (2, 2) and keywords["toy"] == (1, 0) and keywords["bloody"] == (1, 1)
    sources = {r.group: (r.samples, r.harmful, round(r.share, 2)) for r in stats.sources}
    assert sources["image/real"] == (3, 2, 0.67) and sources["video/synthetic"] == (2, 1, 0.5)
    assert ("adult content and nudity", 1) in stats.reasons and all("refusal" not in r for r, _ in stats.reasons)


def test_method_option_reads_that_methods_results(store: Store) -> None:
    assign(store, "llm")
    assign(store, "embed", {"dog": "C"})  # applied last: the verdicts now carry embed's
    by_verdict = {r.code: r.total for r in compute_stats(store).categories}
    by_llm = {r.code: r.total for r in compute_stats(store, method="llm").categories}
    assert by_verdict["C"] == 1 and by_verdict["F"] == 0
    assert by_llm["C"] == 0 and by_llm["F"] == 2


@pytest.mark.slow
def test_figure_is_a_png_whose_numbers_match_the_table(store: Store, tmp_path: Path) -> None:
    assign(store)
    stats = compute_stats(store)
    files = write_stats(stats, tmp_path / "out")
    names = {f.name for f in files}
    assert {"categories.png", "categories.csv", "categories.md", "keywords.csv", "sources.csv", "reasons.csv",
            "summary.json", "report.md"} <= names  # fmt: skip
    png = tmp_path / "out" / "categories.png"
    with Image.open(png) as im:
        assert im.format == "PNG" and im.width > 600 and im.height > 300
        colors = im.convert("RGB").getcolors(maxcolors=1_000_000)
        assert colors is not None and len(colors) > 10  # not a blank canvas
    with (tmp_path / "out" / "categories.csv").open(newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    drawn = read_drawn_counts(png)
    assert set(drawn) == set(stats.columns)
    for column, values in drawn.items():
        assert values == [int(row[column]) for row in table]
    assert sum(sum(v) for v in drawn.values()) == 7
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["totals"]["refused"] == 1 and summary["categories"][0]["total"] == 2
    report = (tmp_path / "out" / "report.md").read_text()
    assert (
        "![Harmful samples per category](categories.png)" in report and "| F | Explicit and Sexual Content |" in report
    )


def test_unknown_category_names_land_in_other(store: Store) -> None:
    store.conn.execute("UPDATE annotations SET categories_json = '[\"Gambling\"]' WHERE harmful = 1")
    stats = compute_stats(store)
    assert stats.categories[-1].name == "(other)" and stats.categories[-1].total == 6


def test_cli_stats(store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(store_path) as db:
        assign(db)
    out = tmp_path / "stats"
    assert main(["stats", "--store", str(store_path), "--out", str(out), "--no-plot"]) == 0
    printed = capsys.readouterr().out
    assert "10 annotation(s): 6 harmful (1 by refusal)" in printed and "| F | Explicit and Sexual Content |" in printed
    assert not (out / "categories.png").exists() and (out / "keywords.md").is_file()
    assert main(["stats", "--store", str(tmp_path / "missing.db"), "--out", str(out)]) == 2
