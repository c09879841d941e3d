"""Scale and accuracy of `vhd dedup` on 20,000 byte-distinct images with planted near copies.

Data (generated once, cached under ``--cache``, default /tmp/vhd-bench-dedup): base images
made from scikit-image's and scikit-learn's 22 package photos: a 480-800 px wide canvas split
unevenly into four tiles, each a random crop of a random photo (35-80% of its side, optionally
mirrored), with 3-6 random shapes drawn over it, saved as JPEG (quality 85-95). (Single crops
of so few photos overlap: two crops of the same cat's eyes are near duplicates, and would be
counted as false pairs.) Every base gets four copies that pHash should match:

- ``resized``: scaled to 40-80% (JPEG);
- ``reencoded``: JPEG at quality 25-60;
- ``brightness``: brightness x0.75-0.85 or x1.15-1.3 (JPEG);
- ``crop<=5%``: 1-5% (uniform) of the width and of the height cut off, split unevenly between
  the two sides (JPEG); recall is also broken down by the amount cut;

10% of bases also get ``exact`` copies (same pixels, saved as PNG), and a share of bases get
known misses of perceptual hashing: ``crop 15-25%``, ``flip`` (mirrored) and ``rotate 90``.
Totals are chosen to give exactly ``--images`` files (20,000 by default), all byte-distinct.

Measured: wall time of `find_duplicates(files, threshold=10, keep="largest", jobs=2)` (every
file decoded, pixel-hashed and pHashed in 2 worker processes, then linked through the
multi-index hash table), peak RSS of the main process and of a worker, for ``--scales`` subsets
(each in a fresh child process, so peaks do not mix), and on the full set: recall per
alteration (copies clustered with their base), pair precision (pairs of files sharing a
cluster that come from the same base), overall and per alteration, and duplicate precision
(files marked duplicate whose kept file comes from the same base).

Usage: python benchmarks/dedup_scale.py [--images 20000] [--scales 5000,10000,20000] [--jobs 2]
       [--cache DIR] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DETECTABLE = ("resized", "reencoded", "brightness", "crop<=5%")
EXACT = "exact"
MISSES = ("crop 15-25%", "flip", "rotate 90")
_PHOTOS: list[Any] = []


def sources() -> list[Any]:
    """Package photos as RGB arrays (loaded once per process)."""
    if _PHOTOS:
        return _PHOTOS
    import numpy as np
    from skimage import data
    from sklearn.datasets import load_sample_images

    names = [
        "astronaut",
        "camera",
        "coffee",
        "chelsea",
        "rocket",
        "moon",
        "page",
        "text",
        "hubble_deep_field",
        "immunohistochemistry",
        "retina",
        "cat",
        "colorwheel",
        "brick",
        "grass",
        "gravel",
        "coins",
        "clock",
        "stereo_motorcycle",
        "cell",
    ]
    for name in names:
        img = getattr(data, name)()
        if isinstance(img, tuple):
            img = img[0]
        img = np.asarray(img)
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=-1)
        _PHOTOS.append(img[..., :3].astype("uint8"))
    _PHOTOS.extend(np.asarray(i) for i in load_sample_images().images)
    return _PHOTOS


def _crop(rng: random.Random, size: tuple[int, int]) -> Any:
    """A random crop (35-80% of the side) of a random package photo, resized to ``size``."""
    from PIL import Image

    src = rng.choice(sources())
    h, w = src.shape[:2]
    cw = max(32, int(w * rng.uniform(0.35, 0.8)))
    ch = min(h, max(32, int(cw * size[1] / size[0] * rng.uniform(0.8, 1.2))))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    img = Image.fromarray(src[y : y + ch, x : x + cw])
    if rng.random() < 0.5:
        img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return img.resize(size, Image.Resampling.BILINEAR)


def make_base(seed: int) -> Any:
    """A distinct base image: a 2x2 mosaic of photo crops (uneven split) with shapes drawn over."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    width = rng.randint(480, 800)
    height = int(width * rng.uniform(0.6, 0.9))
    sx, sy = int(width * rng.uniform(0.3, 0.7)), int(height * rng.uniform(0.3, 0.7))
    img = Image.new("RGB", (width, height))
    for x0, y0, x1, y1 in ((0, 0, sx, sy), (sx, 0, width, sy), (0, sy, sx, height), (sx, sy, width, height)):
        img.paste(_crop(rng, (x1 - x0, y1 - y0)), (x0, y0))
    draw = ImageDraw.Draw(img, "RGBA")
    for _ in range(rng.randint(3, 6)):
        x0, y0 = rng.randint(0, img.width - 20), rng.randint(0, img.height - 20)
        x1, y1 = x0 + rng.randint(20, img.width // 2), y0 + rng.randint(20, img.height // 2)
        fill = (rng.randint(0, 255), rng.randint(0, 255), rng.randint(0, 255), rng.randint(120, 230))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=fill)
    return img


