"""`vhd bench --detector nudenet` versus a plain loop over NudeNet's own ``detect()`` (issue 5).

Writes N byte-distinct JPEG photos (scikit-image photos resized, recoloured and re-encoded, as
`annotate_throughput.py` makes them) and a labels CSV, then times, alternating the order over
several repeats, each as a child process with start-up, imports and model load included on
both sides:

- plain: ``python -c`` importing nudenet, building ``NudeDetector()`` and calling
  ``detect(path)`` for every file in one process;
- vhd: ``vhd bench --labels labels.csv --detector nudenet --out <fresh folder>`` (labels read,
  every file hashed, predictions cached, metrics with bootstrap intervals, report written).

Target: vhd's wall time at most 1.10x plain's.

Usage: .venv/bin/python benchmarks/bench_nudenet.py [--n 1000] [--repeats 3] [--concurrency 4] [-- EXTRA VHD ARGS]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotate_throughput import make_photos

PLAIN = """
import sys, time
t0 = time.perf_counter()
from nudenet import NudeDetector
detector = NudeDetector()
t1 = time.perf_counter()
paths = open(sys.argv[1]).read().split("\\n")
fired = 0
for path in paths:
    fired += bool(detector.detect(path))
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {fired}")
"""


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # vhd bench exits 1 when a detector failed on a sample
        raise SystemExit(f"{cmd[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("extra", nargs="*", help="extra vhd bench arguments (after --)")
    args = parser.parse_args()
    vhd = str(Path(sys.executable).with_name("vhd"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        media = root / "media"
        make_photos(media, args.n, args.seed)
        paths = sorted(media.glob("*.jpg"))
        (root / "paths.txt").write_text("\n".join(str(p) for p in paths))
        with (root / "labels.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["path", "harmful", "source"])
            for i, p in enumerate(paths):
                w.writerow([f"media/{p.name}", "no", "real" if i % 2 else "synthetic"])
        times: dict[str, list[float]] = {"plain": [], "vhd": []}
        notes: list[str] = []
        for r in range(args.repeats):
            order = ("plain", "vhd") if r % 2 == 0 else ("vhd", "plain")
            for name in order:
                if name == "plain":
                    wall, out = timed([sys.executable, "-c", PLAIN, str(root / "paths.txt")])
                    load, loop, fired = out.split()
                    notes.append(f"plain run {r}: wall {wall:.2f}s, load {load}s, loop {loop}s, {fired} fired")
                else:
                    out_dir = root / f"report_{r}"
                    cmd = [vhd, "bench", "--labels", str(root / "labels.csv"), "--detector", "nudenet"]
                    cmd += ["--out", str(out_dir), "--concurrency", str(args.concurrency), *args.extra]
                    wall, _ = timed(cmd)
                    results = json.loads((out_dir / "results.json").read_text())
                    run = results["detectors"][0]["run"]
                    detect_s = run["computed"] / run["samples_per_s"]
                    notes.append(
                        f"vhd run {r}: wall {wall:.2f}s, detection phase {detect_s:.2f}s "
                        f"({run['computed']} run, {run['failed']} failed), rest {wall - detect_s:.2f}s"
                    )
                times[name].append(wall)
        for line in notes:
            print(line)
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            runs = ", ".join(f"{t:.2f}" for t in v)
            print(f"{k:6s} median {med[k]:.2f}s ({args.n / med[k]:.1f} img/s); runs: {runs}")
        print(f"vhd / plain: {med['vhd'] / med['plain']:.3f} (target: at most 1.10)")


if __name__ == "__main__":
    main()
