"""What a segmented run spends on hostile videos, and what its dry run says first (issue 44).

Inputs, drawn by `tests.hostile_corpus` into a temporary folder:

- ``strobe.mp4``: 60 s at 25 fps whose colour flips every frame (a hard cut at every frame);
- ``still.mkv``: one still picture for 10 hours (0.5 frames a second, Motion JPEG);
- ``far.mkv``: 10 frames whose timestamps start near 2^52 ticks (the header's duration overflows);
- ``media/clip.mp4``: a 16000 x 16000 16-bit PNG named as a video.

Each case is ``vhd annotate`` with the scripted backend (2 debate rounds, ``--segments``) in its
own process: the dry run first (its call range, video-minutes, peak RSS), then, but for the PNG,
the run itself (its calls and segments). Run it on two checkouts to compare:

    python benchmarks/segment_calls.py --src /tmp/old/src --out before.json
    python benchmarks/segment_calls.py --out after.json

Usage: python benchmarks/segment_calls.py [--src OTHER/src] [--cases strobe,still,...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys
from pathlib import Path
import vhd
from vhd.annotate.options import RunOptions
media, config, store, dry = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "dry"
s = vhd.annotate([media], config=config, store=store, model="scripted:demo", progress=False,
                 options=RunOptions(dry_run=dry))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
e = s.estimate or {}
seg = e.get("segments") or {}
print(json.dumps({
    "rss_mb": round(peak), "calls": s.usage.calls, "segments": s.segments, "unparsed": s.unparsed,
    "skipped": s.skipped, "estimate_calls": [e.get("calls_min"), e.get("calls")],
    "estimate_minutes": seg.get("video_minutes"), "estimate_segments": seg.get("segments"),
}))
"""

CASES = {
    "strobe": ("strobe.mp4", "min_segment_s = 0.0\n"),
    "strobe-cap10": ("strobe.mp4", "min_segment_s = 0.0\nmax_calls_per_video = 10\n"),
    "still": ("still.mkv", ""),
    "far": ("far.mkv", ""),
    "png": ("media", ""),
}


def make_inputs(folder: Path) -> None:
    from tests.hostile_corpus import deep_png, far_timestamps_video, still_video, strobe_video

    strobe_video(folder / "strobe.mp4", seconds=60.0, fps=25, side=64)
    still_video(folder / "still.mkv", seconds=36000.0, fps=0.5)
    far_timestamps_video(folder / "far.mkv")
    (folder / "media").mkdir()
    (folder / "media" / "clip.mp4").write_bytes(deep_png())


def child(src: Path, media: Path, config: Path, store: Path, dry: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    argv = [sys.executable, "-c", CHILD, str(media), str(config), str(store), "dry" if dry else "run"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:300] if done.stderr.strip() else done.returncode}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "s": round(time.perf_counter() - started, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the src/ folder of the checkout to measure")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        make_inputs(folder)
        for name in args.cases.split(","):
            media, table = CASES[name]
            config = folder / f"{name}.toml"
            config.write_text("[debate]\nrounds = 2\n[video]\nsegments = true\n" + table)
            row: dict[str, Any] = {"case": name}
            row["dry"] = child(args.src, folder / media, config, folder / f"{name}-dry.db", True)
            if name != "png":
                row["run"] = child(args.src, folder / media, config, folder / f"{name}.db", False)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        args.out.write_text(json.dumps({"src": str(args.src), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
