"""What the cascade saves: debate calls, all calls and tokens per sample, and accuracy, all-debate vs cascade.

A labelled set of drawn images (the label is painted into the picture: a red or a blue left half,
so scripted models can read it back from the pixels they are sent) is annotated twice with the
real `vhd.annotate` loop and store:

- all-debate: every sample debated (2 rounds: 5 calls) by a scripted backend whose judge is right
  with probability ``--debate-accuracy`` (deterministic per image);
- cascade: scripted detector stages first, each confident on a share of the samples (score near 0
  or 1, wrong with a known error rate) and unsure on the rest (score in [0.35, 0.65]); thresholds
  picked by `vhd.compare.cascade.pick_thresholds` on a separate validation half (its all-debate
  verdicts), then the cascade annotates the test half end to end.

Usage:
    python benchmarks/cascade_cost.py --samples 400 --out cascade.json

Targets (issue 15): on the test half, at most 1/3 of the all-debate debate calls at accuracy within
1 point of all-debate, and, counting every call (stage calls included), at most 40% of the
all-debate calls when the first stage is confident on most samples.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image, ImageDraw

from vhd.annotate.options import RunOptions
from vhd.backends.base import Backend, GenerateConfig, Message, Output
from vhd.detectors.base import Detector, Prediction
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

ROUNDS = 2
DEBATE_CALLS = 2 * ROUNDS + 1


def _truth(image: EncodedImage) -> bool:
    """The label painted into a sample: a red left half is harmful."""
    r, _g, b = image.to_pil().convert("RGB").resize((8, 8)).getpixel((1, 4))  # type: ignore[misc]
    return bool(r > b)


def _rng(image: EncodedImage, salt: str) -> random.Random:
    return random.Random(hashlib.sha256(image.data + salt.encode()).hexdigest())


class BenchBackend(Backend):
    """Scripted debaters and a judge right with probability ``accuracy`` (model spec ``bench:ACCURACY``)."""

    name: ClassVar[str] = "bench"
    supports_logprobs: ClassVar[bool] = True

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        words = sum(len(m.text.split()) + 85 * len(m.images) for m in messages)
        if config.tag != "judge":
            text = "1. One point about the picture.\n2. Another point.\n3. A third point."
            return Output(text, prompt_tokens=words, completion_tokens=len(text.split()))
        sample = messages[-1].images[-1]
        right = _rng(sample, "judge").random() < float(self.model)
        harmful = _truth(sample) if right else not _truth(sample)
        text = "Yes, violence." if harmful else "No, a calm scene."
        lp = {"Yes": -0.05, "No": -3.0} if harmful else {"No": -0.05, "Yes": -3.0}
        return Output(
            text, prompt_tokens=words, completion_tokens=len(text.split()), first_token_logprobs=lp, model=self.model
        )


class BenchStage(Detector):
    """A detector with known behaviour: confident on ``confident`` of the samples, wrong on ``error`` of those."""

    name: ClassVar[str] = "bench-stage"

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        image = images[0]
        rng = _rng(image, f"stage:{self.label}")
        truth = _truth(image)
        if rng.random() < float(self.options.get("confident", 0.8)):
            wrong = rng.random() < float(self.options.get("error", 0.02))
            high = truth != wrong
            score = rng.uniform(0.97, 0.999) if high else rng.uniform(0.001, 0.03)
        else:
            score = rng.uniform(0.35, 0.65)
        return Prediction(score >= 0.5, score=score)


def make_set(folder: Path, n: int, seed: int) -> list[tuple[Path, bool]]:
    """``n`` distinct drawn images, half harmful (red left half), half not (blue)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    items = []
    for i in range(n):
        harmful = i % 2 == 0
        im = Image.new("RGB", (64, 48), (rng.randrange(90, 160), rng.randrange(90, 160), rng.randrange(90, 160)))
        draw = ImageDraw.Draw(im)
        draw.rectangle((0, 0, 31, 47), fill=(230, 30, 30) if harmful else (30, 30, 230))
        draw.ellipse((34 + i % 13, 4 + i % 17, 50 + i % 11, 20 + i % 19), fill=(rng.randrange(256), 200, 40))
        draw.text((36, 30), str(i), fill=(0, 0, 0))
        path = folder / f"s{i:04d}.png"
        im.save(path)
        items.append((path, harmful))
    return items


def annotate_set(
    items: Sequence[tuple[Path, bool]], store: Path, accuracy: float, cascade: Any = None
) -> dict[str, Any]:
    """Annotate with the real loop; accuracy, calls, debate calls and tokens per sample from the store."""
    from vhd.annotate.api import annotate
    from vhd.store.sqlite import Store

    summary = annotate(
        [str(p) for p, _ in items],
        model=f"bench:{accuracy}",
        store=store,
        rounds=ROUNDS,
        options=RunOptions(cascade=cascade),
    )
    truth = {str(p.resolve()): y for p, y in items}
    with Store(store) as db:
        rows = list(db.iter_annotations(config_hash=summary.config_hash))
    n = len(rows)
    correct = sum(a.verdict.harmful == truth[str(Path(s.path).resolve())] for s, a in rows)
    debated = [a for _, a in rows if a.decided_by in (None, "debate")]
    debate_calls = sum(len(a.turns) for a in debated)
    return {
        "samples": n,
        "accuracy": correct / n,
        "calls_per_sample": sum(a.usage.calls for _, a in rows) / n,
        "debate_calls_per_sample": debate_calls / n,
        "tokens_per_sample": sum(a.usage.prompt_tokens + a.usage.completion_tokens for _, a in rows) / n,
        "debated_share": len(debated) / n,
        "decided_by": summary.decided_by,
        "elapsed_s": round(summary.elapsed_s, 2),
    }


