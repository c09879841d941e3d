"""Peak memory of `vhd ingest`, `vhd dedup` and `vhd annotate --dry-run` at 10k and 100k small files.

Data: ``n`` distinct 32 x 32 PNGs of seeded random noise (so no two are near duplicates: a
solid colour would give every file the same pHash), 1,000 per folder, about 3 KB each.

Measured with /usr/bin/time in a fresh process per command (wall seconds, peak RSS):

- ``vhd ingest MEDIA --store S --json`` (first run: every file hashed, validated, upserted);
- the same again (resume: the stat index answers, nothing is decoded);
- ``vhd annotate MEDIA --dry-run --json`` against that store (nothing annotated);
- ``vhd dedup MEDIA --jobs 2 --json`` (every file decoded, pixel-hashed and pHashed in two
  worker processes, then linked). The worker processes' peaks are not in the main figure.

``--dedup-only`` runs only the last one (and keeps the media of ``--workdir`` for the next run).
Each result has wall seconds, peak RSS of the main process, and user + sys CPU seconds (workers
included).

Usage: python benchmarks/curate_scale.py [--scales 10000,100000] [--workdir DIR] [--dedup-only]
       [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotate_scale import timed  # a sibling script


def make_noise(folder: Path, n: int) -> None:
    """``n`` distinct 32 x 32 noise PNGs, 1,000 per subfolder, modified a minute ago."""
    from PIL import Image

    then = time.time() - 60
    for i in range(n):
        sub = folder / f"{i // 1000:04d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"img_{i:07d}.png"
        Image.frombytes("RGB", (32, 32), random.Random(i).randbytes(32 * 32 * 3)).save(path)
        os.utime(path, (then, then))


def one_scale(work: Path, n: int, dedup_only: bool = False) -> dict[str, Any]:
    media, db = work / f"noise_{n}", work / f"curate_{n}.db"
    t0 = time.perf_counter()
    if not (dedup_only and media.is_dir()):
        make_noise(media, n)
    out: dict[str, Any] = {"files": n, "make_s": round(time.perf_counter() - t0, 1)}
    if dedup_only:
        dedup = timed(["dedup", str(media), "--jobs", "2", "--json", "--no-progress"])
        counts = json.loads(dedup.pop("stdout"))
        return {**out, "dedup": dedup, "dedup_counts": counts, "load": os.getloadavg()}
    ingest = ["ingest", str(media), "--store", str(db), "--source", "real", "--json", "--no-progress"]
    first = timed(ingest)
    summary = json.loads(first.pop("stdout"))
    assert summary["added"] == n, summary
    again = timed(ingest)
    assert json.loads(again.pop("stdout"))["unchanged"] == n
    dry = timed(["annotate", str(media), "--model", "scripted:demo", "--store", str(db), "--dry-run", "--json"])
    estimate = json.loads(dry.pop("stdout"))
    assert estimate["estimate"]["samples"] == n, estimate
    dedup = timed(["dedup", str(media), "--jobs", "2", "--json", "--no-progress"])
    counts = json.loads(dedup.pop("stdout"))
    out.update(ingest=first, ingest_again=again, dry_run=dry, dedup=dedup, dedup_counts=counts.get("counts", counts))
    shutil.rmtree(media)
    db.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="10000,100000")
    ap.add_argument("--workdir", type=Path, help="where media and stores go (default: a temporary folder)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--dedup-only", action="store_true", help="time only `vhd dedup` (media kept for reuse)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vhd-curate-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs", "scales": []}
    for n in (int(s) for s in args.scales.split(",")):
        results["scales"].append(one_scale(work, n, args.dedup_only))
        print(json.dumps(results["scales"][-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
