"""What the JPEG damage check (`vhd.media.untrusted.jpeg_damage`) adds to reading a photo.

Setup: scikit-image's astronaut photo resized to a few common sizes and saved as baseline JPEG at
quality 90. For each size, the median of ``--repeats`` runs of

- ``load_image_encoded`` (what `vhd annotate` does per photo: read, decode, check, re-encode at
  1024 px) with the check on, and
- the same with the check off (``jpeg_damage`` replaced by a no-op),

and of ``jpeg_damage`` alone, interleaved. One thread; the first call (PyAV import) is not counted.

Usage: python benchmarks/jpeg_damage_cost.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from vhd.media import image as image_module
from vhd.media.image import load_image_encoded
from vhd.media.untrusted import jpeg_damage

SIZES = [(800, 600), (1920, 1080), (4032, 3024)]


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def _no_check(_data: bytes) -> None:
    return None


def measure(path: Path, data: bytes, repeats: int) -> tuple[float, float, float]:
    """Median ms of: the check alone, loading with the check off, loading with it on (interleaved)."""
    alone, off, on = [], [], []
    jpeg_damage(data)  # PyAV imported, caches warm
    for _ in range(repeats):
        alone.append(timed(lambda: jpeg_damage(data)))
        image_module.jpeg_damage = _no_check  # type: ignore[assignment]
        try:
            off.append(timed(lambda: load_image_encoded(path)))
        finally:
            image_module.jpeg_damage = jpeg_damage
        on.append(timed(lambda: load_image_encoded(path)))
    return statistics.median(alone), statistics.median(off), statistics.median(on)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    from skimage import data

    photo = Image.fromarray(data.astronaut())  # type: ignore[no-untyped-call]
    print(f"{'size':>11} {'bytes':>9} {'check alone':>12} {'load, off':>10} {'load, on':>9} {'added':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            path = Path(tmp) / f"{size[0]}.jpg"
            buf = io.BytesIO()
            photo.resize(size, Image.Resampling.BICUBIC).save(buf, "JPEG", quality=90)
            path.write_bytes(buf.getvalue())
            alone, off, on = measure(path, buf.getvalue(), args.repeats)
            label, size_bytes = f"{size[0]}x{size[1]}", len(buf.getvalue())
            print(f"{label:>11} {size_bytes:>9,} {alone:>10.1f}ms {off:>8.1f}ms {on:>7.1f}ms {on - off:>5.1f}ms")


if __name__ == "__main__":
    main()
