"""Gallery queries of the review app (`vhd serve`) on a large store: keyset pages stay fast.

Data (built once, cached at ``--cache``, default /tmp/vhd-bench-serve-v2-<N>.db): ``--samples``
samples (default 1,000,000; 90% real, 10% synthetic from two generators; 1,000 keywords; three
splits) each with one annotation under one configuration (score uniform in [0, 1], harmful when
above 0.8, 2% unparsed, 1% error, categories on harmful ones), a second configuration on 5%
that disagrees with the first on a fifth of those, and 2,000 reviews in the labelled set
``review``. The first configuration is a cascade's: 69.9% of its verdicts decided by stage
``cheap``, 0.1% by stage ``rare``, 30% by ``debate``. The rows are written with bulk
``executemany`` through the store's connection (a fixture, not how vhd writes: one annotation
at a time would take hours here).

Measured: median and worst wall time of `Store.gallery_page` (48 rows) for the first page and a
page 900,000 samples deep, under each filter and order the app offers, plus the progress count
and one full ``GET /`` through the ASGI test client.

Usage: python benchmarks/serve_gallery.py [--samples 1000000] [--cache FILE] [--repeat 5]
(a cache built before the ``decided_by`` column was filled is rebuilt: the default name changed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("VHD_SRC") or str(ROOT / "src"))  # VHD_SRC: time another checkout's code

from vhd.store.gallery import GalleryFilter, QueueEntry  # noqa: E402
from vhd.store.sqlite import Store  # noqa: E402

CATS = ["Violence and Threats", "Substance Misuse", "Explicit and Sexual Content"]


def build(path: Path, n: int) -> None:
    """Write the synthetic store (see the module docstring)."""
    rng = random.Random(0)
    with Store(path) as store:
        run_a = store.start_run({"bench": "a"}, "a" * 64, {"judge": "scripted:demo"}, "p")
        run_b = store.start_run({"bench": "b"}, "b" * 64, {"judge": "scripted:demo"}, "p")
        conn = store.conn
        chunk = 50_000
        for start in range(0, n, chunk):
            samples, anns = [], []
            for i in range(start, min(n, start + chunk)):
                sid = hashlib.sha256(str(i).encode()).hexdigest()
                synthetic = i % 10 == 0
                samples.append(
                    (
                        sid,
                        "image",
                        f"/data/{i // 1000:04d}/{sid[:16]}.jpg",
                        "synthetic" if synthetic else "real",
                        f"keyword {i % 1000}",
                        ("sdxl" if i % 20 == 0 else "animatediff") if synthetic else None,
                        ("train", "val", "test")[i % 3],
                    )
                )
                score = rng.random()
                status = "unparsed" if i % 50 == 1 else ("error" if i % 100 == 2 else "ok")
                harmful = None if status != "ok" else int(score > 0.8)
                cats = json.dumps([CATS[i % 3]] if harmful else [])
                stage = "rare" if i % 1000 == 5 else ("debate" if i % 10 >= 7 else "cheap")
                anns.append((sid, run_a, "a" * 64, status, harmful, cats, score if status == "ok" else None, stage))
                if i % 20 == 3:
                    flip = harmful if i % 100 != 3 or harmful is None else 1 - harmful
                    anns.append((sid, run_b, "b" * 64, "ok", flip if flip is not None else 0, "[]", score, None))
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO samples (id, kind, path, source, keyword, generator, split) VALUES (?, ?, ?, ?, ?, ?, ?)",
                samples,
            )
            conn.executemany(
                "INSERT INTO annotations (sample_id, run_id, config_hash, status, harmful, categories_json, score, "
                "decided_by, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
                anns,
            )
            conn.execute("COMMIT")
        ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(0, n, max(1, n // 2000))][:2000]
        for k, sid in enumerate(ids):
            store.add_review("review", sid, "alice" if k % 2 else "bob", harmful=k % 3 == 0)


def timed(fn: Any, repeat: int) -> tuple[float, float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, max(times) * 1000, out


def main() -> None:
    """Build (or reuse) the store and print the timings as a Markdown table and JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cases", default="", help="only the views whose name matches this regular expression")
    args = ap.parse_args()
    path = args.cache or Path(f"/tmp/vhd-bench-serve-v2-{args.samples}.db")
    if not path.exists():
        t = time.perf_counter()
        build(path, args.samples)
        print(f"built {path} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    deep = hashlib.sha256(str(int(args.samples * 0.9)).encode()).hexdigest()
    base = {"config_hash": "a" * 64, "reviewer": "alice"}
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("no filter", {}, "ingest"),
        ("source=synthetic", {"source": "synthetic"}, "ingest"),
        ("generator=sdxl", {"generator": "sdxl"}, "ingest"),
        ("keyword (0.1%)", {"keyword": "keyword 7"}, "ingest"),
        ("keyword no sample has", {"keyword": "nobody"}, "ingest"),
        ("split=test", {"split": "test"}, "ingest"),
        ("decision=harmful", {"decision": "harmful"}, "ingest"),
        ("decision=not_harmful", {"decision": "not_harmful"}, "ingest"),
        ("decision=none (3%)", {"decision": "none"}, "ingest"),
        ("status=ok", {"status": "ok"}, "ingest"),
        ("status=error (1%)", {"status": "error"}, "ingest"),
        ("status=refused (none)", {"status": "refused"}, "ingest"),
        ("status=missing (none)", {"status": "missing"}, "ingest"),
        ("category", {"category": CATS[1]}, "ingest"),
        ("category no sample has", {"category": "Nobody's Category"}, "ingest"),
        ("decided_by=debate (30%)", {"decided_by": "debate"}, "ingest"),
        ("decided_by=rare (0.1%)", {"decided_by": "rare"}, "ingest"),
        ("decided_by=none (no match)", {"decided_by": "none"}, "ingest"),
        ("score 0.45-0.55", {"score_min": 0.45, "score_max": 0.55}, "ingest"),
        ("score above 2 (none)", {"score_min": 2.0}, "ingest"),
        ("disagreement=configs", {"disagreement": "configs"}, "ingest"),
        ("disagreement=human (no labels)", {"disagreement": "human"}, "ingest"),
        ("disagreement=detector", {"disagreement": "detector"}, "ingest"),
        ("disagreement=reviewers", {"disagreement": "reviewers"}, "ingest"),
        ("review=unreviewed", {"review": "unreviewed"}, "ingest"),
        ("review=mine", {"review": "mine"}, "ingest"),
        ("review=not_mine", {"review": "not_mine"}, "ingest"),
        ("review=labelled", {"review": "labelled"}, "ingest"),
        ("review=unlabelled", {"review": "unlabelled"}, "ingest"),
        ("review=disputed", {"review": "disputed"}, "ingest"),
        ("review=needs_more", {"review": "needs_more"}, "ingest"),
        ("queue only", {"queue_only": True}, "ingest"),
        ("source=real + generator=sdxl (empty)", {"source": "real", "generator": "sdxl"}, "ingest"),
        ("status=error + decision=harmful (empty)", {"status": "error", "decision": "harmful"}, "ingest"),
        ("synthetic + test + harmful", {"source": "synthetic", "split": "test", "decision": "harmful"}, "ingest"),
        ("debate + category + score>0.9", {"decided_by": "debate", "category": CATS[0], "score_min": 0.9}, "ingest"),
        (
            "unreviewed + harmful + keyword",
            {"review": "unreviewed", "decision": "harmful", "keyword": "keyword 3"},
            "ingest",
        ),
        ("configs + category", {"disagreement": "configs", "category": CATS[2]}, "ingest"),
        ("score 0.45-0.55 + synthetic", {"score_min": 0.45, "score_max": 0.55, "source": "synthetic"}, "ingest"),
        ("config b: status=missing (95%)", {"config_hash": "b" * 64, "status": "missing"}, "ingest"),
        ("config b: status=ok + split=val", {"config_hash": "b" * 64, "status": "ok", "split": "val"}, "ingest"),
        ("order=path", {}, "path"),
        ("order=path + category no sample has", {"category": "Nobody's Category"}, "path"),
        ("order=path + status=missing (none)", {"status": "missing"}, "path"),
        ("order=path + decision=harmful", {"decision": "harmful"}, "path"),
        ("order=path + status=error", {"status": "error"}, "path"),
        ("newest verdict of each sample (the app's default view)", {"config_hash": None, "latest": True}, "ingest"),
        ("newest verdict + source=synthetic", {"config_hash": None, "latest": True, "source": "synthetic"}, "ingest"),
        ("newest verdict + decision=harmful", {"config_hash": None, "latest": True, "decision": "harmful"}, "ingest"),
        (
            "newest verdict + decision=not_harmful",
            {"config_hash": None, "latest": True, "decision": "not_harmful"},
            "ingest",
        ),
        (
            "newest verdict + status=missing (none)",
            {"config_hash": None, "latest": True, "status": "missing"},
            "ingest",
        ),
        (
            "newest verdict + category no sample has",
            {"config_hash": None, "latest": True, "category": "Nobody's Category"},
            "ingest",
        ),
        (
            "newest verdict + disagreement=configs",
            {"config_hash": None, "latest": True, "disagreement": "configs"},
            "ingest",
        ),
        ("newest verdict, order=score", {"config_hash": None, "latest": True}, "score"),
        ("newest verdict, order=score + split=test", {"config_hash": None, "latest": True, "split": "test"}, "score"),
        ("newest verdict, order=disagreement", {"config_hash": None, "latest": True}, "disagreement"),
        ("order=score", {}, "score"),
        ("order=score + keyword (0.1%)", {"keyword": "keyword 7"}, "score"),
        ("order=score + split=test", {"split": "test"}, "score"),
        ("order=disagreement", {}, "disagreement"),
        ("order=disagreement + split=test", {"split": "test"}, "disagreement"),
        ("queue (10,000)", {}, "queue"),
        ("queue + category no sample has", {"category": "Nobody's Category"}, "queue"),
    ]
    cases = [c for c in cases if re.search(args.cases, c[0])]
    rows = []
    t = time.perf_counter()
    with Store(path) as store:  # an older store gets its gallery index here (migration 0011_gallery_index)
        opened = time.perf_counter() - t
        queue_ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(0, args.samples, args.samples // 10000)]
        store.load_queue([QueueEntry(sid, k, k % 7 == 0) for k, sid in enumerate(queue_ids, start=1)])
        for name, extra, sort in cases:
            flt = GalleryFilter(**{**base, **extra})
            first = timed(lambda flt=flt, sort=sort: store.gallery_page(flt, sort=sort), args.repeat)
            after = queue_ids[9000] if sort == "queue" else deep
            deep_t = timed(
                lambda flt=flt, sort=sort, after=after: store.gallery_page(flt, sort=sort, after=after),
                args.repeat,
            )
            rows.append((name, first[0], first[1], len(first[2]), deep_t[0], deep_t[1], len(deep_t[2])))
            print(f"{name}: {first[0]:.1f} / {deep_t[0]:.1f} ms", file=sys.stderr, flush=True)
        progress = timed(lambda: store.review_progress("review"), args.repeat)
        stages = timed(lambda: store.gallery_stages("a" * 64), args.repeat)
        histograms = timed(lambda: store.gallery_histograms("a" * 64), args.repeat)
        newest = timed(lambda: store.gallery_histograms(""), args.repeat)  # "": vhd.store.gallery.NEWEST
    from starlette.testclient import TestClient

    from vhd.serve import ServeSettings, create_app

    with TestClient(create_app(ServeSettings(store=path, reviewer="alice")), base_url="http://127.0.0.1") as c:
        page = timed(lambda: c.get("/"), args.repeat)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"store: {args.samples:,} samples, {path.stat().st_size / 2**20:,.0f} MiB; opened in {opened:.1f} s\n")
    print("| view | first page (median / worst) | rows | 900,000 deep (median / worst) | rows |")
    print("|---|---:|---:|---:|---:|")
    for name, m1, w1, n1, m2, w2, n2 in rows:
        print(f"| {name} | {m1:.1f} / {w1:.1f} ms | {n1} | {m2:.1f} / {w2:.1f} ms | {n2} |")
    print(f"\nprogress count: {progress[0]:.0f} ms median; GET / (whole page): {page[0]:.0f} ms median")
    print(f"decided-by choices {stages[2]}: {stages[0]:.1f} ms median")
    print(f"histograms of configuration a (score bins, categories): {histograms[0]:.1f} ms median")
    print(f"histograms of each sample's newest verdict: {newest[0]:.1f} ms median")


if __name__ == "__main__":
    main()
