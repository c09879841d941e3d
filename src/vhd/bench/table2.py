r"""The paper's Table 2 layout: detectors (base model, tuned checkpoints) x test sets.

Rows are detectors (the paper: pretrained InstructBLIP, tuned on SMID, tuned on VHD11K images,
tuned on VHD11K videos); for each test set three columns: Harm. (accuracy on harmful samples),
Unharm. (on unharmful ones) and Avg. (accuracy over the whole test set, as in the paper, so an
unbalanced set such as SMID's weighs its larger class more), with balanced accuracy beside it,
labelled ``Bal.``. A checkpoint trained on one modality shows "-" on a test set of the other.
Numbers are percentages with 95% bootstrap intervals; Markdown, CSV and LaTeX, like Table 1.
`run_table2` benchmarks every detector on every test set (``vhd table2``), each set in its own
report folder with its own prediction cache.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhd.bench.evaluate import DetectorResult
from vhd.bench.metrics import Value, fmt
from vhd.fileio import escape_cell

COLUMNS = (("harmful_acc", "Harm."), ("unharmful_acc", "Unharm."), ("accuracy", "Avg."), ("balanced_acc", "Bal."))
"""Columns per test set: metric key and header (Avg. is plain accuracy, Bal. balanced accuracy)."""

DASH = "-"


@dataclass
class Table2:
    """Table 2's data.

    Attributes:
        sets: Test set names, in column order.
        labels: Detector labels, in row order.
        cells: ``cells[row][set]``: metric key -> `Value`, or None where the modality does not match.
    """

    sets: list[str]
    labels: list[str]
    cells: list[list[dict[str, Value] | None]]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (None: modality mismatch)."""
        return {
            "sets": self.sets,
            "rows": [
                {
                    "detector": label,
                    **{
                        s: None if c is None else {k: v.to_dict() for k, v in c.items()}
                        for s, c in zip(self.sets, row, strict=True)
                    },
                }
                for label, row in zip(self.labels, self.cells, strict=True)
            ],
        }


def set_modality(kinds: Sequence[str]) -> str | None:
    """A test set's modality: ``image`` or ``video`` when all its samples are one kind, else None."""
    present = set(kinds)
    return present.pop() if len(present) == 1 else None


def table2(
    results: Mapping[str, Sequence[DetectorResult]],
    *,
    set_modalities: Mapping[str, str | None] | None = None,
    detector_modalities: Mapping[str, str | None] | None = None,
) -> Table2:
    """Assemble Table 2 from one benchmark result list per test set.

    Args:
        results: Test set name -> the detectors' results on it (same labels in every set).
        set_modalities: Test set -> ``image``/``video`` (None: mixed, every detector shown).
        detector_modalities: Detector label -> the modality it was trained on (None: any).
    """
    sets = list(results)
    labels = list(dict.fromkeys(r.label for rs in results.values() for r in rs))
    smod, dmod = set_modalities or {}, detector_modalities or {}
    cells: list[list[dict[str, Value] | None]] = []
    for label in labels:
        row: list[dict[str, Value] | None] = []
        for name in sets:
            found = next((r for r in results[name] if r.label == label), None)
            want, have = dmod.get(label), smod.get(name)
            group = found.groups.get("all") if found is not None else None
            if found is None or group is None or (want is not None and have is not None and want != have):
                row.append(None)
                continue
            values = group.binary.values
            row.append({k: values[k] for k, _ in COLUMNS if k in values})
        cells.append(row)
    return Table2(sets, labels, cells)


def _pct(v: Value | None, missing: str = "n/a") -> str:
    return fmt(None if v is None or v.value is None else 100 * v.value, 2, missing=missing)


def _interval(v: Value | None) -> str:
    if v is None or v.low is None or v.high is None:
        return ""
    return f"{100 * v.low:.1f}-{100 * v.high:.1f}"