def alter(img: Any, how: str, rng: random.Random) -> tuple[Any, dict[str, Any]]:
    from PIL import Image, ImageEnhance

    if how == "resized":
        f = rng.uniform(0.4, 0.8)
        return img.resize((max(16, int(img.width * f)), max(16, int(img.height * f))), Image.Resampling.LANCZOS), {}
    if how == "reencoded":
        return img, {"quality": rng.randint(25, 60)}
    if how == "brightness":
        f = rng.choice([rng.uniform(0.75, 0.85), rng.uniform(1.15, 1.3)])
        return ImageEnhance.Brightness(img).enhance(f), {}
    if how in ("crop<=5%", "crop 15-25%"):
        total = rng.uniform(0.01, 0.05) if how == "crop<=5%" else rng.uniform(0.15, 0.25)
        left = rng.uniform(0, total)
        top = rng.uniform(0, total)
        box = (
            int(img.width * left),
            int(img.height * top),
            img.width - int(img.width * (total - left)),
            img.height - int(img.height * (total - top)),
        )
        return img.crop(box), {"cut": round(total, 4)}
    if how == "flip":
        return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT), {}
    if how == "rotate 90":
        return img.transpose(Image.Transpose.ROTATE_90), {}
    raise ValueError(how)


def make_group(args: tuple[str, int, list[str]]) -> list[tuple[str, int, str, float]]:
    """Write one base and its copies; return (file name, group, alteration, fraction cut) rows."""
    from PIL import Image

    folder, group, alterations = args
    rng = random.Random(group * 7919 + 1)
    base = make_base(group)
    rows: list[tuple[str, int, str, float]] = []
    name = f"g{group:05d}_base.jpg"
    base.save(os.path.join(folder, name), quality=rng.randint(85, 95))
    rows.append((name, group, "base", 0.0))
    decoded = Image.open(os.path.join(folder, name)).convert("RGB")
    for k, how in enumerate(alterations):
        if how == EXACT:
            name = f"g{group:05d}_{k}_exact.png"
            decoded.save(os.path.join(folder, name))
            opts: dict[str, Any] = {}
        else:
            img, opts = alter(base, how, rng)
            name = f"g{group:05d}_{k}_{how.replace(' ', '').replace('%', '').replace('<=', 'le')}.jpg"
            img.save(os.path.join(folder, name), quality=opts.get("quality", rng.randint(80, 95)))
        rows.append((name, group, how, float(opts.get("cut", 0.0))))
    return rows


def plan(images: int) -> list[list[str]]:
    """Alterations per base so that the total is exactly ``images``."""
    bases = int(images * 0.17)
    groups = [list(DETECTABLE) for _ in range(bases)]
    for g in range(0, bases, 10):
        groups[g].append(EXACT)
    left = images - sum(1 + len(g) for g in groups)
    i = 0
    while left > 0:
        groups[(i * 7) % bases].append(MISSES[i % len(MISSES)])
        i += 1
        left -= 1
    return groups


