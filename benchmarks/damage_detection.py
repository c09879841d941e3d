"""How much concealed damage vhd's checks catch, per image format and video codec.

Setup: for JPEG, scikit-image's astronaut photo (512x512, baseline, quality 90); for each video
codec vhd reads, a drawn 64x64 clip of 24 frames (tests/hostile_corpus.py). Each trial flips
``--flips`` random bytes in the middle 80% of the file (the coded data, past the headers) with a
seeded generator, then reads it the way every command does (`vhd.media.image.open_image`, or
`vhd.media.video.read_frames` for the 5 frames shown to the models). A trial ends as:

- ``refused``: a `MediaError` (the damage check, or a decoder error);
- ``clean``: read, and every pixel read is within 2/255 (mean) of the undamaged file's;
- ``garbled``: read, but some image or frame differs by more than 2/255 on average: damage that
  neither the decoder nor the check saw. ``worst`` is the largest mean difference, and ``>32``
  the largest share of pixels off by more than 32.

``--err-detect FLAGS`` decodes videos with other FFmpeg ``err_detect`` flags than vhd's
(``explode``), e.g. ``crccheck+bitstream+buffer+explode``, to measure what they would add.

Usage: python benchmarks/damage_detection.py [--trials 200] [--flips 4] [--err-detect FLAGS]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.hostile_corpus import VIDEO_CODECS, video_bytes

from vhd.errors import MediaError
from vhd.media.image import open_image
from vhd.media.video import read_frames


def astronaut_jpeg() -> bytes:
    from skimage import data

    buf = io.BytesIO()
    Image.fromarray(data.astronaut()).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def pixels(images: list[Image.Image]) -> list[np.ndarray]:
    return [np.asarray(img.convert("RGB"), dtype=np.int16) for img in images]


def trial_outcomes(
    good: bytes, suffix: str, read: Callable[[Path], list[Image.Image]], args: argparse.Namespace
) -> str:
    rng = np.random.default_rng(args.seed)
    folder = Path(tempfile.mkdtemp())
    ref_path = folder / f"ref{suffix}"
    ref_path.write_bytes(good)
    ref = pixels(read(ref_path))
    counts = {"refused": 0, "clean": 0, "garbled": 0}
    worst, share = 0.0, 0.0
    for _ in range(args.trials):
        data = bytearray(good)
        for pos in rng.integers(len(good) // 10, len(good) * 9 // 10, args.flips):
            data[pos] ^= int(rng.integers(1, 256))
        path = folder / f"t{suffix}"
        path.write_bytes(bytes(data))
        try:
            got = pixels(read(path))
        except MediaError:
            counts["refused"] += 1
            continue
        if len(got) != len(ref) or any(a.shape != b.shape for a, b in zip(got, ref, strict=True)):
            counts["garbled"] += 1
            continue
        diffs = [np.abs(a - b) for a, b in zip(got, ref, strict=True)]
        mean = max(float(d.mean()) for d in diffs)
        if mean > 2:
            counts["garbled"] += 1
            worst = max(worst, mean)
            share = max(share, max(float((d.max(axis=-1) > 32).mean()) for d in diffs))
        else:
            counts["clean"] += 1
    n = args.trials
    return (
        f"{counts['refused'] / n:6.0%} {counts['clean'] / n:6.0%} {counts['garbled'] / n:8.0%}"
        f" {worst:6.1f} {share:5.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--flips", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--err-detect", help="FFmpeg err_detect flags for the videos instead of vhd's")
    args = parser.parse_args()
    if args.err_detect:
        import vhd.media.videoframes

        vhd.media.videoframes.STRICT = {"err_detect": args.err_detect}  # what `strict` sets on each stream
        print(f"videos decoded with err_detect={args.err_detect}")
    print(f"{args.trials} trials of {args.flips} flipped bytes each")
    print(f"{'input':8} {'refused':>7} {'clean':>6} {'garbled':>8} {'worst':>6} {'>32':>5}")
    print(f"{'jpeg':8} " + trial_outcomes(astronaut_jpeg(), ".jpg", lambda p: [open_image(p)], args))
    for name, encoder, fmt, ext in VIDEO_CODECS:
        good = video_bytes(encoder, fmt, frames=24)
        print(f"{name:8} " + trial_outcomes(good, ext, lambda p: read_frames(p, 5).images, args))


if __name__ == "__main__":
    main()