def to_markdown(t: Table2) -> str:
    """Markdown: one column per set and metric, each number with its 95% interval in brackets."""
    head = [f"{s} {h}" for s in t.sets for _, h in COLUMNS]
    lines = ["| Model | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for label, row in zip(t.labels, t.cells, strict=True):
        cells: list[str] = []
        for cell in row:
            for key, _ in COLUMNS:
                if cell is None:
                    cells.append(DASH)
                    continue
                v = cell.get(key)
                iv = _interval(v)
                cells.append(_pct(v) + (f" [{iv}]" if iv else ""))
        lines.append(f"| {label.replace('|', '/')} | " + " | ".join(cells) + " |")
    note = "Avg. is accuracy over the whole test set (as in the paper); Bal. is balanced accuracy; [95% bootstrap]."
    return "\n".join(lines) + "\n\n" + note + "\n"


def to_csv(t: Table2) -> str:
    """CSV: one row per detector and set, value/low/high per metric; ``-`` where the modality does not match."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = [k for k, _ in COLUMNS]
    w.writerow(["model", "test_set", *(f"{k}{suffix}" for k in names for suffix in ("", "_low", "_high")), "n"])
    for label, row in zip(t.labels, t.cells, strict=True):
        for name, cell in zip(t.sets, row, strict=True):
            if cell is None:
                w.writerow([escape_cell(label), escape_cell(name), *([DASH] * 3 * len(names)), DASH])
                continue
            values: list[str] = []
            for k in names:
                v = cell.get(k)
                values += [_pct(v), fmt(None if v is None or v.low is None else 100 * v.low, 2, missing="n/a")]
                values += [fmt(None if v is None or v.high is None else 100 * v.high, 2, missing="n/a")]
            n = cell["accuracy"].n if "accuracy" in cell else ""
            w.writerow([escape_cell(label), escape_cell(name), *values, n])
    return buf.getvalue()


def _tex(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
        text = text.replace(a, b)
    return text


def to_latex(t: Table2) -> str:
    """LaTeX tabular (booktabs): a multicolumn header per test set, ``-`` where the modality does not match."""
    per = len(COLUMNS)
    out = [r"\begin{tabular}{l" + "r" * per * len(t.sets) + "}", r"\toprule"]
    out.append(" & " + " & ".join(rf"\multicolumn{{{per}}}{{c}}{{{_tex(s)}}}" for s in t.sets) + r" \\")
    out.append("Model & " + " & ".join(h for _ in t.sets for _, h in COLUMNS) + r" \\")
    out.append(r"\midrule")
    for label, row in zip(t.labels, t.cells, strict=True):
        cells = [DASH if cell is None else _pct(cell.get(k), "---") for cell in row for k, _ in COLUMNS]
        out.append(_tex(label) + " & " + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def write_table2(folder: str | os.PathLike[str], t: Table2) -> list[Path]:
    """Write ``table2.md``, ``table2.csv``, ``table2.tex`` and ``table2.json`` (atomically)."""
    import json

    from vhd.fileio import atomic_write

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = [
        atomic_write(out / "table2.md", to_markdown(t)),
        atomic_write(out / "table2.csv", to_csv(t)),
        atomic_write(out / "table2.tex", to_latex(t)),
        atomic_write(out / "table2.json", json.dumps(t.to_dict(), indent=2) + "\n"),
    ]
    return files


def run_table2(
    test_sets: Mapping[str, str | os.PathLike[str]],
    detector_specs: Sequence[str],
    out: str | os.PathLike[str],
    *,
    sets: Sequence[str] = (),
    config: str | os.PathLike[str] | None = None,
    resamples: int = 1000,
    concurrency: int = 1,
) -> Table2:
    """Benchmark every detector on every test set and write Table 2 to ``out``.

    Each set's report (predictions cache included) goes to ``out/<set name>/``, so a re-run
    computes only what is missing. A detector with a ``meta.modality`` (``tuned-vlm``) is not
    run on a test set of the other modality.

    Args:
        test_sets: Name -> labels file (CSV or VHD11K release file).
        detector_specs: ``[LABEL=]NAME[:MODEL]`` specs, as ``vhd bench --detector``.
        out: Folder for Table 2 and the per-set reports.
        sets: ``LABEL.key=value`` detector options.
        config: TOML file with ``[detectors.LABEL]`` tables.
        resamples: Bootstrap resamples.
        concurrency: Detector calls in flight.
    """
    from vhd.bench.data import load_bench_set
    from vhd.bench.pipeline import benchmark, build_detectors

    folder = Path(out)
    results: dict[str, list[DetectorResult]] = {}
    smod: dict[str, str | None] = {}
    dmod: dict[str, str | None] = {}
    for name, labels in test_sets.items():
        smod[name] = set_modality([i.kind.value for i in load_bench_set(labels).items])
        detectors = build_detectors(list(detector_specs), sets=list(sets), config=config)
        for d in detectors:
            meta = getattr(d, "meta", None)
            dmod[d.label] = getattr(meta, "modality", None)
        chosen = [d for d in detectors if dmod[d.label] is None or smod[name] in (None, dmod[d.label])]
        if not chosen:
            results[name] = []
            continue
        report = benchmark(labels, chosen, folder / name, resamples=resamples, plots=False, concurrency=concurrency)
        results[name] = list(report.results)
    table = table2(results, set_modalities=smod, detector_modalities=dmod)
    write_table2(folder, table)
    return table
