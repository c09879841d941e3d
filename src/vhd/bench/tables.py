r"""Tables of benchmark numbers: the paper's Table 1 layout in Markdown, CSV and LaTeX, and a long CSV.

Table 1: one row per detector; its coverage (samples answered / samples, Answered; a sample the
detector failed on counts as wrong in every number), then for each modality (images, videos) the
columns Harm. (accuracy on harmful samples), Unharm. (on unharmful ones), Avg. (their mean) and
Multi-class; numbers in percent; the best value of each column in bold (``**x**`` in Markdown,
``\\textbf{x}`` in LaTeX; CSV has plain numbers) when the column has more than one value to
compare. An em dash (``---`` in LaTeX, ``n/a`` in CSV) where a number is undefined.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any, NamedTuple

from vhd.bench.evaluate import DetectorResult
from vhd.bench.metrics import BOUNDARY_ERROR, UNDEFINED_CSV, Value, fmt
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


class Table1(NamedTuple):
    """Table 1's data.

    Attributes:
        headers: Column headers of the numbers (``Images Harm.``...).
        rows: One row of percentages per detector (None: undefined).
        labels: Detector labels, in row order.
        coverage: Per detector (samples answered, samples); None without samples.
    """

    headers: list[str]
    rows: list[list[float | None]]
    labels: list[str]
    coverage: list[tuple[int, int] | None] | None = None


def table1(results: Sequence[DetectorResult], groups: Sequence[tuple[str, str]] = MODALITIES) -> Table1:
    """Table 1's data: (column headers, one row of percentages per detector, row labels, coverage).

    Modalities without samples are left out. Coverage counts the samples of the groups shown.
    """
    present = [(g, title) for g, title in groups if any(g in r.groups for r in results)]
    headers = [f"{title} {col}" for _, title in present for _, col in COLUMNS]
    rows = [
        [None if (v := _metric(r, g, key)) is None else 100 * v for g, _ in present for key, _ in COLUMNS]
        for r in results
    ]
    coverage: list[tuple[int, int] | None] = []
    for r in results:
        shown = [r.groups[g].binary for g, _ in present if g in r.groups]
        coverage.append((sum(b.n_answered for b in shown), sum(b.total for b in shown)) if shown else None)
    return Table1(headers, rows, [r.label for r in results], coverage)


def _best(rows: list[list[float | None]]) -> list[float | None]:
    """Each column's best value, where it has more than one value to compare (else None: nothing bold)."""
    cols = list(zip(*rows, strict=True)) if rows else []
    best: list[float | None] = []
    for col in cols:
        values = [v for v in col if v is not None]
        best.append(max(values) if len(values) > 1 else None)
    return best


def _fmt(v: float | None) -> str:
    return fmt(v, 2)


def _answered(coverage: Sequence[tuple[int, int] | None] | None, k: int, missing: str) -> list[str]:
    if coverage is None:
        return []
    c = coverage[k]
    return [missing if c is None else f"{c[0]}/{c[1]}"]


