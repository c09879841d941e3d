"""Speed of picking a video's frames: the keyframe-aware plan against decoding every frame.

Setup: videos encoded here with PyAV, every frame carrying its own index drawn as a 12-bit
code of black and white blocks over a slowly panning scikit-image photo (so that frame identity
can be checked after lossy compression):

- long: 1280x720 H.264 (libx264 ``veryfast``, CRF 30, the encoder's default keyframe spacing:
  keyint 250, scene-cut detection on), 4,500 frames at 30 fps, as MP4 and as MKV (no frame
  count in the header); with ``--vp9`` also a VP9 WebM of the same frames.
- short: 1280x720 H.264 MP4 of 240 frames (8 s) and a VP9 WebM of 240 frames.

For each video, `read_frames(path, 5, 4000)` runs with ``strategy="auto"`` (the plan) and
``strategy="decode"`` (forward decoding of every frame up to the last wanted one, the previous
behaviour), in a shuffled order, ``--repeats`` times each; the median wall time and process CPU time
(decoder threads included) are reported with frames decoded and seeks. Both must return the
same indices and pixel-identical frames, and the drawn index of every frame must equal its
planned index.

Videos are cached under ``--cache`` (default /tmp/vhd-bench-frames) and reused.

Usage: python benchmarks/frames_speed.py [--repeats 5] [--vp9] [--cache DIR] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

W, H = 1280, 720
BLOCK = 60
BITS = 12


def draw_code(canvas: Any, i: int) -> None:
    for bit in range(BITS):
        x = 40 + bit * (BLOCK + 20)
        canvas[40 : 40 + BLOCK, x : x + BLOCK] = 255 if (i >> bit) & 1 else 0


def read_code(image: Any) -> int:
    import numpy as np

    gray = np.asarray(image.convert("L"), dtype=np.int32)
    value = 0
    for bit in range(BITS):
        x = 40 + bit * (BLOCK + 20) + BLOCK // 2
        if gray[40 + BLOCK // 2, x] > 128:
            value |= 1 << bit
    return value


def make_video(path: Path, frames: int, codec: str, options: dict[str, str], fps: int = 30) -> float:
    """Encode the benchmark video; return the seconds it took."""
    import av
    import numpy as np
    from PIL import Image
    from skimage import data

    start = time.perf_counter()
    photo = Image.fromarray(data.astronaut()).resize((W + 400, H + 400))
    background = np.asarray(photo, dtype=np.uint8)
    tmp = path.with_name(path.stem + ".part" + path.suffix)
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream(codec, rate=fps, options=options)
        stream.width, stream.height = W, H
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            dx, dy = (i // 2) % 400, (i // 7) % 400
            canvas = background[dy : dy + H, dx : dx + W].copy()
            draw_code(canvas, i)
            for packet in stream.encode(av.VideoFrame.from_ndarray(canvas, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return time.perf_counter() - start


X264 = {"preset": "veryfast", "crf": "30"}
VP9 = {"deadline": "realtime", "cpu-used": "8", "crf": "40", "b": "0"}


def videos(cache: Path, vp9: bool) -> dict[str, Path]:
    wanted = {
        "long_h264.mp4": (4500, "libx264", X264),
        "long_h264.mkv": (4500, "libx264", X264),
        "short_h264.mp4": (240, "libx264", X264),
        "short_vp9.webm": (240, "libvpx-vp9", VP9),
    }
    if vp9:
        wanted["long_vp9.webm"] = (4500, "libvpx-vp9", VP9)
    cache.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for name, (frames, codec, options) in wanted.items():
        path = cache / name
        if not path.exists():
            took = make_video(path, frames, codec, options)
            print(f"encoded {name}: {frames} frames in {took:.1f} s", file=sys.stderr)
        out[name] = path
    return out


def keyframes(path: Path) -> list[int]:
    import av

    from vhd.media.keyframes import scan_packets

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return scan_packets(container, stream, 10_000).keyframes


def measure(path: Path, repeats: int) -> dict[str, Any]:
    import numpy as np

    from vhd.media.video import read_frames

    times: dict[str, list[float]] = {"auto": [], "decode": []}
    cpu: dict[str, list[float]] = {"auto": [], "decode": []}
    results: dict[str, Any] = {}
    order = random.Random(0)
    for _ in range(repeats):
        pair = ["auto", "decode"]
        order.shuffle(pair)  # neither always runs first (warm caches, CPU frequency)
        for strategy in pair:
            start, start_cpu = time.perf_counter(), time.process_time()
            frames = read_frames(path, 5, 4000, strategy=strategy)
            times[strategy].append(time.perf_counter() - start)
            cpu[strategy].append(time.process_time() - start_cpu)
            results[strategy] = frames
    plan, ref = results["auto"], results["decode"]
    identical = plan.indices == ref.indices and all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(plan.images, ref.images, strict=True)
    )
    drawn_ok = [read_code(img) for img in plan.images] == plan.indices
    auto_s, decode_s = statistics.median(times["auto"]), statistics.median(times["decode"])
    return {
        "indices": plan.indices,
        "total_frames": plan.total_frames,
        "keyframes_in_window": sum(1 for k in keyframes(path) if k < 4000),
        "plan_method": plan.method,
        "plan_seeks": plan.seeks,
        "plan_frames_decoded": plan.frames_decoded,
        "decode_frames_decoded": ref.frames_decoded,
        "plan_s": round(auto_s, 4),
        "decode_s": round(decode_s, 4),
        "speedup": round(decode_s / auto_s, 2),
        "plan_cpu_s": round(statistics.median(cpu["auto"]), 4),
        "decode_cpu_s": round(statistics.median(cpu["decode"]), 4),
        "identical_frames": identical,
        "drawn_indices_match": drawn_ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vp9", action="store_true", help="also a long VP9 WebM (slow to encode)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/vhd-bench-frames"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import av

    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"PyAV {av.__version__}",
        "videos": {},
    }
    for name, path in videos(args.cache, args.vp9).items():
        row = measure(path, args.repeats)
        report["videos"][name] = row
        print(
            f"{name:16s} plan {row['plan_s'] * 1000:8.1f} ms ({row['plan_method']}, {row['plan_seeks']} seeks, "
            f"{row['plan_frames_decoded']} decoded)  decode {row['decode_s'] * 1000:8.1f} ms "
            f"({row['decode_frames_decoded']} decoded)  x{row['speedup']:.2f} wall, "
            f"x{row['decode_cpu_s'] / row['plan_cpu_s']:.2f} cpu  "
            f"identical={row['identical_frames']} drawn={row['drawn_indices_match']}"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
