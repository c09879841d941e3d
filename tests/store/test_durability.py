"""A writer killed with SIGKILL at random moments never leaves a broken store."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhd.store import Store

WRITER = r"""
import hashlib, random, sys
from vhd.records import Annotation, Kind, Role, Sample, Turn, Verdict
from vhd.store import Store

db, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
with Store(db) as store:
    run = store.start_run({"seed": seed}, "h", {}, "p")
    seq = 0
    while True:
        seq += 1
        n = rng.randrange(30)
        cfg = rng.choice(["a", "b"])
        nturns = rng.randrange(1, 10)
        sample = Sample(id=hashlib.sha256(str(n).encode()).hexdigest(), kind=Kind.IMAGE,
                        path=f"/m/{n}.png")
        turns = [Turn(Role.AFFIRMATIVE if k % 2 else Role.NEGATIVE, k // 2 + 1,
                      "w" * rng.randrange(1, 20000)) for k in range(nturns)]
        ann = Annotation(sample_id=sample.id, run_id=run, config_hash=cfg,
                         verdict=Verdict(harmful=True, reason=f"{seed}:{seq}:{nturns}"),
                         turns=turns)
        store.save_annotation(ann, sample)
        print(f"{sample.id} {cfg} {seed} {seq}", flush=True)
"""


def _check(db: Path, acked: dict[tuple[str, str], tuple[int, int]]) -> int:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        rows = conn.execute(
            "SELECT a.sample_id, a.config_hash, a.reason, COUNT(t.idx) FROM annotations a "
            "LEFT JOIN turns t ON t.annotation_id = a.id GROUP BY a.id"
        ).fetchall()
    stored = {}
    for sample_id, cfg, reason, nturns in rows:
        seed, seq, expected = (int(x) for x in reason.split(":"))
        assert nturns == expected, f"annotation {reason} has {nturns} of {expected} turns"
        stored[(sample_id, cfg)] = (seed, seq)
    for key, mark in acked.items():  # every acknowledged write survived (or a later one did)
        assert key in stored and stored[key] >= mark
    with Store(db) as store:  # and the store still opens and reads
        assert len(list(store.iter_annotations())) > 0
    return len(rows)


@pytest.mark.slow
def test_sigkill_at_random_moments_keeps_store_consistent(tmp_path: Path) -> None:
    db = tmp_path / "vhd.db"
    rng = random.Random(1234)
    acked: dict[tuple[str, str], tuple[int, int]] = {}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for seed in range(1, 9):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        target = rng.randrange(20, 120)
        for _ in range(target):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "writer died"
            sample_id, cfg, s, q = line.split()
            acked[(sample_id, cfg)] = (int(s), int(q))
        time.sleep(rng.random() * 0.02)  # land somewhere inside a later write
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
        assert _check(db, acked) > 0
