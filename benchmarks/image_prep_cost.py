"""CPU cost of preparing one image for a model, step by step, in one thread.

The photos are those of `annotate_throughput.py` (300 JPEGs, 640-1400 px wide, about half larger
than the 1024 px sent), so the figures are that benchmark's image work per sample. Each step is
timed with ``time.process_time`` around the same calls `vhd.media.load.load_sample` makes:

- header: open the file's header, read the EXIF orientation and the decode budget's cost;
- decode: Pillow's decode (larger photos at their draft scale; a photo sent as its own bytes at
  1/8 scale, as vhd checks it) and, separately, the same decode at full size (what vhd did before);
- damage check: FFmpeg's strict decode at 1/8 scale (`vhd.media.untrusted.jpeg_damage`);
- resize and JPEG encode (larger photos only), sha256 of the file, base64 of what is sent;

then ``load_sample`` whole, which is what a run pays (its sum of the steps, plus small glue).

Usage: python benchmarks/image_prep_cost.py [--samples 300] [--repeats 2]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from annotate_throughput import make_photos  # noqa: E402


def main() -> None:
    from PIL import ExifTags, Image, ImageOps

    from vhd.media.image import decode_cost, fit_image, to_rgb
    from vhd.media.load import MediaSettings, load_sample
    from vhd.media.untrusted import jpeg_damage, open_untrusted
    from vhd.records import Kind, MediaItem

    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    side = MediaSettings().max_side
    costs: dict[str, float] = {}

    def timed(step: str, fn: Callable[[], object]) -> object:
        start = time.process_time()
        out = fn()
        costs[step] = costs.get(step, 0.0) + time.process_time() - start
        return out

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_photos(folder, args.samples, seed=1)
        paths = sorted(folder.glob("*.jpg"))
        larger = 0
        for _ in range(args.repeats):
            for path in paths:
                data = timed("read file", path.read_bytes)
                assert isinstance(data, bytes)

                def header(data: bytes = data) -> Image.Image:
                    img = open_untrusted(data)
                    img.getexif().get(ExifTags.Base.Orientation, 1)
                    decode_cost(img, side)
                    return img

                img = timed("header, orientation, decode cost", header)
                assert isinstance(img, Image.Image)
                declared = img.size
                as_is = max(declared) <= side
                larger += not as_is

                def full(data: bytes = data) -> None:
                    open_untrusted(data).load()

                timed("(before: full-size decode of every photo)", full)
                if as_is:
                    img.draft(None, (1, 1))
                else:  # the largest power-of-two reduction that keeps the longest side >= 1024 px
                    longest = max(declared)
                    img.draft(None, (math.ceil(declared[0] * side / longest), math.ceil(declared[1] * side / longest)))
                timed("Pillow decode (1/8 scale when sent as is)", img.load)
                timed("damage check (FFmpeg, 1/8 scale)", partial(jpeg_damage, data))
                timed("sha256 of the file", partial(hashlib.sha256, data))
                sent = data
                if not as_is:
                    rgb = to_rgb(ImageOps.exif_transpose(img))
                    small = timed("resize to 1024 px (larger photos)", partial(fit_image, rgb, side))
                    assert isinstance(small, Image.Image)

                    def encode(small: Image.Image = small) -> bytes:
                        buf = io.BytesIO()
                        small.save(buf, format="JPEG", quality=90)
                        return buf.getvalue()

                    encoded = timed("JPEG encode (larger photos)", encode)
                    assert isinstance(encoded, bytes)
                    sent = encoded
                timed("base64 of what is sent", partial(base64.b64encode, sent))
                timed("= load_sample whole", partial(load_sample, MediaItem(path=path, kind=Kind.IMAGE)))
    n = args.samples * args.repeats
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load {os.getloadavg()}")
    print(f"{args.samples} photos, {larger // args.repeats} larger than {side} px; ms of CPU per sample (mean)")
    steps = [k for k in costs if not k.startswith(("(", "="))]
    for step in [*steps, *(k for k in costs if k not in steps)]:
        print(f"| {step} | {1000 * costs[step] / n:.2f} |")
    print(f"| sum of the steps | {1000 * sum(costs[k] for k in steps) / n:.2f} |")


if __name__ == "__main__":
    main()
