"""Peak memory of `vhd bench`, `vhd frames`, `vhd categorize` and `vhd generate` at two or three sizes.

Every part runs offline. Each command runs as its own process under ``/usr/bin/time`` (peak RSS
of the whole process, start-up and imports included); the figure that matters is the growth
between sizes, divided by the samples added (bytes per sample):

- ``bench``: N byte-distinct 16 x 16 PNGs (`annotate_scale.make_media`) with a labels CSV (every
  third harmful, with a category; source and split alternate), judged by ``vlm:scripted:demo``
  (the scripted backend behind the vision-language-model detector); ``--bootstrap 0 --no-plots``
. The same command again
  (everything from the prediction cache) is the second figure.
- ``frames``: N tiny videos (4 frames of 16 x 16, MPEG-4 in MP4, drawn by PyAV, byte-distinct),
  ``vhd frames DIR --out OUT --n 2``, then the same again (resume: every video skipped).
- ``categorize``: a store of N harmful annotations with reasons written by SQL (as
  `annotate_scale.million_store`), then ``vhd categorize --method embed`` (the packaged
  all-MiniLM-L6-v2, offline), then the same again (nothing to do).
- ``generate``: the tiny random Stable Diffusion pipeline of ``tests/tiny_pipelines.py`` on the
  CPU, in this process under tracemalloc (generation is slow, so sizes are small): the Python
  heap kept after N prompts and its peak during them, from a warm start; per-prompt growth
  between the last two sizes.

Usage: python benchmarks/memory_scale.py [--parts bench,frames,categorize,generate] [--src OTHER/src]
       [--bench 1000,10000] [--bootstrap 1000] [--frames 300,3000] [--categorize 1000,5000]
       [--generate 8,32] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
"""The vhd source measured (``--src``: another checkout's, for a before/after comparison)."""
sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotate_scale import make_media, million_store  # noqa: E402 (a sibling script)


def _user_sys(args: list[str]) -> dict[str, Any]:
    """`timed`, plus user and system CPU seconds (from a second /usr/bin/time format)."""
    import re

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = ["/usr/bin/time", "-f", "VHDTIME %e %M %U %S", sys.executable, "-m", "vhd", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    match = re.search(r"VHDTIME ([\d.]+) (\d+) ([\d.]+) ([\d.]+)", proc.stderr)
    if match is None or proc.returncode not in (0, 1):
        raise SystemExit(f"{args[:2]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {
        "wall_s": float(match[1]),
        "peak_rss_mb": round(int(match[2]) / 1024, 1),
        "user_s": float(match[3]),
        "sys_s": float(match[4]),
        "code": proc.returncode,
        "stdout": proc.stdout,
    }


def growth(rows: list[dict[str, Any]], key: str, count: str) -> float | None:
    """Bytes per sample of the peak-RSS growth from the smallest size to the largest."""
    if len(rows) < 2:
        return None
    a, b = rows[0], rows[-1]
    return round((b[key]["peak_rss_mb"] - a[key]["peak_rss_mb"]) * 1024 * 1024 / (b[count] - a[count]), 1)


# --- bench ---------------------------------------------------------------------------------------


def bench_scale(work: Path, n: int, bootstrap: int = 0) -> dict[str, Any]:
    media = work / f"bench_media_{n}"
    make_media(media, n)
    labels = media / "labels.csv"
    with labels.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful", "categories", "source", "split"])
        for i in range(n):
            harmful = i % 3 == 0
            w.writerow(
                [
                    f"{i // 1000:04d}/img_{i:07d}.png",
                    "yes" if harmful else "no",
                    "C" if harmful else "",
                    "real" if i % 2 else "synthetic",
                    "cal" if i % 5 == 0 else "test",
                ]
            )
    out = work / f"bench_out_{n}"
    cmd = ["bench", "--labels", str(labels), "--detector", "vlm:scripted:demo", "--out", str(out)]
    cmd += ["--bootstrap", str(bootstrap), "--no-plots", "--no-progress", "--concurrency", "16"]
    first = _user_sys(cmd)
    first.pop("stdout")
    again = _user_sys(cmd)
    again.pop("stdout")
    results = json.loads((out / "results.json").read_text())
    answered = results["detectors"][0]["coverage"]["answered"]
    subprocess.run(["rm", "-rf", str(media), str(out)], check=True)
    return {"samples": n, "bootstrap": bootstrap, "first": first, "cached": again, "answered": answered}


# --- frames --------------------------------------------------------------------------------------


def make_videos(folder: Path, n: int) -> None:
    """``n`` byte-distinct 4-frame 16 x 16 MP4 files, 500 per subfolder."""
    import av
    import numpy as np

    then = time.time() - 60
    for i in range(n):
        sub = folder / f"{i // 500:04d}"
        if i % 500 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"clip_{i:06d}.mp4"
        with av.open(str(path), "w") as box:
            stream = box.add_stream("mpeg4", rate=4)
            stream.width = stream.height = 16
            stream.pix_fmt = "yuv420p"
            for k in range(4):
                pixels = np.full((16, 16, 3), ((i >> 8) & 255, i & 255, 60 * k), dtype=np.uint8)
                for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                    box.mux(packet)
            for packet in stream.encode():
                box.mux(packet)
        os.utime(path, (then, then))


def frames_scale(work: Path, n: int) -> dict[str, Any]:
    media, out = work / f"videos_{n}", work / f"frames_{n}"
    t0 = time.perf_counter()
    make_videos(media, n)
    made = time.perf_counter() - t0
    cmd = ["frames", str(media), "--out", str(out), "--n", "2", "--no-progress"]
    first = _user_sys(cmd)
    summary = first.pop("stdout").splitlines()[0]
    assert summary.startswith(f"{n} video(s) written"), summary
    again = _user_sys(cmd)
    summary = again.pop("stdout").splitlines()[0]
    assert f"{n} already done" in summary, summary
    subprocess.run(["rm", "-rf", str(media), str(out)], check=True)
    return {"videos": n, "make_s": round(made, 1), "first": first, "again": again}


# --- categorize ----------------------------------------------------------------------------------

REASONS = (
    "a person is attacked with a knife and bleeding",
    "a crowd burns a flag during a violent riot",
    "explicit nudity of an adult in a bedroom",
    "a syringe and powder suggest drug use",
    "a man holds a rifle pointed at the viewer",
    "graffiti with a hateful slogan against a minority",
    "a self-harm scene with cuts on an arm",
    "a car crash with injured people on the road",
)


def categorize_scale(work: Path, n: int) -> dict[str, Any]:
    db = work / f"categorize_{n}.db"
    million_store(db, n, reasons=REASONS, src=SRC)
    cmd = ["categorize", "--store", str(db), "--method", "embed", "--json"]
    first = _user_sys(cmd)
    done = json.loads(first.pop("stdout"))
    assert done["categorized"] == n, done
    again = _user_sys(cmd)
    assert json.loads(again.pop("stdout"))["already_done"] == n
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return {"samples": n, "first": first, "again": again, "counts": done["counts"]}


# --- generate ------------------------------------------------------------------------------------


def generate_child(sizes: list[int]) -> None:
    """In this process: the Python heap kept after N prompts of the tiny SD pipeline (tracemalloc)."""
    import gc
    import tracemalloc

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(SRC))
    import torch
    from tests.tiny_pipelines import build_sd

    from vhd.store.sqlite import Store
    from vhd.synth.generate import generate
    from vhd.synth.generators import GenerateSettings, create_generator

    torch.set_num_threads(1)
    out: dict[str, Any] = {"sizes": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pipe = build_sd(work / "sd")
        settings = GenerateSettings(device="cpu", size=(32, 32), steps=2, watermark=False)
        gen = create_generator(f"sd:{pipe}", settings)
        warm = work / "warm.csv"
        warm.write_text("prompt\nwarm up\n")
        generate(warm, gen, work / "warm")  # loads the pipeline once
        for n in sizes:
            prompts = work / f"p{n}.csv"
            prompts.write_text("prompt\n" + "".join(f"scene number {i} of a street at night\n" for i in range(n)))
            with Store(work / f"g{n}.db") as store:
                gc.collect()
                tracemalloc.start()
                base = tracemalloc.get_traced_memory()[0]
                start = time.perf_counter()
                result = generate(prompts, gen, work / f"out{n}", store=store)
                wall = time.perf_counter() - start
                gc.collect()
                kept = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            assert len(result.written) == n, result.to_dict()
            out["sizes"].append(
                {"prompts": n, "kept_bytes": kept[0] - base, "peak_bytes": kept[1] - base, "wall_s": wall}
            )
            del result
    print("RESULT " + json.dumps(out), flush=True)


def generate_sizes(sizes: list[int]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, __file__, "--src", str(SRC), "--generate-child"]
    proc = subprocess.run([*cmd, ",".join(map(str, sizes))], capture_output=True, text=True, env=env, cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"generate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(line[7:])
    rows = data["sizes"]
    if len(rows) >= 2:  # the last two sizes: the first run of a process fills caches once
        a, b = rows[-2], rows[-1]
        for key in ("kept", "peak"):
            data[f"{key}_bytes_per_prompt"] = round(
                (b[f"{key}_bytes"] - a[f"{key}_bytes"]) / (b["prompts"] - a["prompts"]), 1
            )
    return data


def main() -> None:
    global SRC
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="bench,frames,categorize,generate")
    ap.add_argument("--bench", default="1000,10000")
    ap.add_argument("--bootstrap", type=int, default=0, help="bench: bootstrap resamples (vhd bench's default is 1000)")
    ap.add_argument("--src", type=Path, default=SRC, help="the vhd source folder to measure (default: this checkout's)")
    ap.add_argument("--frames", default="300,3000")
    ap.add_argument("--categorize", default="1000,5000")
    ap.add_argument("--generate", default="8,32")
    ap.add_argument("--generate-child", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", type=Path, help="where media and stores go (default: a temporary folder)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args()
    SRC = args.src.resolve()
    if args.generate_child:
        generate_child([int(x) for x in args.generate_child.split(",")])
        return
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_at_start": os.getloadavg(),
        "src": str(SRC),
    }
    parts = set(args.parts.split(","))
    random.seed(0)
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="vhd-memory-") as tmp:
        work = Path(tmp)
        plan = (
            ("bench", args.bench, lambda w, n: bench_scale(w, n, args.bootstrap), ("first", "cached"), "samples"),
            ("frames", args.frames, frames_scale, ("first", "again"), "videos"),
            ("categorize", args.categorize, categorize_scale, ("first", "again"), "samples"),
        )
        for name, sizes, fn, keys, count in plan:
            if name not in parts:
                continue
            rows = []
            for n in (int(x) for x in sizes.split(",") if x):
                rows.append(fn(work, n))
                print(name, json.dumps(rows[-1]), flush=True)
            results[name] = {"sizes": rows, **{f"{k}_bytes_per_sample": growth(rows, k, count) for k in keys}}
            print(name, {k: results[name][f"{k}_bytes_per_sample"] for k in keys}, flush=True)
        if "generate" in parts:
            results["generate"] = generate_sizes([int(x) for x in args.generate.split(",")])
            print("generate", json.dumps(results["generate"]), flush=True)
    results["load_at_end"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
