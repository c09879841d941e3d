r"""Tables of benchmark numbers: the paper's Table 1 layout in Markdown, CSV and LaTeX, and a long CSV.

Table 1: one row per detector; for each modality (images, videos) the columns Harm. (accuracy
on harmful samples), Unharm. (on unharmful ones), Avg. (their mean) and Multi-class; numbers in
percent; the best value of each column in bold (``**x**`` in Markdown, ``\\textbf{x}`` in LaTeX;
CSV has plain numbers). A dash where a number does not exist.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from vhd.bench.evaluate import DetectorResult
from vhd.fileio import escape_cell

COLUMNS = (("harmful_acc", "Harm."), ("unharmful_acc", "Unharm."), ("average", "Avg."), ("multiclass", "Multi-class"))
"""Table 1's columns per modality: metric key and header."""

MODALITIES = (("image", "Images"), ("video", "Videos"))


def _metric(result: DetectorResult, group: str, key: str) -> float | None:
    g = result.groups.get(group)
    if g is None:
        return None
    if key == "multiclass":
        return g.multiclass.accuracy.value if g.multiclass else None
    v = g.binary.values.get(key)
    return v.value if v else None


def table1(
    results: Sequence[DetectorResult], groups: Sequence[tuple[str, str]] = MODALITIES
) -> tuple[list[str], list[list[float | None]], list[str]]:
    """Table 1's data: (column headers, one row of percentages per detector, row labels).

    Modalities without samples are left out.
    """
    present = [(g, title) for g, title in groups if any(g in r.groups for r in results)]
    headers = [f"{title} {col}" for _, title in present for _, col in COLUMNS]
    rows = [
        [None if (v := _metric(r, g, key)) is None else 100 * v for g, _ in present for key, _ in COLUMNS]
        for r in results
    ]
    return headers, rows, [r.label for r in results]


def _best(rows: list[list[float | None]]) -> list[float | None]:
    cols = list(zip(*rows, strict=True)) if rows else []
    return [max((v for v in col if v is not None), default=None) for col in cols]


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def to_markdown(headers: list[str], rows: list[list[float | None]], labels: list[str]) -> str:
    """Markdown table, best value per column in bold."""
    best = _best(rows)
    lines = ["| Detector | " + " | ".join(headers) + " |", "|---|" + "---:|" * len(headers)]
    for label, row in zip(labels, rows, strict=True):
        cells = [f"**{_fmt(v)}**" if v is not None and v == best[k] else _fmt(v) for k, v in enumerate(row)]
        lines.append(f"| {label.replace('|', '/')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(headers: list[str], rows: list[list[float | None]], labels: list[str]) -> str:
    """CSV table (plain numbers, empty where none; detector labels escaped with `vhd.fileio.escape_cell`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["detector", *headers])
    for label, row in zip(labels, rows, strict=True):
        w.writerow([escape_cell(label), *("" if v is None else f"{v:.2f}" for v in row)])
    return buf.getvalue()


def _tex(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
        text = text.replace(a, b)
    return text


def to_latex(headers: list[str], rows: list[list[float | None]], labels: list[str]) -> str:
    """LaTeX tabular (booktabs), a multicolumn header per modality, best value per column in bold."""
    best = _best(rows)
    per = len(COLUMNS)
    groups = [headers[k].split(" ", 1)[0] for k in range(0, len(headers), per)]
    out = [r"\begin{tabular}{l" + "r" * len(headers) + "}", r"\toprule"]
    out.append(" & " + " & ".join(rf"\multicolumn{{{per}}}{{c}}{{{_tex(g)}}}" for g in groups) + r" \\")
    out.append("Detector & " + " & ".join(_tex(c) for _ in groups for _, c in COLUMNS) + r" \\")
    out.append(r"\midrule")
    for label, row in zip(labels, rows, strict=True):
        cells = [rf"\textbf{{{_fmt(v)}}}" if v is not None and v == best[k] else _fmt(v) for k, v in enumerate(row)]
        out.append(_tex(label) + " & " + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def long_rows(results: Sequence[DetectorResult]) -> list[dict[str, Any]]:
    """Every number as one row: detector, group, metric, value, low, high, n."""
    rows: list[dict[str, Any]] = []
    for r in results:
        for group, g in r.groups.items():
            for metric, v in g.binary.values.items():
                rows.append({"detector": r.label, "group": group, "metric": metric, **v.to_dict()})
            if g.multiclass:
                for row in g.multiclass.to_rows():
                    rows.append({"detector": r.label, "group": group, **row})
            for code, v in g.category_recall.items():
                rows.append({"detector": r.label, "group": group, "metric": f"category_recall_{code}", **v.to_dict()})
            if g.reliability:
                rows.append(
                    {
                        "detector": r.label,
                        "group": group,
                        "metric": "ece",
                        "value": g.reliability.ece,
                        "low": None,
                        "high": None,
                        "n": g.binary.n,
                    }
                )
    return rows


def long_csv(results: Sequence[DetectorResult]) -> str:
    """`long_rows` as CSV (text cells escaped with `vhd.fileio.escape_cell`, numbers as they are)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, ["detector", "group", "metric", "value", "low", "high", "n"], lineterminator="\n")
    w.writeheader()
    for row in long_rows(results):
        w.writerow({k: ("" if v is None else escape_cell(v)) for k, v in row.items()})
    return buf.getvalue()
