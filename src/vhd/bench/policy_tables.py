"""Tables of a policy's checks in a benchmark: severity agreement and subsets' false-positive rates.

``severity.md``: per detector that gives severity levels, the quadratic-weighted kappa and the
exact agreement (with intervals) and the confusion matrix by level (rows: the labels' level;
columns: the detector's, then ``no level``). ``subsets.md`` / ``subsets.csv``: per detector and
``--subset``, the false-positive rate on the subset's unharmful samples, in percent with its
95% interval. The same numbers go to ``results.json``, ``metrics.csv`` and ``index.html``
(`html_sections`).
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from typing import Any

from vhd.bench.evaluate import DetectorResult
from vhd.bench.metrics import UNDEFINED_CSV, Value, fmt
from vhd.bench.metrics.severity import NO_LEVEL, SeverityResult
from vhd.bench.subsets import SubsetResult
from vhd.fileio import escape_cell


def interval(v: Value, *, scale: float = 1.0, digits: int = 3) -> str:
    """``0.812 [0.700, 0.900]`` (the bracket left out without an interval; an em dash when undefined)."""
    text = fmt(v.value, digits, scale=scale)
    if v.value is not None and v.low is not None and v.high is not None:
        text += f" [{fmt(v.low, digits, scale=scale)}, {fmt(v.high, digits, scale=scale)}]"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "/")


def severity_results(results: Sequence[DetectorResult]) -> list[tuple[str, SeverityResult]]:
    """(detector label, severity numbers over all samples) for each detector that has them."""
    return [(r.label, sev) for r in results if "all" in r.groups and (sev := r.groups["all"].severity) is not None]


def confusion_markdown(sev: SeverityResult) -> str:
    """The confusion matrix by level as a Markdown table (rows: labels; columns: detector)."""
    cols = [*sev.steps, NO_LEVEL]
    lines = ["| label \\ detector | " + " | ".join(_cell(c) for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for step, row in zip(sev.steps, sev.confusion, strict=True):
        lines.append(f"| {_cell(step)} | " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def severity_markdown(results: Sequence[DetectorResult]) -> str:
    """Each severity-giving detector's kappa, exact agreement and confusion matrix; empty when none."""
    parts: list[str] = []
    for label, sev in severity_results(results):
        parts.append(
            f"## {_cell(label)}\n\n"
            f"Quadratic-weighted kappa: {interval(sev.kappa)} on {sev.answered} of {sev.n} labelled sample(s) "
            f"the detector gave a level for; exact level: {interval(sev.exact)} of {sev.n}.\n\n"
            + confusion_markdown(sev)
        )
    return "\n".join(parts)


def subsets_markdown(subsets: Sequence[SubsetResult], labels: Sequence[str]) -> str:
    """One row per detector, one column per subset: false-positive rate in percent [95% interval]."""
    if not subsets:
        return ""
    head = [f"{_cell(s.name)} FPR % (n={s.unharmful})" for s in subsets]
    lines = ["| Detector | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for label in labels:
        cells = [interval(s.fpr[label], scale=100, digits=1) if label in s.fpr else fmt(None) for s in subsets]
        lines.append(f"| {_cell(label)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def subset_rows(subsets: Sequence[SubsetResult]) -> list[dict[str, Any]]:
    """Every subset number as a row: detector, subset, fpr, low, high, n, failed, harmful left out."""
    return [
        {
            "detector": label,
            "subset": s.name,
            "fpr": v.value,
            "low": v.low,
            "high": v.high,
            "n": v.n,
            "failed": s.failed.get(label, 0),
            "harmful_left_out": s.harmful,
        }
        for s in subsets
        for label, v in s.fpr.items()
    ]


def subsets_csv(subsets: Sequence[SubsetResult]) -> str:
    """`subset_rows` as CSV (``n/a`` where undefined; text cells escaped)."""
    buf = io.StringIO()
    names = ["detector", "subset", "fpr", "low", "high", "n", "failed", "harmful_left_out"]
    w = csv.DictWriter(buf, names, lineterminator="\n")
    w.writeheader()
    for row in subset_rows(subsets):
        w.writerow({k: (UNDEFINED_CSV if v is None else escape_cell(v)) for k, v in row.items()})
    return buf.getvalue()


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows]
    return "\n".join([*out, "</table>"])


def html_sections(results: Sequence[DetectorResult], subsets: Sequence[SubsetResult]) -> list[str]:
    """The report page's severity and subset sections (empty when there is neither)."""
    parts: list[str] = []
    rated = severity_results(results)
    if rated:
        parts.append(
            "<h2>Severity</h2><p>Labelled level against the detector's, on the policy's scale with "
            "<i>none</i> (unharmful) below its lowest level. Quadratic-weighted kappa with its 95% interval.</p>"
        )
        for label, sev in rated:
            parts.append(
                f"<h3>{html.escape(label)}</h3><p>kappa {html.escape(interval(sev.kappa))} "
                f"({sev.answered} of {sev.n} labelled samples with a level); exact level "
                f"{html.escape(interval(sev.exact))}</p>"
            )
            rows = [[step, *(str(c) for c in row)] for step, row in zip(sev.steps, sev.confusion, strict=True)]
            parts.append(_html_table(["label \\ detector", *sev.steps, NO_LEVEL], rows))
    if subsets:
        parts.append(
            "<h2>Subsets</h2><p>False-positive rate (%) on each subset's unharmful samples, with its 95% "
            "interval; a sample a detector failed on counts as flagged.</p>"
        )
        labels = list(dict.fromkeys(label for s in subsets for label in s.fpr))
        head = ["detector", *(f"{s.name} (n={s.unharmful})" for s in subsets)]
        rows = [
            [label, *(interval(s.fpr[label], scale=100, digits=1) if label in s.fpr else fmt(None) for s in subsets)]
            for label in labels
        ]
        parts.append(_html_table(head, rows))
        for s in subsets:
            if s.harmful or s.problems:
                parts.append(
                    f"<p>{html.escape(s.name)}: {s.harmful} harmful sample(s) left out, "
                    f"{len(s.problems)} row(s) with problems.</p>"
                )
    return parts
