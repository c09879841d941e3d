"""Undefined numbers are None, print as an em dash ("n/a" in CSV), and are never plotted or bolded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vhd.bench.evaluate import DetectorResult, GroupResult
from vhd.bench.metrics import BinaryMetrics
from vhd.bench.metrics.agreement import cohen_kappa, kappa_value
from vhd.bench.tables import long_csv, to_csv, to_latex, to_markdown

HEADERS = ["Images Harm.", "Images Unharm.", "Images Avg.", "Images Multi-class"]


def test_precision_without_a_positive_prediction_is_undefined() -> None:
    res = BinaryMetrics(resamples=20).update([1, 0, 1], [0, 0, 0]).compute()
    assert res.values["precision"].value is None  # no alarm raised: not "every alarm was false"
    assert res.values["f1"].value == 0.0  # harmful samples exist and none was caught
    assert res.values["harmful_acc"].value == 0.0
    only_unharmful = BinaryMetrics(resamples=20).update([0, 0], [0, 1]).compute()
    assert only_unharmful.values["harmful_acc"].value is None and only_unharmful.values["f1"].value is None
    assert "n/a" in long_csv([_result("d", {"all": only_unharmful})])


def test_one_detector_is_not_bold_and_undefined_prints_a_dash() -> None:
    rows: list[list[float | None]] = [[50.0, None, 62.5, None]]
    md = to_markdown(HEADERS, rows, ["only"])
    assert "**" not in md  # one value per column: nothing to compare
    assert "| only | 50.00 | \u2014 | 62.50 | \u2014 |" in md
    tex = to_latex(HEADERS, rows, ["only"])
    assert r"\textbf" not in tex and "50.00 & --- & 62.50 & ---" in tex
    assert to_csv(HEADERS, rows, ["only"]).splitlines()[1] == "only,50.00,n/a,62.50,n/a"
    # two detectors: the better of two defined values is bold, a column with one value is not
    two = to_markdown(HEADERS, [[50.0, None, 62.5, 10.0], [40.0, 70.0, 55.0, None]], ["a", "b"])
    assert "| a | **50.00** | \u2014 | **62.50** | 10.00 |" in two
    assert "| b | 40.00 | 70.00 | 55.00 | \u2014 |" in two


def test_kappa_never_prints_negative_zero() -> None:
    a = [1, 0, 1, 0, 0, 0]  # observed agreement equals chance agreement: -3e-16 in floating point
    b = [0, 0, 0, 0, 0, 0]
    k = cohen_kappa(a, b)
    assert k == 0.0 and f"{k:.3f}" == "0.000"
    assert kappa_value(a, b, resamples=0).value == 0.0
    from vhd.bench.metrics import fmt

    assert fmt(-1e-17) == "0.000" and fmt(-0.0, 2) == "0.00" and fmt(None) == "\u2014"
    assert fmt(float("nan")) == "\u2014" and fmt(-0.25) == "-0.250"


def _result(label: str, groups: dict[str, Any]) -> DetectorResult:
    return DetectorResult(label, {}, {k: GroupResult(v) for k, v in groups.items()}, None, [])


def _bars_drawn(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    from matplotlib.axes import Axes

    heights: list[float] = []
    real_bar = Axes.bar

    def spy(self: Axes, x: Any, height: Any, *args: Any, **kwargs: Any) -> Any:
        heights.extend(float(h) for h in height)
        return real_bar(self, x, height, *args, **kwargs)

    monkeypatch.setattr(Axes, "bar", spy)
    return heights


def test_breakdown_leaves_out_empty_and_undefined_groups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from vhd.bench.plots import breakdown_figure

    both = BinaryMetrics(resamples=0).update([1, 0], [1, 0]).compute()  # average 100%
    harmful_only = BinaryMetrics(resamples=0).update([1, 1], [1, 1]).compute()  # no unharmful: average undefined
    results = [
        _result("a", {"all": both, "real": both, "synthetic": harmful_only}),
        _result("b", {"all": both, "real": both}),  # no synthetic sample at all
    ]
    heights = _bars_drawn(monkeypatch)
    assert breakdown_figure(results, tmp_path / "b.png") is not None
    assert heights == [100.0, 100.0]  # the two real bars; nothing drawn at 0 for what does not exist


def test_icl_undefined_metric_prints_a_dash_and_is_not_plotted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    from vhd.icl.files import write_report
    from vhd.icl.metrics import rates
    from vhd.icl.result import Round, Scored, SearchResult

    def scored(tp: int, fp: int, tn: int, fn: int) -> Scored:
        c = {"tp": tp, "fp": fp, "tn": tn, "fn": fn}
        return Scored(c, rates(**c), tp + fp + tn + fn, 0)

    none_harmful = scored(0, 1, 3, 0)  # no harmful sample left: F1 undefined
    assert none_harmful.value("f1") is None and none_harmful.rank("f1") < scored(0, 0, 4, 1).rank("f1")
    result = SearchResult(tmp_path, "f1", baseline=none_harmful)
    result.rounds = [Round(0, [], [], "h0", none_harmful, accepted=True), Round(1, [], [], "h1", scored(1, 0, 3, 1))]
    result.rounds[1].best_before = none_harmful
    plotted: list[float] = []
    real_plot = Axes.plot

    def spy(self: Axes, *args: Any, **kwargs: Any) -> Any:
        if len(args) >= 2 and kwargs.get("label") == "candidate set":
            plotted.extend(float(v) for v in args[1])
        return real_plot(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", spy)
    write_report(result)
    report = (tmp_path / "report.md").read_text()
    assert "-1.000" not in report and "-100.0" not in report
    assert "| 0 | 0 |  | \u2014 |  | yes |" in report
    assert "| none | \u2014 | 75.0 | \u2014 |" in report
    assert (tmp_path / "metric.png").exists()
    assert all(v != v or v >= 0 for v in plotted)  # NaN (a gap) where undefined, never -1
