"""Files of the in-context example search: inputs, example folders, rounds, report and plot.

Layout under ``--out``::

    rounds/round_00.json         examples, metrics and confusion matrix of each round
    rounds/round_01/examples.csv the example set tried in round 1, with its media
    best/examples.csv            the best set: `vhd annotate --icl OUT/best`
    search.json                  every round plus the holdout estimate, in one file
    report.md                    Table 4 of the paper: TPR, TNR, F1 without and with examples
    metric.png                   the metric per round (needs matplotlib)
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.bench.metrics import fmt
from vhd.fileio import atomic_write, escape_cell
from vhd.labels.sets import LabelledItem

if TYPE_CHECKING:
    from vhd.icl.result import Scored, SearchResult
    from vhd.labels.rules import LabelOptions


def expected_answer(item: LabelledItem) -> str:
    """The answer an example should get: "Yes, <reason>." / "No, <reason>.", else a template."""
    reason = (item.reason or "").strip().rstrip(".").strip()
    if not reason and item.harmful and item.categories:
        reason = ", ".join(item.categories).lower()
    if item.harmful:
        return f"Yes, {reason or 'the content is harmful'}."
    return f"No, {reason or 'nothing harmful is shown'}."


def write_json(path: Path, data: Any) -> Path:
    """Write JSON atomically."""
    return atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def _place(src: Path, dest: Path) -> None:
    if dest.exists():
        return
    if src.is_dir():
        shutil.copytree(src, dest)
        return
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def write_examples(folder: Path, examples: Sequence[dict[str, str]]) -> Path:
    """Write an examples folder that `vhd annotate --icl` reads: the media (linked or copied) and ``examples.csv``.

    Args:
        folder: The folder (created).
        examples: ``{sample_id, path, answer}`` mappings, in order.

    Returns:
        The folder.
    """
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["path", "answer", "sample_id", "source_path"])
    for e in examples:
        src = Path(e["path"])
        name = f"{e['sample_id'][:16]}{'' if src.is_dir() else src.suffix.lower()}"
        _place(src, folder / name)
        writer.writerow([escape_cell(c) for c in (name, e["answer"], e["sample_id"], str(src))])
    atomic_write(folder / "examples.csv", buf.getvalue())
    return folder


def resolve_validation(
    validation: str | os.PathLike[str],
    store: Path,
    options: LabelOptions | None = None,
    on_event: Callable[[str], None] | None = None,
) -> list[LabelledItem]:
    """The validation samples: a labels file (also stored as set ``icl-validation``) or a set name.

    See `vhd.labels.sets.labels_or_set`.
    """
    from vhd.labels.sets import labels_or_set

    return labels_or_set(validation, store, options, on_event, save_as="icl-validation", what="validation labels")


def _pct(v: float | None) -> str:
    return fmt(v, 1, scale=100)


def _row(label: str, s: Scored) -> str:
    m = s.metrics
    c = s.confusion
    return (
        f"| {label} | {_pct(m['tpr'])} | {_pct(m['tnr'])} | {_pct(m['f1'])} | {_pct(m['balanced_accuracy'])} "
        f"| {s.n} | {c['tp']}/{c['fp']}/{c['tn']}/{c['fn']} |"
    )


def write_report(result: SearchResult) -> None:
    """Write ``search.json``, ``report.md`` and ``metric.png`` (when matplotlib is installed)."""
    out = result.out
    data = {
        "metric": result.metric,
        "stopped": result.stopped,
        "message": result.message,
        "best_round": result.best_round,
        "best_examples": str(result.best_examples) if result.best_examples else None,
        "calls": result.calls,
        "cost": result.cost,
        "rounds": [r.to_dict() for r in result.rounds],
        "holdout": {k: v.to_dict() for k, v in result.holdout.items()},
    }
    write_json(out / "search.json", data)
    head = "| examples | TPR | TNR | F1 | balanced acc. | n | TP/FP/TN/FN |\n|---|---|---|---|---|---|---|"
    lines = ["# In-context example search", ""]
    lines.append(
        f"Metric: {result.metric}. Rounds run: {max(len(result.rounds) - 1, 0)}; best: round {result.best_round}; "
        f"stopped: {result.stopped}{' (' + result.message + ')' if result.message else ''}. "
        f"Calls this run: {result.calls}, cost ${result.cost:.4f}."
    )
    if result.rounds and result.baseline is not None:
        best = result.rounds[result.best_round]
        lines += ["", "## Validation samples that are not examples (as Table 4, in %)", "", head]
        lines.append(_row("none", result.baseline))
        if best.round:
            lines.append(_row(f"{len(best.examples)} (round {best.round})", best.scored))
        else:
            lines += ["", "No example set beat annotating without examples."]
    if result.holdout:
        lines += ["", "## Held-out samples (never used by the search)", "", head]
        lines.append(_row("none", result.holdout["without"]))
        lines.append(_row(f"{len(result.rounds[result.best_round].examples)} (best)", result.holdout["with"]))
    lines += ["", "## Rounds", "", "| round | examples | added | " + result.metric + " | best before | kept |"]
    lines.append("|---|---|---|---|---|---|")
    for r in result.rounds:
        before = "" if r.best_before is None else fmt(r.best_before.value(result.metric))
        kept = "yes" if r.accepted else "no"
        added = ", ".join(a[:8] for a in r.added)
        lines.append(
            f"| {r.round} | {len(r.examples)} | {added} | {fmt(r.scored.value(result.metric))} | {before} | {kept} |"
        )
    atomic_write(out / "report.md", "\n".join(lines) + "\n")
    _plot(result, out / "metric.png")


def _plot(result: SearchResult, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    xs = [r.round for r in result.rounds]
    # an undefined value is a gap in the line (NaN), never a point at -1 below the axis
    ys = [math.nan if (v := r.scored.value(result.metric)) is None else v for r in result.rounds]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(xs, ys, marker="o", label="candidate set")
    kept = [(r.round, v) for r in result.rounds if r.accepted and (v := r.scored.value(result.metric)) is not None]
    ax.scatter([k[0] for k in kept], [k[1] for k in kept], s=80, facecolors="none", edgecolors="C2", label="kept")
    ax.set_xlabel("round")
    ax.set_ylabel(result.metric)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(xs)
    ax.legend(loc="lower right")
    fig.tight_layout()

    def save(fh: Any) -> None:
        fig.savefig(fh, format="png", dpi=120)

    atomic_write(path, save, binary=True)
    plt.close(fig)