def to_markdown(
    headers: list[str],
    rows: list[list[float | None]],
    labels: list[str],
    coverage: Sequence[tuple[int, int] | None] | None = None,
) -> str:
    """Markdown table: an Answered column when coverage is given, best value per column in bold."""
    best = _best(rows)
    answered = ["Answered"] if coverage is not None else []
    head = [*answered, *headers]
    lines = ["| Detector | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for k, (label, row) in enumerate(zip(labels, rows, strict=True)):
        cells = [f"**{_fmt(v)}**" if v is not None and v == best[j] else _fmt(v) for j, v in enumerate(row)]
        cells = [*_answered(coverage, k, fmt(None)), *cells]
        lines.append(f"| {label.replace('|', '/')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(
    headers: list[str],
    rows: list[list[float | None]],
    labels: list[str],
    coverage: Sequence[tuple[int, int] | None] | None = None,
) -> str:
    """CSV table: plain numbers, ``n/a`` where undefined, coverage columns; labels escaped (`escape_cell`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    extra = ["answered", "samples"] if coverage is not None else []
    w.writerow(["detector", *extra, *headers])
    for k, (label, row) in enumerate(zip(labels, rows, strict=True)):
        counts: list[Any] = []
        if coverage is not None:
            c = coverage[k]
            counts = [UNDEFINED_CSV, UNDEFINED_CSV] if c is None else [c[0], c[1]]
        w.writerow([escape_cell(label), *counts, *(fmt(v, 2, missing=UNDEFINED_CSV) for v in row)])
    return buf.getvalue()


def _tex(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
        text = text.replace(a, b)
    return text


def to_latex(
    headers: list[str],
    rows: list[list[float | None]],
    labels: list[str],
    coverage: Sequence[tuple[int, int] | None] | None = None,
) -> str:
    """LaTeX tabular (booktabs), a multicolumn header per modality, best value per column in bold."""
    best = _best(rows)
    per = len(COLUMNS)
    groups = [headers[k].split(" ", 1)[0] for k in range(0, len(headers), per)]
    lead = "l" if coverage is not None else ""
    out = [r"\begin{tabular}{l" + lead + "r" * len(headers) + "}", r"\toprule"]
    pad = " & " if coverage is not None else ""
    out.append(" & " + pad + " & ".join(rf"\multicolumn{{{per}}}{{c}}{{{_tex(g)}}}" for g in groups) + r" \\")
    answered = ["Answered"] if coverage is not None else []
    out.append("Detector & " + " & ".join([*answered, *(_tex(c) for _ in groups for _, c in COLUMNS)]) + r" \\")
    out.append(r"\midrule")
    for k, (label, row) in enumerate(zip(labels, rows, strict=True)):
        cells = [
            rf"\textbf{{{_fmt(v)}}}" if v is not None and v == best[k2] else fmt(v, 2, missing="---")
            for k2, v in enumerate(row)
        ]
        cells = [*_answered(coverage, k, "---"), *cells]
        out.append(_tex(label) + " & " + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


SEGMENT_COLUMNS = (
    ("segment_f1", "Segment F1"),
    ("segment_precision", "Seg. P"),
    ("segment_recall", "Seg. R"),
    ("duration_f1", "Duration F1"),
    ("duration_precision", "Dur. P"),
    ("duration_recall", "Dur. R"),
    (BOUNDARY_ERROR, "Boundary err. (s)"),
)
"""The segment table's columns (`vhd.bench.metrics.segments`): metric key and header."""


def _with_interval(v: Value | None) -> str:
    if v is None or v.value is None:
        return fmt(None)
    if v.low is None or v.high is None:
        return fmt(v.value)
    return f"{fmt(v.value)} [{fmt(v.low)}, {fmt(v.high)}]"


def segment_markdown(results: Sequence[DetectorResult]) -> str | None:
    """Where in the videos each detector found harm, as a Markdown table; None when no detector has segment numbers.

    One row per detector with segments: the videos compared (answered / with spans to compare),
    segment-level F1, precision and recall at its IoU, duration-weighted F1, precision and recall,
    and the median boundary error in seconds, each with its 95% bootstrap interval over videos.
    """
    shown = [r for r in results if r.segments is not None]
    if not shown:
        return None
    iou = shown[0].segments.iou if shown[0].segments is not None else 0.5
    heads = [h.replace("Segment F1", f"Segment F1 (IoU>={iou:g})") for _, h in SEGMENT_COLUMNS]
    lines = ["| Detector | Videos | " + " | ".join(heads) + " |", "|---|---:|" + "---:|" * len(heads)]
    for r in shown:
        seg = r.segments
        assert seg is not None
        cells = [_with_interval(seg.values.get(k)) for k, _ in SEGMENT_COLUMNS]
        videos = f"{seg.n_answered}/{seg.n_videos}"
        lines.append(f"| {r.label.replace('|', '/')} | {videos} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def segment_csv(results: Sequence[DetectorResult]) -> str:
    """The segment table as CSV: per detector, each metric's value, low and high (``n/a`` where undefined)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "detector",
            "videos",
            "answered",
            "iou",
            *(f"{k}{s}" for k, _ in SEGMENT_COLUMNS for s in ("", "_low", "_high")),
        ]
    )
    for r in results:
        seg = r.segments
        if seg is None:
            continue
        cells: list[Any] = []
        for k, _ in SEGMENT_COLUMNS:
            v = seg.values.get(k)
            cells += [
                fmt(None if v is None else x, 4, missing=UNDEFINED_CSV)
                for x in (None if v is None else v.value, None if v is None else v.low, None if v is None else v.high)
            ]
        w.writerow([escape_cell(r.label), seg.n_videos, seg.n_answered, seg.iou, *cells])
    return buf.getvalue()


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
        if r.segments is not None:
            for row in r.segments.to_rows():
                rows.append({"detector": r.label, "group": "video-segments", **row})
    return rows


def long_csv(results: Sequence[DetectorResult]) -> str:
    """`long_rows` as CSV (text cells escaped with `vhd.fileio.escape_cell`, numbers as they are)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, ["detector", "group", "metric", "value", "low", "high", "n"], lineterminator="\n")
    w.writeheader()
    for row in long_rows(results):
        w.writerow({k: (UNDEFINED_CSV if v is None else escape_cell(v)) for k, v in row.items()})
    return buf.getvalue()
