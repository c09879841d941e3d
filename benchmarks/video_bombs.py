"""Peak memory of the commands that decode media, fed video and animation bombs.

The bombs are a few kilobytes that decode to gigabytes (`tests/hostile_corpus.py`):

- ``h264_8192.mp4``: 3 flat frames of 8192 x 8192, H.264 (about 200 kB);
- ``vp9_8192.webm``: 3 flat frames of 8192 x 8192, VP9 (about 25 kB; slow to encode: about
  20 s and 4.6 GB on a 2-core machine, made once into ``--cache``);
- ``anim_7000.gif`` / ``.png`` / ``.webp``: 7000 x 7000 animations of 30 frames of 16 x 16
  tiles (5 to 50 kB);
- ``tiny.mp4``: 12 frames of 64 x 64, H.264: the baseline (start-up and imports).

Each (command, file) runs as its own process (``python -c`` calling `vhd.cli.main.main`, its
``ru_maxrss`` read at the end: the peak RSS of the whole process, start-up and imports
included): ``ingest`` into a fresh store, ``frames``, ``annotate`` with the scripted backend and
``dedup``; ``ingest --jobs 4`` reads four byte-distinct copies of the H.264 bomb at once. The
outcome column says whether the file was refused (``refused``) or decoded (``decoded``).

Run it on two checkouts to compare, with the same bombs:

    python benchmarks/video_bombs.py --src /tmp/old/src --out before.json
    python benchmarks/video_bombs.py --out after.json

Usage: python benchmarks/video_bombs.py [--src OTHER/src] [--cache DIR] [--commands ingest,frames,...]
       [--files h264_8192.mp4,...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMMANDS = ("ingest", "frames", "annotate", "dedup", "ingest-jobs4")

CHILD = r"""
import json, resource, sys, io, contextlib
from vhd.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(json.loads(sys.argv[1]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"rc": rc, "rss_mb": peak, "out": out.getvalue()}))
"""


def make_bombs(cache: Path) -> dict[str, Path]:
    """The bombs, written once into ``cache`` (each encoder in a child process)."""
    from tests.hostile_corpus import animated_bomb, video_bomb, write_video_bomb

    cache.mkdir(parents=True, exist_ok=True)
    files = {
        "tiny.mp4": cache / "tiny.mp4",
        "h264_8192.mp4": cache / "h264_8192.mp4",
        "vp9_8192.webm": cache / "vp9_8192.webm",
        "anim_7000.gif": cache / "anim_7000.gif",
        "anim_7000.png": cache / "anim_7000.png",
        "anim_7000.webp": cache / "anim_7000.webp",
    }
    if not files["tiny.mp4"].exists():
        files["tiny.mp4"].write_bytes(video_bomb("libx264", "mp4", 64, frames=12))
    for name, encoder, fmt in (("h264_8192.mp4", "libx264", "mp4"), ("vp9_8192.webm", "libvpx-vp9", "webm")):
        if not files[name].exists():
            started = time.perf_counter()
            write_video_bomb(files[name], encoder, fmt, frames=3)
            print(f"made {name} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    for fmt in ("GIF", "PNG", "WEBP"):
        path = files[f"anim_7000.{fmt.lower()}"]
        if not path.exists():
            path.write_bytes(animated_bomb(fmt))
    return files


def _args(command: str, path: Path, work: Path) -> tuple[list[str], Path]:
    """The CLI arguments of one case, and the input it reads (a folder of copies for ``ingest-jobs4``)."""
    folder = work / "in"
    folder.mkdir()
    if command == "ingest-jobs4":
        data = path.read_bytes()
        for k in range(4):  # byte-distinct: a trailing MP4 `free` box (or padding) of its own
            tail = struct.pack(">I4s", 16, b"free") + k.to_bytes(8, "big")
            (folder / f"copy{k}{path.suffix}").write_bytes(data + tail)
        return ["ingest", str(folder), "--store", str(work / "s.db"), "--jobs", "4", "--json", "--no-progress"], folder
    target = folder / path.name
    shutil.copy(path, target)
    if command == "ingest":
        return ["ingest", str(folder), "--store", str(work / "s.db"), "--jobs", "1", "--json", "--no-progress"], folder
    if command == "frames":
        return ["frames", str(folder), "--out", str(work / "frames"), "--json", "--no-progress"], folder
    if command == "annotate":
        store = str(work / "a.db")
        return [
            "annotate",
            str(folder),
            "--model",
            "scripted:demo",
            "--store",
            store,
            "--json",
            "--no-progress",
        ], folder
    if command == "dedup":
        return ["dedup", str(folder), "--jobs", "1", "--json", "--no-progress"], folder
    raise ValueError(command)


def _outcome(command: str, out: str) -> str:
    """``refused`` (with the reason's first words) or ``decoded``, from the command's JSON summary."""
    try:
        data: Any = json.loads(out)
    except json.JSONDecodeError:
        return "?"
    text = json.dumps(data)
    if "over the frame limit" in text:
        return "refused (frame limit)"
    if "over the limit" in text or "decompression bomb" in text:
        return "refused (pixel limit)"
    if command.startswith("ingest"):
        return "decoded" if data["counts"].get("added") else "refused (other)"
    if command == "frames":
        return "decoded" if all(v["status"] != "failed" for v in data) else "failed (other)"
    if command == "annotate":
        return "decoded" if data.get("annotated") else "refused (other)"
    return "decoded" if data.get("files") else "refused (listed unreadable, reason in the text output)"


def run_case(src: Path, command: str, path: Path) -> dict[str, Any]:
    if command == "frames" and path.suffix in (".gif", ".png", ".webp"):
        return {}  # `vhd frames` reads videos only
    if command == "ingest-jobs4" and path.name != "h264_8192.mp4":
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        args, _ = _args(command, path, work)
        env = {**os.environ, "PYTHONPATH": str(src), "VHD_NO_USER_CONFIG": "1"}
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(args)], env=env, capture_output=True, text=True, timeout=1800
        )
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"command": command, "file": path.name, "error": done.stderr.strip().splitlines()[-1:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "command": command,
        "file": path.name,
        "peak_rss_mb": round(result["rss_mb"]),
        "seconds": round(seconds, 1),
        "outcome": _outcome(command, result["out"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the vhd source measured (another checkout's)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vhd-video-bombs")
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--files", default="", help="bomb names (default: all)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    files = make_bombs(args.cache)
    chosen = [files[name] for name in args.files.split(",")] if args.files else list(files.values())
    rows = []
    for command in args.commands.split(","):
        for path in chosen:
            row = run_case(args.src.resolve(), command, path)
            if row:
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    cpu = platform.processor() or platform.machine()
    machine = f"{platform.node()}: {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"
    print(f"src: {args.src}; {machine}")
    print("| command | file | peak RSS (MB) | seconds | outcome |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        outcome = r.get("outcome", r.get("error"))
        print(f"| {r['command']} | {r['file']} | {r.get('peak_rss_mb', '-')} | {r.get('seconds', '-')} | {outcome} |")
    if args.out:
        args.out.write_text(json.dumps({"src": str(args.src), "machine": machine, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