def stage_scores(detectors: Sequence[Detector], items: Sequence[tuple[Path, bool]]) -> list[list[float | None]]:
    """Each stage's score on each sample, loaded as annotate loads them."""
    from vhd.media.discover import discover
    from vhd.media.load import load_sample

    async def go() -> list[list[float | None]]:
        loaded = [load_sample(discover([p]).items[0]) for p, _ in items]
        return [[(await d.predict(s.sample.kind, s.images)).score for s in loaded] for d in detectors]

    return asyncio.run(go())


def scenario(name: str, stages: list[dict[str, float]], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One scenario: pick thresholds on the validation half, then all-debate vs cascade on the test half."""
    from vhd.annotate.cascade import build_cascade
    from vhd.compare.cascade import pick_thresholds
    from vhd.detectors.registry import create_detector

    items = make_set(work / "media", 2 * args.samples, args.seed)
    validation = items[: args.samples]
    test = items[args.samples :]
    dets = [create_detector(f"s{i + 1}=bench-stage", opts) for i, opts in enumerate(stages)]
    val_debate = annotate_set(validation, work / f"{name}-val.db", args.debate_accuracy)
    from vhd.store.sqlite import Store

    with Store(work / f"{name}-val.db") as db:
        by_path = {str(Path(s.path).resolve()): a.verdict.harmful for s, a in db.iter_annotations()}
    verdicts = [by_path[str(p.resolve())] for p, _ in validation]
    pick = pick_thresholds(
        stage_scores(dets, validation),
        verdicts,
        [y for _, y in validation],
        tolerance=args.tolerance,
        debate_calls=DEBATE_CALLS,
    )
    all_debate = annotate_set(test, work / f"{name}-debate.db", args.debate_accuracy)
    cascade = build_cascade(dets, pick.thresholds)
    with_cascade = annotate_set(test, work / f"{name}-cascade.db", args.debate_accuracy, cascade)
    return {
        "scenario": name,
        "stages": stages,
        "debate_accuracy_setting": args.debate_accuracy,
        "thresholds": [list(t) for t in pick.thresholds],
        "validation": {"all_debate_accuracy": val_debate["accuracy"], "picked": pick.to_dict()["chosen"]},
        "all_debate": all_debate,
        "cascade": with_cascade,
        "debate_call_ratio": with_cascade["debate_calls_per_sample"] / all_debate["debate_calls_per_sample"],
        "all_call_ratio": with_cascade["calls_per_sample"] / all_debate["calls_per_sample"],
        "accuracy_delta_points": 100 * (with_cascade["accuracy"] - all_debate["accuracy"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400, help="test samples (as many more for validation)")
    parser.add_argument("--debate-accuracy", type=float, default=0.93, help="the scripted judge's accuracy")
    parser.add_argument("--tolerance", type=float, default=0.01, help="accuracy the picked thresholds may lose")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)

    from vhd.backends.registry import BUILTIN as BACKENDS
    from vhd.detectors.registry import BUILTIN as DETECTORS

    BACKENDS["bench"] = "__main__:BenchBackend"
    DETECTORS["bench-stage"] = "__main__:BenchStage"
    scenarios = {
        "guard-confident-85": [{"confident": 0.85, "error": 0.01}],
        "guard-confident-60": [{"confident": 0.60, "error": 0.01}],
        "noisy-then-guard": [{"confident": 0.70, "error": 0.06}, {"confident": 0.80, "error": 0.01}],
    }
    results = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, stages in scenarios.items():
            work = Path(tmp) / name
            results.append(scenario(name, stages, args, work))
            r = results[-1]
            a, c, v = r["all_debate"], r["cascade"], r["validation"]
            rounded = [[round(x, 3) for x in t] for t in r["thresholds"]]
            print(
                f"{name}: thresholds {rounded} (picked on validation: all-debate acc {v['all_debate_accuracy']:.3f}, "
                f"cascade acc {v['picked']['accuracy']:.3f}, debated {v['picked']['debate_share']:.1%})\n"
                f"  test all-debate: acc {a['accuracy']:.3f}, calls/sample {a['calls_per_sample']:.2f}, "
                f"tokens/sample {a['tokens_per_sample']:.0f}\n"
                f"  test cascade:    acc {c['accuracy']:.3f}, calls/sample {c['calls_per_sample']:.2f} "
                f"(debate {c['debate_calls_per_sample']:.2f}), tokens/sample {c['tokens_per_sample']:.0f}, "
                f"debated {c['debated_share']:.1%}\n"
                f"  debate-call ratio {r['debate_call_ratio']:.3f}, all-call ratio {r['all_call_ratio']:.3f}, "
                f"accuracy {r['accuracy_delta_points']:+.1f} pt",
                flush=True,
            )
    report = {"samples": args.samples, "elapsed_s": round(time.perf_counter() - start, 1), "scenarios": results}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
