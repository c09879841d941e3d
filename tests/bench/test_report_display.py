"""A bench report as a notebook shows it: a short repr, an HTML table, and every number in a DataFrame."""

from __future__ import annotations

from pathlib import Path

import pytest

from vhd.bench.pipeline import REPORT_COLUMNS, BenchReport, benchmark, build_detectors


@pytest.fixture
def report(tmp_path: Path, labelled: tuple[Path, Path]) -> BenchReport:
    labels, media = labelled
    return benchmark(
        labels, build_detectors(["red", "hive"]), tmp_path / "report", media=media, resamples=50, plots=False
    )


def test_the_repr_is_short_and_names_the_headline_numbers(report: BenchReport, tmp_path: Path) -> None:
    text = repr(report)
    assert len(text) < 600, len(text)  # the dataclass repr was 12.7k characters on a small run
    assert text.startswith("BenchReport: 2 detector(s) on ") and str(tmp_path / "report") in text
    red = report.results[0].groups["all"].binary.values["accuracy"]
    assert f"accuracy {red.value:.3f} [{red.low:.3f}, {red.high:.3f}]" in text
    assert "to_pandas()" in text and len(text.splitlines()) == 4


def test_the_html_repr_is_a_table_with_escaped_labels(report: BenchReport) -> None:
    report.results[1].label = "<b>hive</b>"
    page = report._repr_html_()
    assert page.startswith('<table class="vhd-bench">') and page.count("<tr>") == 3
    assert "&lt;b&gt;hive&lt;/b&gt;" in page and "<b>hive" not in page


def test_to_pandas_has_one_row_per_detector_group_and_metric(report: BenchReport) -> None:
    import csv

    df = report.to_pandas()
    assert tuple(df.columns) == REPORT_COLUMNS
    assert not df.duplicated(["detector", "group", "metric"]).any()
    assert set(df["detector"]) == {"red", "hive"} and "all" in set(df["group"])
    row = df[(df.detector == "red") & (df.group == "all") & (df.metric == "f1")].iloc[0]
    f1 = report.results[0].groups["all"].binary.values["f1"]
    assert (row.value, row.low, row.high, row.n) == (f1.value, f1.low, f1.high, f1.n)
    with (Path(report.files[0]).parent / "metrics.csv").open() as fh:
        assert len(df) == sum(1 for _ in csv.DictReader(fh))  # the rows of metrics.csv
