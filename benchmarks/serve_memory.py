"""Memory and latency of `vhd serve`'s previews under a burst of large, valid images (issue 22).

Data (built once, cached at ``--data``, default /tmp/vhd-bench-serve-memory): ``--images`` PNGs of
8000x8000 pixels (default 32), each a few flat shapes drawn on a plain background, so the files
are small on disk (about 0.2 MB each) but decode to 256 MB each (Pillow keeps RGB in 4 bytes a
pixel); all are inside the 64-megapixel limit. They are ingested into a store with ``vhd ingest``.

Measured: ``vhd serve`` runs as a subprocess; ``--clients`` threads (default 32) ask for
``--requests`` previews in all (default 128: each image four times), each client a different run
of four images one after the other, as gallery pages opened by several reviewers at once would.
Two rounds: cold (an empty preview cache) and warm (the previews made by the first round).
Reported: the server's peak resident memory (sampled every 20 ms from /proc, and the kernel's
high-water mark VmHWM), its resident memory two seconds after the burst, and the p50/p99/max
latency of each round.

Safety: the server is stopped as soon as its resident memory passes ``--kill-above`` (default
3 GiB), so an unbounded build does not take a shared machine down; the run then reports the
limit it passed rather than a peak.

Usage:
    python benchmarks/serve_memory.py                       # this checkout
    VHD_SRC=/path/to/other/src python benchmarks/serve_memory.py --clients 4 --old
        # another checkout's code (``--old``: a build without --preview-cache/--preview-memory)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = os.environ.get("VHD_SRC") or str(ROOT / "src")
SIDE = 8000


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A field of /proc/<pid>/status in KiB (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def build_images(folder: Path, n: int) -> list[Path]:
    """Draw ``n`` distinct 8000x8000 PNGs (one in memory at a time)."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"big-{i:03d}.png"
        if not path.exists():
            image = Image.new("RGB", (SIDE, SIDE), (240, 240 - 3 * i, 230))
            draw = ImageDraw.Draw(image)
            draw.ellipse([1000 + 50 * i, 1000, 7000, 7000 - 50 * i], fill=(20, 20 + 5 * i, 60))
            draw.rectangle([200, 200 + 100 * i, 3000, 3500], fill=(200, 40, 40 + 4 * i))
            tmp = path.with_suffix(".tmp")
            image.save(tmp, format="PNG", compress_level=6)
            tmp.rename(path)
            del image, draw
        paths.append(path)
    return paths


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vhd(*args: str, **kw: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-m", "vhd", *args], env=env, **kw)


def ingest(images: Path, db: Path) -> list[str]:
    """The samples' ids, after ``vhd ingest`` (reused when the store exists)."""
    import sqlite3

    if not db.exists():
        proc = vhd("ingest", str(images), "--store", str(db), "--no-progress", stdout=subprocess.DEVNULL)
        if proc.wait() != 0:
            sys.exit("vhd ingest failed")
    with sqlite3.connect(db) as conn:
        return [str(r[0]) for r in conn.execute("SELECT id FROM samples ORDER BY path")]


class Watch(threading.Thread):
    """Samples a process's resident memory; stops it past a limit."""

    def __init__(self, pid: int, kill_above_kib: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit = pid, kill_above_kib
        self.peak = 0
        self.killed = False
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            rss = rss_kib(self.pid)
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.killed = True
                os.killpg(self.pid, signal.SIGKILL)
                return
            time.sleep(0.02)


def burst(url: str, ids: list[str], clients: int, requests: int) -> tuple[list[float], int]:
    """``requests`` GETs of ``/thumb/<id>`` from ``clients`` threads; latencies (s) and failures."""
    per = max(1, requests // clients)  # client c asks for images c*per ... c*per + per - 1 (wrapping)
    shares = [[ids[(c * per + k) % len(ids)] for k in range(per)] for c in range(clients)]
    times: list[float] = []
    failures = [0]
    lock = threading.Lock()

    def client(share: list[str]) -> None:
        for sid in share:
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(f"{url}/thumb/{sid}", timeout=600) as r:
                    r.read()
                    ok = r.status == 200
            except Exception:
                ok = False
            with lock:
                times.append(time.perf_counter() - start)
                failures[0] += not ok

    threads = [threading.Thread(target=client, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times, failures[0]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "vhd-bench-serve-memory")
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--kill-above", type=float, default=3.0, metavar="GIB")
    ap.add_argument("--preview-memory", type=int, default=768, metavar="MIB")
    ap.add_argument("--old", action="store_true", help="the checkout has no --preview-cache/--preview-memory")
    args = ap.parse_args()

    images = build_images(args.data / "images", args.images)
    ids = ingest(args.data / "images", args.data / "store.db")[: args.images]
    disk = sum(p.stat().st_size for p in images)
    work = Path(tempfile.mkdtemp(prefix="vhd-serve-mem-"))
    db = work / "store.db"
    shutil.copy(args.data / "store.db", db)  # a fresh copy: no previews kept from an earlier run
    port = free_port()
    extra = [] if args.old else ["--preview-memory", str(args.preview_memory)]
    server = vhd(
        "serve", str(db), "--port", str(port), "--reviewer", "bench", *extra,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {}
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/static/app.css", timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        idle = rss_kib(server.pid)
        watch = Watch(server.pid, int(args.kill_above * 2**20))
        watch.start()
        rounds = {}
        for name in ("cold", "warm"):
            start = time.perf_counter()
            times, failed = burst(url, ids, args.clients, args.requests)
            wall = time.perf_counter() - start
            rounds[name] = {
                "wall_s": round(wall, 2),
                "p50_s": round(statistics.median(times), 3),
                "p99_s": round(quantile(times, 0.99), 3),
                "max_s": round(max(times), 3),
                "failed": failed,
            }
            if watch.killed:
                break
        time.sleep(2.0)
        after = rss_kib(server.pid)
        hwm = rss_kib(server.pid, "VmHWM")
        watch.stop.set()
        result = {
            "machine": f"{platform.node()} · {os.cpu_count()} CPUs · Python {platform.python_version()}",
            "src": SRC,
            "images": f"{len(ids)} PNG of {SIDE}x{SIDE}, {disk / 2**20:.1f} MiB on disk",
            "clients": args.clients,
            "requests": args.requests,
            "preview_memory_mib": None if args.old else args.preview_memory,
            "idle_rss_mib": round(idle / 1024),
            "peak_rss_mib": round(max(watch.peak, hwm) / 1024),
            "killed_above_gib": args.kill_above if watch.killed else None,
            "rss_after_burst_mib": round(after / 1024) if not watch.killed else None,
            "rounds": rounds,
        }
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