def generate(cache: Path, images: int) -> Path:
    folder = cache / f"n{images}"
    truth = folder / "truth.json"
    if truth.exists():
        return folder
    import multiprocessing

    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [(str(folder), g, alts) for g, alts in enumerate(plan(images))]
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 2) as pool:
        rows = [row for chunk in pool.imap(make_group, jobs, chunksize=32) for row in chunk]
    truth.write_text(json.dumps(rows))
    print(f"generated {len(rows)} images in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return folder


def child(folder: Path, count: int, jobs: int) -> dict[str, Any]:
    """Run dedup on the first ``count`` files (in a fresh process) and measure it."""
    from vhd.curate.dedup import find_duplicates

    rows = json.loads((folder / "truth.json").read_text())[:count]
    files = [str(folder / row[0]) for row in rows]
    start = time.perf_counter()
    stages: dict[str, float] = {}

    def progress(done: int, total: int | None, stage: str = "") -> None:  # find_duplicates' progress callback
        stages[stage] = time.perf_counter() - start

    result = find_duplicates(files, threshold=10, keep="largest", jobs=jobs, progress=progress)
    wall = time.perf_counter() - start
    out: dict[str, Any] = {
        "files": count,
        "wall_s": round(wall, 1),
        "hash_s": round(stages.get("hash", 0.0), 1),
        "link_s": round(wall - stages.get("hash", 0.0), 2),
        "rss_main_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_worker_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "unreadable": len(result.unreadable),
    }
    out["accuracy"] = accuracy(rows, {m.fp.path: m.cluster for m in result.members}, folder)
    kept = {m.cluster: m.fp.path for m in result.members if m.kept}
    group_of = {str(folder / r[0]): r[1] for r in rows}
    dropped = [m for m in result.members if not m.kept]
    right = sum(group_of[m.fp.path] == group_of[kept[m.cluster]] for m in dropped)
    out["accuracy"]["duplicate_precision"] = round(right / max(1, len(dropped)), 4)
    out["accuracy"]["duplicates_marked"] = len(dropped)
    return out


def accuracy(rows: list[Any], cluster_of: dict[str, str], folder: Path) -> dict[str, Any]:
    group_of = {str(folder / r[0]): r[1] for r in rows}
    how_of = {str(folder / r[0]): r[2] for r in rows}
    cut_of = {str(folder / r[0]): r[3] for r in rows}
    base_of = {r[1]: str(folder / r[0]) for r in rows if r[2] == "base"}
    found: Counter[str] = Counter()
    planted: Counter[str] = Counter()
    crop_bins: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path, how in how_of.items():
        if how == "base":
            continue
        planted[how] += 1
        hit = cluster_of.get(path) is not None and cluster_of.get(path) == cluster_of.get(base_of[group_of[path]])
        found[how] += hit
        if how == "crop<=5%":
            low = min(4, int(cut_of[path] * 100))
            key = f"{low}-{low + 1}%"
            crop_bins[key][0] += hit
            crop_bins[key][1] += 1
    members: dict[str, list[str]] = defaultdict(list)
    for path, cid in cluster_of.items():
        members[cid].append(path)
    true_pairs = false_pairs = 0
    by_how: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    false_examples: list[list[str]] = []
    for paths in members.values():
        for i, a in enumerate(paths):
            for b in paths[i + 1 :]:
                same = group_of[a] == group_of[b]
                true_pairs += same
                false_pairs += not same
                for p in (a, b):
                    if how_of[p] != "base":
                        by_how[how_of[p]][0 if same else 1] += 1
                if not same and len(false_examples) < 5:
                    false_examples.append([Path(a).name, Path(b).name])
    recall = {how: round(found[how] / planted[how], 4) for how in (*DETECTABLE, EXACT, *MISSES) if planted[how]}
    precision = {how: round(t / (t + f), 4) if t + f else None for how, (t, f) in sorted(by_how.items())}
    detectable = sum(found[h] for h in (*DETECTABLE, EXACT)) / max(1, sum(planted[h] for h in (*DETECTABLE, EXACT)))
    return {
        "planted": dict(planted),
        "recall": recall,
        "recall_detectable": round(detectable, 4),
        "recall_crop_by_cut": {k: round(a / b, 4) for k, (a, b) in sorted(crop_bins.items())},
        "pair_precision": round(true_pairs / max(1, true_pairs + false_pairs), 4),
        "precision_by_alteration": precision,
        "false_pairs": false_pairs,
        "false_pair_examples": false_examples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--scales", default="5000,10000,20000")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/vhd-bench-dedup"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = generate(args.cache, args.images)
    if args.child:
        print(json.dumps(child(folder, args.child, args.jobs)))
        return
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "runs": [],
    }
    for count in (int(s) for s in args.scales.split(",")):
        cmd = [sys.executable, __file__, "--images", str(args.images), "--cache", str(args.cache)]
        cmd += ["--jobs", str(args.jobs), "--child", str(count)]
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        report["runs"].append(out)
        acc = out["accuracy"]
        print(
            f"{count:6d} files: {out['wall_s']:6.1f} s (hashing {out['hash_s']:.1f} s, linking {out['link_s']:.2f} s), "
            f"peak RSS main {out['rss_main_mb']:.0f} MB, worker {out['rss_worker_mb']:.0f} MB; "
            f"pair precision {acc['pair_precision']:.4f}, duplicate precision {acc['duplicate_precision']:.4f}, "
            f"recall on detectable copies {acc['recall_detectable']:.4f}"
        )
    print("recall per alteration (full set):", json.dumps(report["runs"][-1]["accuracy"]["recall"]))
    print("recall of crop<=5% by amount cut:", json.dumps(report["runs"][-1]["accuracy"]["recall_crop_by_cut"]))
    print("precision per alteration (full set):", json.dumps(report["runs"][-1]["accuracy"]["precision_by_alteration"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
