"""Commands killed with SIGKILL midway, then run again, end exactly like uninterrupted runs."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.curate.conftest import photo, save
from tests.media.conftest import make_video
from vhd.store import Store
from vhd.store.curation import duplicate_marks


def vhd(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "vhd", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_at_random(args: list[str], seed: int) -> None:
    proc = vhd(*args)
    time.sleep(random.Random(seed).uniform(0.3, 1.5))
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def tree(root: Path) -> dict[str, bytes]:
    """Every visible file under root with its bytes (the frames journal left out)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".vhd-")
    }


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("media")
    for i in range(8):
        make_video(root / "videos" / f"clip{i}.mp4", 120 + 10 * i, size=(160, 120))
    for i, name in enumerate(("astronaut", "coffee", "chelsea", "rocket", "camera", "moon")):
        img = photo(name, (400 + i, 300))
        save(img, root / "photos" / f"{name}.png")
        save(img.resize((200, 150)), root / "photos" / f"{name}_small.jpg")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_frames_killed_then_rerun(tmp_path: Path, media: Path, seed: int) -> None:
    out, clean = tmp_path / "out", tmp_path / "clean"
    args = ["frames", str(media / "videos"), "--no-progress", "--jobs", "2"]
    kill_at_random([*args, "--out", str(out)], seed)
    # a kill may leave the hidden temporary folder of the video in flight (the rerun removes it,
    # checked below); no partial file may stand under a final name
    visible = [
        p for p in out.rglob("*") if p.is_file() and not any(s.startswith(".") for s in p.relative_to(out).parts)
    ]
    assert all(not p.name.endswith((".part", ".tmp")) for p in visible)
    assert vhd(*args, "--out", str(out)).wait() == 0
    assert vhd(*args, "--out", str(clean)).wait() == 0
    assert tree(out) == tree(clean) and len(tree(clean)) == 40
    assert not [p for p in out.rglob(".*") if p.name != ".vhd-frames.jsonl"]


@pytest.mark.slow
def test_ingest_and_dedup_killed_then_rerun(tmp_path: Path, media: Path) -> None:
    db, clean = tmp_path / "run.db", tmp_path / "clean.db"
    for step, seed in (
        (["ingest", str(media), "--store", str(db), "--no-progress"], 3),
        (["dedup", str(db), "--apply", "--no-progress", "--jobs", "2"], 4),
    ):
        kill_at_random(step, seed)
        assert vhd(*step).wait() in (0, 1)
    assert vhd("ingest", str(media), "--store", str(clean), "--no-progress").wait() == 0
    assert vhd("dedup", str(clean), "--apply", "--no-progress", "--jobs", "2").wait() == 0

    def state(path: Path) -> tuple[list[tuple[str, str, list[int]]], list[tuple[str, str, bool]]]:
        with Store(path) as store:
            rows = store.conn.execute("SELECT id, path, frames_json FROM samples ORDER BY id").fetchall()
            marks = sorted((m.sample_id, m.cluster, m.kept) for m in duplicate_marks(store))
        return [tuple(r) for r in rows], marks

    assert state(db) == state(clean)
    assert len(state(clean)[1]) >= 12  # at least the six photos with their smaller copies
