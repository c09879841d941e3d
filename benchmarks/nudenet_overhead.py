"""NudeNet through vhd's detector versus a plain loop over NudeNet's own ``detect()``.

Writes N byte-distinct JPEG photos (scikit-image samples with a unique pixel each), then times,
in one process and alternating the order over several repeats:

- plain: ``NudeDetector().detect(path)`` for every file;
- vhd: the file's bytes as an `EncodedImage`, judged by ``NudeNetDetector.predict`` (a thread
  per call through asyncio.to_thread, like `vhd bench`).

Usage: .venv/bin/python benchmarks/nudenet_overhead.py [--n 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from skimage import data

from vhd.detectors.nudenet import NudeNetDetector
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "horse", "moon")


def make_photos(folder: Path, n: int) -> list[Path]:
    bases = [np.asarray(Image.fromarray(getattr(data, name)()).convert("RGB")) for name in PHOTOS]
    paths = []
    for i in range(n):
        arr = bases[i % len(bases)].copy()
        arr[0, 0] = [i % 256, (i // 256) % 256, 7]  # byte-distinct
        path = folder / f"photo_{i:05d}.jpg"
        Image.fromarray(arr).save(path, quality=90)
        paths.append(path)
    return paths


def plain(paths: list[Path]) -> float:
    from nudenet import NudeDetector

    detector = NudeDetector()
    start = time.perf_counter()
    for path in paths:
        detector.detect(str(path))
    return time.perf_counter() - start


def ours(paths: list[Path]) -> float:
    det = NudeNetDetector("nudenet")

    async def go() -> float:
        await det.check()
        start = time.perf_counter()
        for path in paths:
            image = EncodedImage(path.read_bytes(), "image/jpeg", 0, 0)
            pred = await det.predict(Kind.IMAGE, [image])
            if pred.error:
                raise RuntimeError(pred.error)
        return time.perf_counter() - start

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_photos(Path(tmp), args.n)
        times: dict[str, list[float]] = {"plain": [], "vhd": []}
        for r in range(args.repeats):
            order = ("plain", "vhd") if r % 2 == 0 else ("vhd", "plain")
            for name in order:
                times[name].append((plain if name == "plain" else ours)(paths))
        best = {k: min(v) for k, v in times.items()}
        for k, v in times.items():
            runs = ", ".join(f"{t:.2f}" for t in v)
            print(f"{k:6s} best {best[k]:.2f}s ({args.n / best[k]:.1f} img/s); runs: {runs}")
        print(f"overhead: {100 * (best['vhd'] / best['plain'] - 1):+.1f}% (target: at most +10%)")


if __name__ == "__main__":
    main()
