"""Quality of the ``embed`` categorisation method on a labelled set of harm reasons.

The set (tests/taxonomy/data/category_reasons.csv, a labels CSV: id, harmful, reason,
categories) holds 243 multi-label reasons written for vhd from the paper's keywords, example
prompts (appendix F) and category definitions (appendix H). Each run splits it at random (seeded)
into a calibration part and an evaluation part and reports, on the evaluation part:

- ``uncalibrated``: the taxonomy's names and examples as prototypes, one default threshold;
- ``thresholds``: per-category thresholds calibrated on the other part;
- ``calibrated``: thresholds plus the calibration reasons as extra prototypes (what
  ``vhd categorize --method embed --calibrate LABELS.csv`` does).

Metrics: micro-F1, macro-F1, exact match, top-1 precision (the best category is right), and
precision/recall/F1 per category (for the last mode), as mean and standard deviation over seeds.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/categorize_quality.py [--seeds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "taxonomy" / "data" / "category_reasons.csv"


def f1_scores(truth: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    tp = (truth & pred).sum(axis=0)
    fp = (~truth & pred).sum(axis=0)
    fn = (truth & ~pred).sum(axis=0)
    micro = 2 * tp.sum() / max(1, 2 * tp.sum() + fp.sum() + fn.sum())
    per = 2 * tp / np.maximum(1, 2 * tp + fp + fn)
    precision = tp / np.maximum(1, tp + fp)
    recall = tp / np.maximum(1, tp + fn)
    return {
        "micro_f1": float(micro),
        "macro_f1": float(per.mean()),
        "exact_match": float((truth == pred).all(axis=1).mean()),
        "per_category": {"f1": per.tolist(), "precision": precision.tolist(), "recall": recall.tolist()},
    }


def evaluate(scorer: Any, reasons: list[str], truth: np.ndarray, codes: list[str]) -> dict[str, Any]:
    from vhd.categorize.embed import EmbedText

    decided = scorer.categorize([EmbedText(r) for r in reasons])
    pred = np.array([[c in {code for code, _ in d} for c in codes] for d in decided], dtype=bool)
    out = f1_scores(truth, pred)
    scores = scorer.score([EmbedText(r) for r in reasons])
    top = scores.argmax(axis=1)
    out["top1_precision"] = float(truth[np.arange(len(top)), top].mean())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="labels CSV with reason and categories")
    parser.add_argument("--model", help="sentence-transformers model (default: packaged all-MiniLM-L6-v2)")
    parser.add_argument("--seeds", type=int, default=5, help="random splits to average over")
    parser.add_argument("--train-fraction", type=float, default=0.5, help="share used for calibration")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from vhd.categorize.calibration import read_calibration
    from vhd.categorize.embed import EmbedCategorizer, EmbedText
    from vhd.categorize.embedding import load_embedder
    from vhd.taxonomy import load_taxonomy

    tax = load_taxonomy()
    codes = tax.codes
    reasons, labels, _ = read_calibration(args.data, tax)
    truth = np.array([[c in row for c in codes] for row in labels], dtype=bool)
    t0 = time.perf_counter()
    embedder = load_embedder(args.model)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    EmbedCategorizer(tax, embedder).score([EmbedText(r) for r in reasons])
    score_s = time.perf_counter() - t0

    runs: dict[str, list[dict[str, Any]]] = {"uncalibrated": [], "thresholds": [], "calibrated": []}
    for seed in range(args.seeds):
        order = np.random.default_rng(seed).permutation(len(reasons))
        cut = int(len(order) * args.train_fraction)
        train, test = order[:cut], order[cut:]
        test_reasons = [reasons[i] for i in test]
        for mode in runs:
            scorer = EmbedCategorizer(tax, embedder)
            if mode != "uncalibrated":
                scorer.calibrate(
                    [reasons[i] for i in train], [labels[i] for i in train], add_examples=mode == "calibrated"
                )
            runs[mode].append(evaluate(scorer, test_reasons, truth[test], codes))

    report: dict[str, Any] = {
        "data": str(args.data.relative_to(ROOT) if args.data.is_relative_to(ROOT) else args.data),
        "reasons": len(reasons),
        "multi_label": int((truth.sum(axis=1) > 1).sum()),
        "seeds": args.seeds,
        "train_fraction": args.train_fraction,
        "model": embedder.name,
        "model_load_s": round(load_s, 2),
        "score_all_s": round(score_s, 3),
        "modes": {},
    }
    for mode, results in runs.items():
        summary: dict[str, Any] = {}
        for key in ("micro_f1", "macro_f1", "exact_match", "top1_precision"):
            values = [r[key] for r in results]
            summary[key] = {"mean": round(statistics.mean(values), 4), "std": round(statistics.pstdev(values), 4)}
        per = {}
        for j, code in enumerate(codes):
            per[f"{code}. {tax.get(code).name}"] = {
                k: round(statistics.mean(r["per_category"][k][j] for r in results), 3)
                for k in ("precision", "recall", "f1")
            }
        summary["per_category"] = per
        report["modes"][mode] = summary

    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{report['reasons']} labelled reasons ({report['multi_label']} multi-label), {args.seeds} random splits, "
        f"{args.train_fraction:.0%} for calibration; model {report['model']} (load {load_s:.1f} s, "
        f"scoring all reasons {score_s:.2f} s)"
    )
    print("| mode | micro-F1 | macro-F1 | exact match | top-1 precision |")
    print("|---|---:|---:|---:|---:|")
    for mode, s in report["modes"].items():
        cells = [
            f"{s[k]['mean']:.3f} ± {s[k]['std']:.3f}" for k in ("micro_f1", "macro_f1", "exact_match", "top1_precision")
        ]
        print(f"| {mode} | " + " | ".join(cells) + " |")
    print("\nper category (calibrated):\n| category | precision | recall | F1 |\n|---|---:|---:|---:|")
    for name, m in report["modes"]["calibrated"]["per_category"].items():
        print(f"| {name} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
