"""`vhd export --format hf`: time and peak memory against the number of samples (streaming check).

For each size N, a store of N drawn 256x256 PNG images annotated by the scripted backend is
exported in a fresh process; the child's peak RSS (``ru_maxrss``) and wall time are reported. The
export streams rows through ``Dataset.from_generator``, so peak memory should stay flat as N grows.

Usage: HF_DATASETS_OFFLINE=1 python benchmarks/hf_export.py [--sizes 200 800] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import resource, sys, time
from vhd.export.hf import export_hf
t = time.perf_counter()
res = export_hf(sys.argv[1], sys.argv[2])
print(res.written, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def build(folder: Path, n: int) -> Path:
    from PIL import Image

    import vhd

    media = folder / "media"
    media.mkdir(parents=True)
    for i in range(n):
        img = Image.new("RGB", (256, 256), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
        img.putpixel((i % 256, (i // 256) % 256), (255, 255, 255))
        img.save(media / f"img_{i:05d}.png")
    store = folder / "s.db"
    vhd.annotate([media], model="scripted:demo", store=store, concurrency=64, progress=False)
    return store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 800])
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store = build(Path(tmp), n)
            t = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(store), str(Path(tmp) / "ds")],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            written, secs, rss_mb = out.stdout.split()
            rows.append(
                {
                    "samples": int(written),
                    "export_s": round(float(secs), 2),
                    "process_s": round(time.perf_counter() - t, 2),
                    "peak_rss_mb": round(float(rss_mb), 1),
                    "dataset_mb": round(sum(f.stat().st_size for f in (Path(tmp) / "ds").rglob("*")) / 2**20, 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    result = {"machine": platform.platform(), "python": platform.python_version(), "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
