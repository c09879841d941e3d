"""Throughput of `vhd fetch` on 1,000 URLs from a local server that misbehaves on purpose.

Setup: a URL list of 1,000 files served by tests/collect/media_server.py in its own process on
127.0.0.1 (so the server does not share the fetcher's interpreter):

- 900 good images (byte-distinct JPEGs made from scikit-image photos, 15-130 KB),
- 30 slow but good ones (1 s before the headers),
- 15 answering 404 and 15 answering 500 (retried once),
- 20 oversized (a valid PNG header followed by a 3 MB chunked stream, over a 1 MB limit),
- 10 HTML pages under an image URL (wrong magic bytes),
- 10 truncated (Content-Length larger than the body, then the connection closes),

in shuffled order. `vhd fetch` runs as a child process (the real command, start-up included)
with ``--concurrency 64 --per-host 64`` (every URL is on one host here). Reported per run: wall
time, good files fetched per second (wall clock of the whole command, failures and retries
included) and the rate up to the last good file; then checks that every failure is in the
report with a reason, that exactly the good files are on disk, and that no partial file is left.

Usage: python benchmarks/fetch_throughput.py [--files 1000] [--runs 3] [--concurrency 64] [--out results.json]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIX = {"slow": 30, "404": 15, "500": 15, "oversized": 20, "html": 10, "truncated": 10}


def base_jpegs() -> list[bytes]:
    from PIL import Image
    from skimage import data

    photos = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket(), data.camera(), data.hubble_deep_field()]
    out = []
    for i, arr in enumerate(photos):
        img = Image.fromarray(arr).convert("RGB")
        for side in (160, 320, 512):
            buf = io.BytesIO()
            img.resize((side, round(side * img.height / img.width))).save(buf, "JPEG", quality=70 + 5 * (i % 4))
            out.append(buf.getvalue())
    return out


def small_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), "gray").save(buf, "PNG")
    return buf.getvalue()


def unique_jpeg(base: bytes, n: int) -> bytes:
    """Insert a JPEG comment (COM) segment after the SOI marker: same picture, distinct bytes."""
    text = f"vhd benchmark file {n}".encode()
    return base[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + base[2:]


def build(folder: Path, files: int, seed: int) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Write bodies and the server's routes; return routes and (path, category) in list order."""
    rng = random.Random(seed)
    bases = base_jpegs()
    png = small_png()
    n_bad = sum(MIX.values())
    categories = ["good"] * (files - n_bad) + [c for c, k in MIX.items() for _ in range(k)]
    rng.shuffle(categories)
    routes: dict[str, Any] = {}
    order = []
    (folder / "bodies").mkdir(parents=True)
    for i, category in enumerate(categories):
        path = f"/f/{i:05d}.jpg"
        body = unique_jpeg(bases[i % len(bases)], i)
        body_file = folder / "bodies" / f"{i:05d}.bin"
        route: dict[str, Any] = {}
        if category in ("good", "slow", "truncated"):
            body_file.write_bytes(body)
            route["body_file"] = str(body_file)
        if category == "slow":
            route["delay"] = 1.0
        elif category == "404":
            route.update(status=404, body="not found")
        elif category == "500":
            route.update(status=500, body="server error")
        elif category == "oversized":
            body_file.write_bytes(png)
            route.update(body_file=str(body_file), extra_bytes=3_000_000, chunked=True)
        elif category == "html":
            route.update(body="<!doctype html><html><body>" + "x" * 3000 + "</body></html>")
        elif category == "truncated":
            route["declare_length"] = len(body) + 10_000
        routes[path] = route
        order.append((path, category))
    return routes, order


