"""`write_stats`: `Stats` as the category figure, CSV and Markdown tables, a JSON summary and a one-page report."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.categorize.stats_plot import plot_categories, require_matplotlib
from vhd.fileio import atomic_write, escape_cell

if TYPE_CHECKING:
    from vhd.categorize.stats import Stats


def category_table(stats: Stats) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of the category table (one column per kind/source, then the total)."""
    header = ["code", "category", *stats.columns, "total"]
    rows = [[r.code, r.name, *(r.counts[c] for c in stats.columns), r.total] for r in stats.categories]
    return header, rows


def _share_table(rows: Sequence[Any], first: str) -> tuple[list[str], list[list[Any]]]:
    header = [first, "samples", "harmful", "harmful_share"]
    return header, [[r.group, r.samples, r.harmful, f"{r.share:.4f}"] for r in rows]


def tables(stats: Stats) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """Every table by file stem: categories, keywords, sources, reasons, summary."""
    return {
        "categories": category_table(stats),
        "keywords": _share_table(stats.keywords, "keyword"),
        "sources": _share_table(stats.sources, "kind/source"),
        "reasons": (["reason", "count"], [[r, n] for r, n in stats.reasons]),
        "summary": (["count", "value"], [[k, v] for k, v in stats.totals.items()]),
    }


def to_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table as CSV text; text cells (reasons, keywords) escaped with `vhd.fileio.escape_cell`."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([escape_cell(h) for h in header])
    writer.writerows([escape_cell(v) for v in r] for r in rows)
    return buf.getvalue()


def to_markdown(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table as a GitHub Markdown table (numbers right-aligned)."""

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    numeric = [
        all(isinstance(r[i], int | float) or str(r[i]).replace(".", "", 1).isdigit() for r in rows)
        for i in range(len(header))
    ]
    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---:" if n and rows else "---" for n in numeric) + "|")
    lines.extend("| " + " | ".join(cell(v) for v in r) + " |" for r in rows)
    return "\n".join(lines) + "\n"


def write_tables(stats: Stats, out: Path, *, figure: str | None = None) -> list[Path]:
    """Write ``<table>.csv`` and ``<table>.md`` for every table, ``summary.json`` and ``report.md``."""
    written: list[Path] = []
    all_tables = tables(stats)
    for stem, (header, rows) in all_tables.items():
        if stem == "summary":
            continue
        written.append(atomic_write(out / f"{stem}.csv", to_csv(header, rows)))
        written.append(atomic_write(out / f"{stem}.md", to_markdown(header, rows)))
    written.append(atomic_write(out / "summary.json", json.dumps(stats.to_dict(), indent=2, ensure_ascii=False) + "\n"))
    t = stats.totals
    parts = [
        f"# Harm categories ({stats.taxonomy})\n",
        f"{t['annotations']} annotation(s): {t['harmful']} harmful ({t['refused']} decided by refusal), "
        f"{t['unharmful']} unharmful, {t['unparsed']} unparsed, {t['errors']} error(s). "
        f"{t['harmful_categorized']} harmful annotation(s) have categories, {t['harmful_uncategorized']} have none.\n",
    ]
    if figure:
        parts.append(f"![Harmful samples per category]({figure})\n")
    titles = {
        "categories": "Harmful samples per category (a sample may count in several)",
        "sources": "Harmful share per kind and source",
        "keywords": "Harmful share per keyword",
        "reasons": "Most frequent harm reasons",
        "summary": "Counts",
    }
    for stem, title in titles.items():
        header, rows = all_tables[stem]
        parts.append(f"## {title}\n\n{to_markdown(header, rows)}")
    written.append(atomic_write(out / "report.md", "\n".join(parts)))
    return written


def write_stats(stats: Stats, out_dir: str | os.PathLike[str], *, plot: bool = True) -> list[Path]:
    """Write the figure, tables and summary into a folder.

    Files: ``categories.png`` (unless ``plot`` is False), ``categories.csv``/``.md``,
    ``keywords.csv``/``.md``, ``sources.csv``/``.md``, ``reasons.csv``/``.md``,
    ``summary.json`` and ``report.md`` (every table in one page). Each file is written
    atomically.

    Raises:
        MissingDependencyError: ``plot`` without matplotlib installed (nothing is written).
    """
    out = Path(out_dir)
    figure = None
    if plot:
        require_matplotlib()
        figure = out / "categories.png"
    written = write_tables(stats, out, figure=figure.name if figure else None)
    if figure is not None:
        plot_categories(stats, figure)
        written.insert(0, figure)
    return written
