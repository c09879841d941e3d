"""`vhd bench` segment numbers on drawn videos with planted events at known times (issue 31).

Draws N planted-event videos (`vhd.demo.PlantedVideo`: a red disk during known spans, background
cuts at known times; 30-120 s at 10 fps, 0-2 events of 3-15 s each, seeded), one 10-minute video
with two events, and a labels CSV whose ``segments`` column holds the planted spans. A frame-scoring
rule detector that sees the disk in the pixels (`vhd.demo.red_visible`, scored frame by frame,
1.0 or 0.0) is benchmarked with `vhd.bench.benchmark`: its per-frame scores over time become spans
through the shared `spans_from_scores`, and the report gives segment F1 at IoU >= 0.5,
duration-weighted P/R/F1 and the median boundary error with bootstrap intervals over videos,
beside the video-level numbers (which use the VHD11K protocol's five frames of the first 4,000).
Peak RSS of this process (ru_maxrss) is printed after the run.

Usage: .venv/bin/python benchmarks/bench_segments.py [--n 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import csv
import random
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from vhd.bench.metrics import fmt
from vhd.bench.pipeline import benchmark
from vhd.demo import PlantedVideo, red_visible, write_event_video
from vhd.detectors.base import Detector, Prediction
from vhd.labels.spans import format_spans
from vhd.media.encoded import EncodedImage
from vhd.records import Kind, Segment


class RedRule(Detector):
    """Harmful when the planted red disk is visible in a frame (a rule that reads the pixels)."""

    name: ClassVar[str] = "red-rule"

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        seen = red_visible(images[0].to_pil())
        return Prediction(seen, score=float(seen))


def planted(rng: random.Random, duration: float) -> PlantedVideo:
    events: list[tuple[float, float]] = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        length = rng.uniform(3, 15)
        for _try in range(20):
            start = round(rng.uniform(0, duration - length), 1)
            span = (start, round(start + length, 1))
            if all(span[1] + 2 < a or span[0] > b + 2 for a, b in events):
                events.append(span)
                break
    cuts = tuple(sorted(round(rng.uniform(1, duration - 1), 1) for _ in range(rng.randint(0, 4))))
    return PlantedVideo(duration_s=duration, events=tuple(sorted(events)), cuts=cuts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20, help="short planted videos (besides the 10-minute one)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        media = root / "media"
        media.mkdir()
        videos = {f"v{k:03d}.mp4": planted(rng, float(rng.randint(30, 120))) for k in range(args.n)}
        videos["long10min.mp4"] = PlantedVideo(duration_s=600.0, events=((140.0, 152.0), (470.0, 478.5)), cuts=(300.0,))
        t0 = time.perf_counter()
        for name, video in videos.items():
            write_event_video(media / name, video)
        drawn = time.perf_counter() - t0
        with (root / "labels.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["path", "harmful", "segments"])
            for name, video in videos.items():
                spans = [Segment(a, b, True) for a, b in video.events]
                w.writerow([name, "yes" if spans else "no", format_spans(spans)])
        t0 = time.perf_counter()
        report = benchmark(root / "labels.csv", [RedRule("red-rule")], root / "out", media=media, plots=False)
        took = time.perf_counter() - t0
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result = report.results[0]
        seg = result.segments
        assert seg is not None
        minutes = sum(v.duration_s for v in videos.values()) / 60
        harmful = sum(bool(v.events) for v in videos.values())
        print(f"{len(videos)} videos ({harmful} with events, {seg.n_true} events), {minutes:.1f} video-minutes")
        print(f"drawing {drawn:.1f} s; vhd bench {took:.1f} s; peak RSS {rss_mb:.0f} MB")
        print((root / "out" / "segments.md").read_text())
        video = result.groups["video"].binary.values
        print(
            "video level (VHD11K protocol: 5 frames of the first 4,000): "
            f"recall {fmt(video['harmful_acc'].value)}, unharmful accuracy {fmt(video['unharmful_acc'].value)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
