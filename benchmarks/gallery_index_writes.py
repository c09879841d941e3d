"""What keeping the gallery's index (migrations ``0011_gallery_index``, ``gallery_newest``) costs writes.

Two fresh stores in a temporary folder take the same writes the way vhd makes them: ``--samples``
samples each saved with its annotation in its own transaction (`Store.save_annotation`, as `vhd
annotate` commits a sample), the same annotations saved again (a re-run replacing them), their
categories rewritten (`vhd categorize`'s apply), and one labels import of all of them
(`Store.save_labelled_set`). In the second store the index's triggers are dropped, which is what
the writes cost without the index. Both stores use a file on disk with the store's own settings.
Measured: CPU time (user + sys) of this process per write, median of ``--repeat`` rounds in which
the two stores take turns going first (wall time on a shared machine mostly measures the disk).

Usage: python benchmarks/gallery_index_writes.py [--samples 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vhd.records import Annotation, Kind, LabelledSample, Sample, Verdict  # noqa: E402
from vhd.store.sqlite import Store  # noqa: E402

TRIGGERS = (
    "gallery_sample_insert",
    "gallery_sample_delete",
    "gallery_annotation_insert",
    "gallery_annotation_delete",
    "gallery_annotation_update",
    "gallery_label_replace",
    "gallery_label_insert",
    "gallery_label_delete",
    "gallery_newest_insert",  # migration gallery_newest: each sample's newest verdict
    "gallery_newest_first",
    "gallery_newest_delete",
    "gallery_newest_last",
    "gallery_newest_update",
    "gallery_newest_move",
    "gallery_newest_move_out",
    "gallery_newest_move_in",
)


def writes(store: Store, n: int) -> dict[str, float]:
    """Time each kind of write on ``n`` samples: CPU seconds (user + sys) of this process per kind."""
    run = store.start_run({}, "c" * 64, {"judge": "scripted:demo"}, "p")
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]

    def annotation(i: int, harmful: bool) -> Annotation:
        verdict = Verdict(harmful=harmful, reason="r", categories=["Violence and Threats"] if harmful else [])
        verdict.score = (i % 100) / 100
        return Annotation(sample_id=ids[i], run_id=run, config_hash="c" * 64, verdict=verdict, decided_by="debate")

    def timed(fn: Callable[[], object]) -> float:
        t = time.process_time()
        fn()
        return time.process_time() - t

    out = {}
    out["save_annotation (new sample)"] = timed(
        lambda: [
            store.save_annotation(annotation(i, i % 5 == 0), Sample(id=ids[i], kind=Kind.IMAGE, path=f"/d/{i}.jpg"))
            for i in range(n)
        ]
    )
    out["save_annotation (replacing)"] = timed(
        lambda: [store.save_annotation(annotation(i, i % 5 == 1)) for i in range(n)]
    )
    rows = store.conn.execute("SELECT id FROM annotations").fetchall()

    def categorize() -> None:
        with store.conn:
            store.conn.executemany(
                "UPDATE annotations SET categories_json = ? WHERE id = ?",
                [('["Substance Misuse"]', r[0]) for r in rows],
            )

    out["categories rewritten (one transaction)"] = timed(categorize)
    labels = [
        LabelledSample(id=s, path=Path(f"/d/{i}.jpg"), kind=Kind.IMAGE, harmful=i % 2 == 0) for i, s in enumerate(ids)
    ]
    out["labels import (one transaction)"] = timed(lambda: store.save_labelled_set("import", labels))
    out["labels import again (replacing)"] = timed(lambda: store.save_labelled_set("import", labels))
    return out


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"with the index": [], "triggers dropped": []}
    for k in range(args.repeat):  # the two stores take turns going first
        for name in sorted(runs, reverse=k % 2 == 1):
            with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
                if name == "triggers dropped":
                    for trigger in TRIGGERS:
                        store.conn.execute(f"DROP TRIGGER {trigger}")
                runs[name].append(writes(store, args.samples))
    results = {name: {kind: statistics.median(r[kind] for r in rs) for kind in rs[0]} for name, rs in runs.items()}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average: {load}; CPU user+sys {usage.ru_utime + usage.ru_stime:.1f} s")
    print(f"{args.samples:,} samples, CPU time per write (median of {args.repeat})\n")
    print("| write | with the index | triggers dropped | ratio |")
    print("|---|---:|---:|---:|")
    for kind in results["with the index"]:
        a, b = results["with the index"][kind], results["triggers dropped"][kind]
        print(f"| {kind} | {a * 1e6 / args.samples:.0f} µs each | {b * 1e6 / args.samples:.0f} µs each | {a / b:.2f} |")


if __name__ == "__main__":
    main()
