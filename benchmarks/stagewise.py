"""Does stage-wise debating (``vhd annotate --stage-wise``) beat per-sample order?

Two back ends, each annotating the same drawn images twice (per-sample order, then stage-wise)
into fresh stores, in this process with the library call `vhd.annotate`:

- ``hf``: a tiny random-weight LLaVA (tests/tiny_models.py) on the CPU with the hf backend's
  request batching (``max_batch_size`` = concurrency). Reported: wall time, and the batches the
  worker ran (from its debug log: calls per ``generate`` and groups per batch; calls of different
  roles cannot share a ``generate`` since their token caps differ).
- ``openai``: a loopback Chat Completions server (tests/servers/chat_server.py) answering after a
  fixed latency, with no capacity limit. Reported: wall time.

Usage: python benchmarks/stagewise.py [--samples 32] [--concurrency 8] [--latency 0.05] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vhd.annotate.options import RunOptions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))


def make_images(folder: Path, n: int) -> None:
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        im = Image.new("RGB", (64, 64), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
        ImageDraw.Draw(im).ellipse((i % 20, i % 17, 40 + i % 20, 40 + i % 17), fill=(255 - i * 5 % 256, 80, 40))
        im.save(folder / f"img_{i:03d}.png")


class BatchLog(logging.Handler):
    """Counts the hf worker's batches from its debug line ``hf batch: N calls in G group(s)``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.batches: list[tuple[int, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("hf batch:"):
            calls, groups = record.args  # type: ignore[misc]
            if calls:  # the worker logs an empty batch when it stops
                self.batches.append((int(calls), int(groups)))


def annotate(media: Path, store: Path, config: Any, stage_wise: bool) -> dict[str, Any]:
    import vhd

    start = time.perf_counter()
    summary = vhd.annotate([media], store=store, config=config, options=RunOptions(stage_wise=stage_wise))
    wall = time.perf_counter() - start
    assert summary.annotated == summary.found, summary.to_dict()
    return {"wall_s": round(wall, 2), "samples_per_s": round(summary.annotated / wall, 2), "calls": summary.usage.calls}


def bench_hf(media: Path, work: Path, n: int, concurrency: int) -> dict[str, Any]:
    from tests.tiny_models import build_tiny_llava

    from vhd.config import AnnotateConfig

    model = build_tiny_llava(work / "tiny_llava")
    config = AnnotateConfig(
        model=f"hf:{model}",
        concurrency=concurrency,
        backends={"hf": {"device": "cpu", "max_batch_size": concurrency, "batch_wait_ms": 10}},
        debate={"debater_max_tokens": 24, "judge_max_tokens": 8},
    )
    handler = BatchLog()
    worker_log = logging.getLogger("vhd.backends.hf_worker")
    worker_log.addHandler(handler)
    worker_log.setLevel(logging.DEBUG)
    out: dict[str, Any] = {}
    annotate(media, work / "warm.db", config.model_copy(update={"concurrency": 1}), False)  # load, warm caches
    for mode, staged in (("stage_wise", True), ("per_sample", False), ("stage_wise_again", True)):
        handler.batches.clear()
        row = annotate(media, work / f"hf-{mode}.db", config, staged)
        calls = [c for c, _ in handler.batches]
        row["batches"] = len(calls)
        row["mean_calls_per_batch"] = round(sum(calls) / max(len(calls), 1), 2)
        row["mean_groups_per_batch"] = round(sum(g for _, g in handler.batches) / max(len(calls), 1), 2)
        out[mode] = row
    worker_log.removeHandler(handler)
    return out


def bench_openai(media: Path, work: Path, concurrency: int, latency: float) -> dict[str, Any]:
    from tests.servers.chat_server import ChatServer

    from vhd.config import AnnotateConfig

    out: dict[str, Any] = {}
    with ChatServer("No, plain shapes.", latency=latency, record=False) as server:
        config = AnnotateConfig(
            model="openai:bench", concurrency=concurrency, backends={"openai": {"base_url": server.base_url}}
        )
        annotate(media, work / "warm-openai.db", config, False)
        for mode, staged in (("stage_wise", True), ("per_sample", False), ("stage_wise_again", True)):
            out[mode] = annotate(media, work / f"openai-{mode}.db", config, staged)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--only", choices=["hf", "openai"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_images(work / "media", args.samples)
        make_images(work / "warm-media", 2)
        results = {}
        if args.only in (None, "hf"):
            results["hf"] = bench_hf(work / "media", work, args.samples, args.concurrency)
        if args.only in (None, "openai"):
            results["openai"] = bench_openai(work / "media", work, args.concurrency, args.latency)
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"{args.samples} images, concurrency {args.concurrency}, 2 rounds (5 calls a sample)")
    for backend, rows in results.items():
        for mode, row in rows.items():
            print(f"{backend:7} {mode:10} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "results": results}, indent=2))


if __name__ == "__main__":
    main()
