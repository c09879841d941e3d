"""One machine at scale: `vhd annotate`, its resume, and `vhd export` at 1k, 10k, 100k samples.

Each scale gets its own folder of small byte-distinct PNGs drawn by this script (16 x 16 pixels,
one colour each, 1,000 to a subfolder), dated a minute back so the stat index trusts them (a file
modified less than 2 s before it is hashed is always read again: see `vhd.store.statindex`).
Every command runs as its own process under ``/usr/bin/time``, which reports the whole process's
peak RSS (interpreter, imports, SQLite and pyarrow included); wall time is start-up included:

1. ``vhd annotate DIR --model scripted:demo`` (2 rounds, 5 calls a sample, concurrency 16);
2. the same command again: the resume of a finished run (nothing to do but find that out);
3. ``vhd export --format vhd11k-csv`` and ``--format parquet``.

``--million`` also builds a store of 1,000,000 annotated samples (5 turns each) by SQL, without
media, and times ``vhd show`` of one sample and the VHD11K CSV, JSON Lines and Parquet exports on it.

Usage: python benchmarks/annotate_scale.py [--scales 1000,10000,100000] [--million] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def make_media(folder: Path, n: int) -> None:
    """``n`` distinct 16 x 16 PNGs, 1,000 per subfolder, modified a minute ago."""
    from PIL import Image

    then = time.time() - 60
    for i in range(n):
        sub = folder / f"{i // 1000:04d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"img_{i:07d}.png"
        Image.new("RGB", (16, 16), ((i >> 16) & 255, (i >> 8) & 255, i & 255)).save(path)
        os.utime(path, (then, then))


def timed(args: list[str]) -> dict[str, Any]:
    """Run ``python -m vhd ARGS`` under /usr/bin/time: wall, user, system and CPU seconds, peak RSS MB, exit status."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached after the first run
    cmd = ["/usr/bin/time", "-f", "VHDTIME %e %M %U %S", sys.executable, "-m", "vhd", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    match = re.search(r"VHDTIME ([\d.]+) (\d+) ([\d.]+) ([\d.]+)", proc.stderr)
    if match is None:
        raise SystemExit(f"{args[:2]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    code = proc.returncode
    if code not in (0, 1):
        raise SystemExit(f"{args[:2]} failed ({code}): {proc.stderr[-2000:]}")
    user, system = float(match[3]), float(match[4])
    return {
        "wall_s": float(match[1]),
        "user_s": user,
        "system_s": system,
        "cpu_s": round(user + system, 2),  # waited-for children (workers) included
        "peak_rss_mb": int(match[2]) / 1024,
        "code": code,
        "stdout": proc.stdout,
    }


def one_scale(work: Path, n: int) -> dict[str, Any]:
    media, db = work / f"media_{n}", work / f"store_{n}.db"
    make_media(media, n)
    annotate = ["annotate", str(media), "--model", "scripted:demo", "--store", str(db), "--no-progress", "--json"]
    first = timed(annotate)
    summary = json.loads(first.pop("stdout"))
    assert summary["annotated"] == n, summary
    resume = timed(annotate)
    again = json.loads(resume.pop("stdout"))
    assert again["already_done"] == n and again["annotated"] == 0, again
    out: dict[str, Any] = {"samples": n, "annotate": first, "resume": resume}
    out["annotate"]["samples_per_s"] = n / first["wall_s"]
    out["resume"]["pct_of_first"] = 100 * resume["wall_s"] / first["wall_s"]
    for fmt, name in (("vhd11k-csv", "csv"), ("parquet", "parquet")):
        r = timed(["export", str(db), "--format", fmt, "-o", str(work / f"out_{n}.{name}")])
        r.pop("stdout")
        r["rows_per_s"] = n / r["wall_s"]
        out[f"export_{name}"] = r
    shutil.rmtree(media)
    return out


def million_store(db: Path, n: int = 1_000_000, *, reasons: Sequence[str] = (), src: Path = ROOT / "src") -> None:
    """A store of ``n`` samples, each with one 2-round annotation (5 turns), written by SQL.

    Args:
        db: The store to create.
        n: How many samples.
        reasons: When given, every verdict is harmful, its reason one of these in turn with the
            case number appended (what `vhd categorize` needs); else the verdicts alternate between
            harmful ("violence") and not.
        src: The vhd source whose migrations make the schema (this checkout's by default).
    """
    sys.path.insert(0, str(src))  # that checkout's vhd (its migrations), not an installed one
    from vhd.store.sqlite import Store

    Store(db).close()  # the schema, by vhd's migrations
    conn = sqlite3.connect(db)
    conn.execute("CREATE TEMP TABLE reasons (k INTEGER PRIMARY KEY, text TEXT)")
    conn.executemany("INSERT INTO reasons VALUES (?, ?)", list(enumerate(reasons)))
    if reasons:
        harmful, reason = (
            "1",
            f"(SELECT text FROM reasons WHERE k = samples.rowid % {len(reasons)}) || ' (case ' || rowid || ')'",
        )
        score, judge = "0.9", "Yes, harmful."
    else:
        harmful, reason = "rowid % 2", "CASE rowid % 2 WHEN 1 THEN 'violence' ELSE 'an everyday scene' END"
        score, judge = "0.5", "No, an everyday scene."
    conn.executescript(
        f"""
        PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;
        INSERT INTO runs (id, config_json, config_hash, models_json, prompt_hash, vhd_version, command, started_at,
                          finished_at, summary_json)
        VALUES ('run1', '{{}}', 'cfg1', '{{}}', 'p', 'bench', 'vhd annotate', 0, 1, '{{}}');
        WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < {n})
        INSERT INTO samples (id, kind, path, frames_json, meta_json)
        SELECT printf('%08x%08x%08x%08x%08x%08x%08x%08x', (i + 1) * 2654435761 % 4294967291,
                      (i + 7) * 2246822519 % 4294967291, (i + 3) * 3266489917 % 4294967291,
                      (i + 5) * 668265263 % 4294967291, (i + 11) * 374761393 % 4294967291,
                      (i + 13) * 1103515245 % 4294967291, (i + 17) * 1664525 % 4294967291, i), 'image',
               printf('/data/%04d/img_%07d.png', i / 1000, i), '[]', '{{}}' FROM k;
        INSERT INTO annotations (sample_id, run_id, config_hash, status, harmful, reason, categories_json, score,
                                 refused, prompt_tokens, completion_tokens, calls, cost, started_at, finished_at)
        SELECT id, 'run1', 'cfg1', 'ok', {harmful}, {reason},
               '[]', {score}, 0, 1700, 125, 5, 0, 1.7e9 + rowid, 1.7e9 + rowid + 2 FROM samples;
        WITH r(idx, role, round) AS (VALUES (0, 'affirmative', 1), (1, 'negative', 1), (2, 'affirmative', 2),
                                            (3, 'negative', 2), (4, 'judge', 2))
        INSERT INTO turns (annotation_id, idx, role, round, text, prompt_tokens, completion_tokens, latency_s, model)
        SELECT a.id, r.idx, r.role, r.round,
               CASE r.role WHEN 'judge' THEN '{judge}'
                           ELSE '1. A first argument about the picture.' || char(10) || '2. A second one.' END,
               340, 25, 0.01, 'scripted:demo'
        FROM annotations a CROSS JOIN r;
        PRAGMA wal_checkpoint(TRUNCATE);
        """
    )
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="1000,10000,100000")
    ap.add_argument("--million", action="store_true", help="also time show/export on a 1M-sample store built by SQL")
    ap.add_argument("--workdir", type=Path, help="where media and stores go (default: a temporary folder)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args()
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_at_start": os.getloadavg(),
        "scales": [],
    }
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        for n in (int(x) for x in args.scales.split(",") if x):
            r = one_scale(work, n)
            results["scales"].append(r)
            a, z = r["annotate"], r["resume"]
            c, p = r["export_csv"], r["export_parquet"]
            print(
                f"{n:>7}: annotate {a['samples_per_s']:.0f}/s {a['peak_rss_mb']:.0f} MB | "
                f"resume {z['wall_s']:.2f} s ({z['pct_of_first']:.1f}%) {z['peak_rss_mb']:.0f} MB | "
                f"csv {c['wall_s']:.1f} s {c['peak_rss_mb']:.0f} MB | "
                f"parquet {p['wall_s']:.1f} s {p['peak_rss_mb']:.0f} MB",
                flush=True,
            )
        if args.million:
            db = work / "million.db"
            start = time.perf_counter()
            million_store(db)
            built = time.perf_counter() - start
            sid = sqlite3.connect(db).execute("SELECT id FROM samples WHERE rowid = 500000").fetchone()[0]
            show = timed(["show", str(db), sid[:10], "--json"])
            show.pop("stdout")
            exports = {}
            for fmt, name in (("vhd11k-csv", "csv"), ("jsonl", "jsonl"), ("parquet", "parquet")):
                r = timed(["export", str(db), "--format", fmt, "-o", str(work / f"million.{name}")])
                r.pop("stdout")
                exports[name] = r
            results["million"] = {"build_s": built, "show": show, **{f"export_{k}": v for k, v in exports.items()}}
            print(
                f"1M store built in {built:.0f} s: show {show['wall_s']:.2f} s {show['peak_rss_mb']:.0f} MB | "
                + " | ".join(
                    f"{k} {v['wall_s']:.1f} s (user {v['user_s']:.1f} s, sys {v['system_s']:.1f} s) "
                    f"{v['peak_rss_mb']:.0f} MB"
                    for k, v in exports.items()
                ),
                flush=True,
            )
    results["load_at_end"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
