"""Throughput and client cost of `vhd annotate` against a local OpenAI-compatible server.

Setup: a few hundred byte-distinct photos (scikit-image's sample photos, each randomly resized
to 640-1400 px, recoloured and re-encoded as JPEG at a random quality), a Chat Completions server
on 127.0.0.1 (tests/servers/chat_server.py, in this process) that waits 100 ms before every
answer, and two clients run as child processes with ``--concurrency 64``:

- ``vhd annotate`` (the real command: validation, store, retries, progress off), and
- the leanest client (benchmarks/lean_client.py: encode once, five sequential SDK calls).

Each runs without and with 14 in-context images. Reported per configuration: samples/s (wall time
of the child, start-up included), client CPU per sample (user + sys of the child, start-up
included), requests, images and request bytes per sample (counted by the server), and the
child's peak RSS.

vhd's sources are byte-compiled before the first run (``compileall``; the files go to the
ignored ``__pycache__`` folders), so a child's start-up is an installed package's: with
``PYTHONDONTWRITEBYTECODE`` set and no bytecode, every run compiled vhd's modules again (about
0.2 s of CPU, 0.7 ms a sample at 300 samples), which no installed vhd does.

Usage: python benchmarks/annotate_throughput.py [--samples 300] [--latency 0.1] [--out results.json]
       python benchmarks/annotate_throughput.py --configs vhd --repeats 5   # the vhd client alone
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.servers.chat_server import ChatServer  # noqa: E402


def make_photos(folder: Path, n: int, seed: int) -> None:
    import numpy as np
    from PIL import Image
    from skimage import data

    rng = random.Random(seed)
    sources = [
        data.astronaut(),
        data.coffee(),
        data.chelsea(),
        data.rocket(),
        data.hubble_deep_field(),
        data.immunohistochemistry(),
    ]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        base = Image.fromarray(sources[i % len(sources)])
        side = rng.randint(640, 1400)
        im = base.resize((side, int(side * base.height / base.width)))
        arr = np.asarray(im, dtype=np.float32) * np.array([rng.uniform(0.7, 1.3) for _ in range(3)], dtype=np.float32)
        im = Image.fromarray(arr.clip(0, 255).astype("uint8"))
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=rng.randint(80, 95))
        (folder / f"photo_{i:04d}.jpg").write_bytes(buf.getvalue())


def reply(body: dict[str, Any]) -> str:
    if body.get("max_tokens") == 100:
        return "No, an everyday scene."
    return "1. The scene is ordinary.\n2. Nothing dangerous is shown.\n3. No one is at risk."


# Children are started by this small launcher, itself started before the harness imports or
# allocates anything: Linux carries a parent's peak RSS into a forked child's ru_maxrss, so
# forking the clients from the (large) harness would inflate their reported peak memory.
LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    cmd = json.loads(line)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode()
    _, status, ru = os.wait4(proc.pid, 0)
    out = {"wall_s": time.perf_counter() - start, "cpu_s": ru.ru_utime + ru.ru_stime,
           "peak_rss_mb": ru.ru_maxrss / 1024, "code": os.waitstatus_to_exitcode(status), "err": err[-2000:]}
    print(json.dumps(out), flush=True)
"""


def precompile() -> None:
    """Byte-compile the vhd package the children will import (as pip does when it installs it)."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("vhd")
    if spec is not None and spec.origin:
        compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)


class Launcher:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )

    def run(self, cmd: list[str], srv: ChatServer) -> dict[str, float]:
        assert self.proc.stdin and self.proc.stdout
        srv.reset()
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        r = json.loads(self.proc.stdout.readline())
        if r["code"] != 0:
            raise SystemExit(f"{cmd[:3]} failed: {r['err']}")
        return {**r, "requests": srv.chat_requests, "images": srv.images_received, "bytes": srv.bytes_received}

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration; the median is reported")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--configs",
        default="lean,vhd,lean+icl,vhd+icl",
        help="comma-separated configurations to run (default: all four)",
    )
    args = ap.parse_args()
    wanted = set(args.configs.split(","))
    launcher = Launcher()
    precompile()
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "samples": args.samples,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "runs": {},
    }
    with tempfile.TemporaryDirectory() as tmp, ChatServer(reply=reply, latency=args.latency, record=False) as srv:
        t = Path(tmp)
        make_photos(t / "photos", args.samples, seed=1)
        make_photos(t / "icl", 14, seed=2)
        (t / "icl" / "examples.csv").write_text(
            "path,answer\n" + "".join(f'photo_{i:04d}.jpg,"No, lack of direct message."\n' for i in range(14))
        )
        (t / "vhd.toml").write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
        vhd_cmd = [
            sys.executable,
            "-m",
            "vhd",
            "annotate",
            str(t / "photos"),
            "--model",
            "openai:m",
            "--config",
            str(t / "vhd.toml"),
            "--concurrency",
            str(args.concurrency),
            "--no-progress",
        ]
        lean_cmd = [
            sys.executable,
            str(ROOT / "benchmarks" / "lean_client.py"),
            srv.base_url,
            str(t / "photos"),
            "--concurrency",
            str(args.concurrency),
        ]
        for icl in (False, True):
            suffix = "+icl" if icl else ""
            lean = lean_cmd + (["--icl", str(t / "icl")] if icl else [])
            vhd = vhd_cmd + ["--store", str(t / f"run{suffix}.db")] + (["--icl", str(t / "icl")] if icl else [])
            for name, cmd in ((f"lean{suffix}", lean), (f"vhd{suffix}", vhd)):
                if name not in wanted:
                    continue
                n = args.samples
                trials = []
                for _ in range(args.repeats):
                    if name.startswith("vhd"):
                        Path(cmd[cmd.index("--store") + 1]).unlink(missing_ok=True)
                        for side in ("-wal", "-shm"):
                            Path(cmd[cmd.index("--store") + 1] + side).unlink(missing_ok=True)
                    r = launcher.run(cmd, srv)
                    trials.append(
                        {
                            "samples_per_s": n / r["wall_s"],
                            "client_cpu_ms_per_sample": 1000 * r["cpu_s"] / n,
                            "requests_per_sample": r["requests"] / n,
                            "images_per_sample": r["images"] / n,
                            "kb_sent_per_sample": r["bytes"] / n / 1024,
                            "peak_rss_mb": r["peak_rss_mb"],
                        }
                    )
                results["runs"][name] = {key: statistics.median(t[key] for t in trials) for key in trials[0]}
                results["runs"][name]["trials"] = trials
                shown = {k: round(v, 2) for k, v in results["runs"][name].items() if k != "trials"}
                print(name, json.dumps(shown), flush=True)
    launcher.close()
    for suffix in ("", "+icl"):
        if not {f"vhd{suffix}", f"lean{suffix}"} <= set(results["runs"]):
            continue
        ratio = results["runs"][f"vhd{suffix}"]["samples_per_s"] / results["runs"][f"lean{suffix}"]["samples_per_s"]
        results[f"throughput_ratio{suffix or ''}"] = ratio
        print(f"vhd/lean samples/s{suffix}: {ratio:.2f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