def start_server(routes_file: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.collect.media_server", str(routes_file)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"media server did not start: {line!r}")
    return proc, int(line.split()[1])


def run_once(listing: Path, out: Path, concurrency: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "vhd", "fetch", str(listing), "--out", str(out)]
    cmd += ["--allow-network", "127.0.0.1/32", "--concurrency", str(concurrency), "--per-host", str(concurrency)]
    cmd += ["--max-image-size", "1MB", "--retries", "1", "--backoff", "0.1", "--no-progress", "--json"]
    start = time.perf_counter()
    started_at = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"vhd fetch failed ({proc.returncode}): {proc.stderr}")
    with open(out / "fetch-report.csv", newline="") as fh:
        report = list(csv.DictReader(fh))
    ok = [r for r in report if r["status"] == "ok"]
    last_ok = max(float(r["fetched_at"]) for r in ok)
    return {"wall_s": wall, "report": report, "ok": len(ok), "to_last_ok_s": last_ok - started_at}


def check(out: Path, report: list[dict[str, str]], order: list[tuple[str, str]], port: int) -> list[str]:
    problems = []
    expected = {f"http://127.0.0.1:{port}{p}": c for p, c in order}
    if len(report) != len(order):
        problems.append(f"report has {len(report)} rows for {len(order)} URLs")
    want = {
        "good": ("ok", ""),
        "slow": ("ok", ""),
        "404": ("failed", "http-404"),
        "500": ("failed", "http-500"),
        "oversized": ("rejected", "too-large"),
        "html": ("rejected", "not-media"),
        "truncated": ("failed", "truncated"),
    }
    for row in report:
        status_error = (row["status"], row["error"])
        if status_error != want[expected[row["url"]]]:
            problems.append(f"{row['url']} ({expected[row['url']]}): got {status_error} {row['reason']}")
        if row["status"] != "ok" and not row["reason"]:
            problems.append(f"{row['url']}: failure without a reason")
    on_disk = [p for p in out.iterdir() if p.suffix == ".jpg"]
    n_good = sum(1 for _, c in order if c in ("good", "slow"))
    if len(on_disk) != n_good:
        problems.append(f"{len(on_disk)} files on disk, expected {n_good}")
    partial = [p for p in out.rglob("*") if p.suffix in (".part", ".tmp") or ".partial" in p.parts]
    if partial:
        problems.append(f"partial files left: {partial[:3]}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="vhd-fetch-bench-") as tmp:
        folder = Path(tmp)
        routes, order = build(folder, args.files, args.seed)
        routes_file = folder / "routes.json"
        routes_file.write_text(json.dumps(routes))
        server, port = start_server(routes_file)
        try:
            listing = folder / "urls.csv"
            listing.write_text("url,keyword\n" + "".join(f"http://127.0.0.1:{port}{p},bench\n" for p, _ in order))
            n_good = sum(1 for _, c in order if c in ("good", "slow"))
            runs = []
            for i in range(args.runs):
                out = folder / f"out{i}"
                result = run_once(listing, out, args.concurrency)
                problems = check(out, result.pop("report"), order, port)
                result["good_per_s"] = result["ok"] / result["wall_s"]
                result["good_per_s_to_last_ok"] = result["ok"] / result["to_last_ok_s"]
                result["problems"] = problems
                runs.append(result)
                print(
                    f"run {i + 1}: {result['ok']}/{n_good} good files in {result['wall_s']:.2f} s wall "
                    f"= {result['good_per_s']:.0f} files/s ({result['good_per_s_to_last_ok']:.0f}/s up to the last "
                    f"good file); checks: {'all passed' if not problems else '; '.join(problems[:5])}"
                )
        finally:
            server.kill()
            server.wait()
    summary = {
        "files": args.files,
        "mix": {"good": args.files - sum(MIX.values()), **MIX},
        "concurrency": args.concurrency,
        "median_good_per_s": statistics.median(r["good_per_s"] for r in runs),
        "median_wall_s": statistics.median(r["wall_s"] for r in runs),
        "all_checks_passed": all(not r["problems"] for r in runs),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "runs": runs,
    }
    print(
        f"median: {summary['median_good_per_s']:.0f} good files/s, {summary['median_wall_s']:.2f} s wall "
        f"({args.files} URLs, {os.cpu_count()} CPUs); checks {'passed' if summary['all_checks_passed'] else 'FAILED'}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
