"""Peak memory of ``vhd annotate --segments`` on large frames, and on a frame that grows midway (issue 44).

Two inputs, written once into ``--cache`` (each in a child process, so its encoder's memory is not
counted):

- ``8k.avi``: 40 flat frames of 7680 x 4320 (8K UHD, exactly the default frame limit) in Motion
  JPEG, no cut: one segment that holds its kept frames while it streams by;
- ``grow.avi``: a Motion JPEG AVI whose header says 64 x 64 and whose third frame is a flat
  12000 x 12000 JPEG (`tests.hostile_corpus.growing_video`), over the frame limit.

Each case runs ``vhd annotate`` (scripted backend, a fresh store) in its own process and reads its
``ru_maxrss`` at the end (the whole process: start-up and imports included). ``8k`` runs with
``[video] segments = true``, ``max_segment_s = 1000`` and ``frames_per_segment`` of 1, 3 and 8;
``grow`` with segments on and off (the whole-video reader). Run it on two checkouts to compare:

    python benchmarks/segment_memory.py --src /tmp/old/src --out before.json
    python benchmarks/segment_memory.py --out after.json

Usage: python benchmarks/segment_memory.py [--src OTHER/src] [--cache DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, io, contextlib
from vhd.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(json.loads(sys.argv[1]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"rc": rc, "rss_mb": peak, "out": out.getvalue()}))
"""

MAKE_8K = r"""
import sys, av
with av.open(sys.argv[1], "w", format="avi") as out:
    stream = out.add_stream("mjpeg", rate=10)
    stream.width, stream.height, stream.pix_fmt = 7680, 4320, "yuvj420p"
    frame = av.VideoFrame(7680, 4320, "yuvj420p")
    for plane, value in zip(frame.planes, (90, 110, 150)):
        plane.update(bytes([value]) * plane.buffer_size)
    for i in range(40):
        frame.pts = i
        for packet in stream.encode(frame):
            out.mux(packet)
    for packet in stream.encode():
        out.mux(packet)
"""

MAKE_GROW = r"""
import sys
from pathlib import Path
from tests.hostile_corpus import growing_video
growing_video(Path(sys.argv[1]), (64, 64, 12000, 64))
"""


def make_inputs(cache: Path) -> dict[str, Path]:
    """The two videos, written once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    made = {}
    for name, code in (("8k.avi", MAKE_8K), ("grow.avi", MAKE_GROW)):
        path = cache / name
        if not path.exists():
            subprocess.run([sys.executable, "-c", code, str(path)], check=True, cwd=ROOT)
        made[name] = path
    return made


def run_case(src: Path, video: Path, video_table: str, work: Path) -> dict[str, Any]:
    """One ``vhd annotate`` in its own process; its exit code, peak RSS and wall time."""
    config = work / "c.toml"
    config.write_text("[debate]\nrounds = 1\n[video]\n" + video_table)
    store = work / f"{time.monotonic_ns()}.db"
    argv = ["annotate", str(video), "--model", "scripted:demo", "--store", str(store), "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([*argv, "--no-progress"])],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0 and not done.stdout.strip():
        return {"rc": done.returncode, "rss_mb": None, "s": wall, "error": done.stderr[-400:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out = result.pop("out")
    result["s"] = round(wall, 1)
    result["rss_mb"] = round(result["rss_mb"])
    result["outcome"] = next((line for line in out.splitlines() if line.startswith("skipped ")), out.splitlines()[0])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the src/ folder of the checkout to measure")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vhd-segment-memory")
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    videos = make_inputs(args.cache)
    cases = [
        *(
            ("8k.avi", f"frames={f}", f"segments = true\nmax_segment_s = 1000.0\nframes_per_segment = {f}\n")
            for f in (1, 3, 8)
        ),
        ("grow.avi", "segments", "segments = true\n"),
        ("grow.avi", "whole video", "segments = false\n"),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, label, table in cases:
            row = {"file": name, "case": label, **run_case(args.src, videos[name], table, Path(work))}
            print(json.dumps(row), flush=True)
            rows.append(row)
    report = {"python": platform.python_version(), "src": str(args.src), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
