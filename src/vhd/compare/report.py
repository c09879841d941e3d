"""Files of ``vhd compare``: ``compare.md``, ``compare.csv``, ``compare.json`` and ``compare.png``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.bench.metrics import UNDEFINED_CSV, fmt
from vhd.fileio import atomic_write, escape_cell

if TYPE_CHECKING:
    from vhd.compare.result import CompareResult, ConfigResult

CSV_COLUMNS = (
    "config",
    "family",
    "n",
    "answered",
    "asked",
    "accuracy",
    "accuracy_low",
    "accuracy_high",
    "f1",
    "f1_low",
    "f1_high",
    "kappa",
    "kappa_low",
    "kappa_high",
    "tpr",
    "tnr",
    "tokens_per_sample",
    "calls_per_sample",
    "cost_per_sample",
    "run_kappa",
    "run_agreement",
    "unparsed",
    "errors",
)


def csv_row(c: ConfigResult) -> dict[str, Any]:
    """One configuration as a CSV row (see `CSV_COLUMNS`)."""
    row: dict[str, Any] = {"config": c.name, "family": c.family, "n": c.metrics["accuracy"].n}
    row |= {"answered": c.answered, "asked": c.asked}
    for key in ("accuracy", "f1", "kappa"):
        v = c.metrics[key]
        row |= {key: v.value, f"{key}_low": v.low, f"{key}_high": v.high}
    row |= {"tpr": c.metrics["tpr"].value, "tnr": c.metrics["tnr"].value}
    row |= {
        "tokens_per_sample": round(c.tokens_per_sample, 2),
        "calls_per_sample": round(c.calls_per_sample, 3),
        "cost_per_sample": None if c.cost_per_sample is None else round(c.cost_per_sample, 8),
        "run_kappa": c.run_kappa,
        "run_agreement": c.run_agreement,
        "unparsed": c.unparsed,
        "errors": c.errors,
    }
    return row


def cost_text(cost: float | None) -> str:
    """Dollars per sample, or ``unknown`` when a model has no price (never a made-up $0)."""
    return "unknown" if cost is None else f"${cost:.6f}"


def _num(v: float | None, digits: int = 3) -> str:
    return fmt(v, digits)


def _ci(c: ConfigResult, key: str) -> str:
    v = c.metrics[key]
    if v.value is None:
        return fmt(None)
    if v.low is None or v.high is None:
        return fmt(v.value)
    return f"{fmt(v.value)} [{fmt(v.low)}, {fmt(v.high)}]"


def markdown(result: CompareResult) -> str:
    """The report: the table, the budget-matched pairs and the notes."""
    n = len(result.items)
    harmful = sum(i.harmful for i in result.items)
    repeats = len(result.configs[0].runs) if result.configs else 0
    lines = [
        "# What the debate buys for what it costs",
        "",
        f"{n} labelled samples ({harmful} harmful, {n - harmful} unharmful); {repeats} run(s) of each configuration. "
        "Metrics pool every run, with 95% bootstrap intervals over samples (a sample's runs resampled together); "
        "an answer that could not be read or whose call failed counts as wrong (answered: answers given / asked). "
        "Tokens and cost are means per sample over every run; run-to-run kappa is the mean pairwise Cohen's kappa "
        f"between runs. {fmt(None)}: undefined.",
        "",
        "| configuration | n | answered | accuracy | F1 | kappa | TPR | TNR | tokens/sample | cost/sample "
        "| run-to-run kappa | unparsed | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result.configs:
        lines.append(
            f"| {c.name} | {c.metrics['accuracy'].n} | {c.answered}/{c.asked} | {_ci(c, 'accuracy')} "
            f"| {_ci(c, 'f1')} | {_ci(c, 'kappa')} "
            f"| {_num(c.metrics['tpr'].value)} | {_num(c.metrics['tnr'].value)} | {c.tokens_per_sample:.1f} "
            f"| {cost_text(c.cost_per_sample)} | {_num(c.run_kappa)} | {c.unparsed} | {c.errors} |"
        )
    if result.matched:
        lines += [
            "",
            "## Matched token budgets",
            "",
            "| debate | tokens | accuracy | self-consistency | tokens | accuracy |",
        ]
        lines.append("|---|---|---|---|---|---|")
        for m in result.matched:
            lines.append(
                f"| {m['debate']} | {m['debate_tokens']:.1f} | {_num(m['debate_accuracy'])} | {m['sc']} "
                f"| {m['sc_tokens']:.1f} | {_num(m['sc_accuracy'])} |"
            )
    if result.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def matched_lines(result: CompareResult) -> list[str]:
    """One line per budget-matched pair, for the terminal."""
    return [
        f"{m['debate']} ({m['debate_tokens']:.0f} tok, acc {_num(m['debate_accuracy'])}) ~ "
        f"{m['sc']} ({m['sc_tokens']:.0f} tok, acc {_num(m['sc_accuracy'])})"
        for m in result.matched
    ]


def write_outputs(result: CompareResult) -> None:
    """Write the four files under ``result.out`` (the plot only when matplotlib is installed)."""
    out = result.out
    if not _plot(result, out / "compare.png"):
        result.notes.append("compare.png not drawn: matplotlib is not installed (pip install matplotlib)")
    ids = [i.id for i in result.items]
    data = {
        "samples": [{"sample_id": i.id, "path": str(i.path), "harmful": i.harmful} for i in result.items],
        "configs": [c.to_dict(ids) for c in result.configs],
        "matched": result.matched,
        "notes": result.notes,
    }
    atomic_write(out / "compare.json", json.dumps(data, indent=2, default=str) + "\n")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(
        {k: UNDEFINED_CSV if v is None else escape_cell(v) for k, v in csv_row(c).items()} for c in result.configs
    )
    atomic_write(out / "compare.csv", buf.getvalue())
    atomic_write(out / "compare.md", markdown(result))


def _plot(result: CompareResult, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    markers = {"single": "o", "self-consistency": "s", "debate": "D"}
    for ax, key, title in ((axes[0], "accuracy", "accuracy"), (axes[1], "f1", "F1")):
        for i, c in enumerate(result.configs):
            v = c.metrics[key]
            if v.value is None:
                continue
            low = v.value - v.low if v.low is not None else 0.0
            high = v.high - v.value if v.high is not None else 0.0
            ax.errorbar(
                [c.tokens_per_sample],
                [v.value],
                yerr=[[low], [high]],
                fmt=markers.get(c.family, "o"),
                color=f"C{i % 10}",
                capsize=3,
                label=c.name,
            )
        ax.set_xlabel("tokens per sample")
        ax.set_ylabel(title)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    if any(c.tokens_per_sample > 0 for c in result.configs):
        for ax in axes:
            ax.set_xscale("log")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()

    def save(fh: Any) -> None:
        fig.savefig(fh, format="png", dpi=120)

    atomic_write(path, save, binary=True)
    plt.close(fig)
    return True
