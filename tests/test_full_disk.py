"""A full disk under every file writer: one line, exit 1, nothing partial left, and the rerun works.

A small ``RLIMIT_FSIZE`` in a child process makes any write past that size fail with ``EFBIG``
(``SIGXFSZ`` is ignored there), as a full disk fails with ``ENOSPC``: no root and no real full
disk needed. The store's own full disk (``PRAGMA max_page_count``) is tested in
tests/store/test_full.py and tests/annotate/test_store_full.py.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.annotate.test_api import make_images
from vhd.cli.main import main

LIMIT = 40 * 1024
"""Largest file the child may write: above SQLite's shared-memory file (32 KiB), below every output."""

CHILD = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from vhd.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def run_limited(args: list[str], cwd: Path, limit: int = LIMIT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent / "src"), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(limit=limit), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_one_line_full(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("vhd: error: ") and "File too large" in lines[0]
    assert "nothing partial was left" in lines[0] and "run the same command again" in lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with 250 annotations whose debates are long (every export is well over `LIMIT`)."""
    folder = tmp_path_factory.mktemp("full")
    make_images(folder / "m", 250)
    script = folder / "script.yaml"
    long = " ".join(["word"] * 400)
    script.write_text(f'default: "{long}"\nrules:\n  - when: {{tag: judge}}\n    reply: "No, plain colours."\n')
    db = folder / "s.db"
    assert (
        main(["annotate", str(folder / "m"), "--model", f"scripted:{script}", "--store", str(db), "--no-progress"]) == 0
    )
    return db


@pytest.mark.parametrize("fmt", ["vhd11k-csv", "jsonl", "parquet", "hf"])
def test_export_onto_a_full_disk_leaves_nothing_partial(
    fmt: str, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if fmt in ("parquet", "hf"):
        pytest.importorskip("pyarrow" if fmt == "parquet" else "datasets")
    out = tmp_path / "out" / ("ds" if fmt == "hf" else "x.out")
    args = ["export", str(store), "--format", fmt, "-o", str(out), "--kind", "image"]
    (tmp_path / "out").mkdir()
    proc = run_limited(args, tmp_path)
    assert_one_line_full(proc)
    assert sorted(os.listdir(tmp_path / "out")) == []  # no file, no temporary, no partial dataset folder
    assert main(args) == 0  # with room, the same command writes it whole
    capsys.readouterr()
    assert out.exists()


def test_frames_onto_a_full_disk_stop_in_one_line_and_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("av")
    from tests.hostile_corpus import video_bytes

    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(3):
        (clips / f"clip{i}.mkv").write_bytes(video_bytes("ffv1", "matroska", frames=12, size=160, noise=True))
    args = ["frames", str(clips), "--out", str(tmp_path / "frames"), "--n", "3", "--no-progress"]
    proc = run_limited(args, tmp_path)  # a frame of noise is a PNG of about 75 kB
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "nothing partial was left" in proc.stderr
    partial = [p for p in (tmp_path / "frames").rglob("*") if p.name.startswith(".")]
    assert partial == []
    assert main(args) == 0
    capsys.readouterr()
    assert len(list((tmp_path / "frames").rglob("*.png"))) == 9


PREVIEW_CHILD = """
import hashlib, resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from vhd.records import Kind, Sample
from vhd.serve.thumbs import Look, PreviewCache
image = Path(sys.argv[1])
sample = Sample(id=hashlib.sha256(image.read_bytes()).hexdigest(), kind=Kind.IMAGE, path=str(image))
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
cache = PreviewCache(sys.argv[2])
sizes = [len(cache.get(sample, 0, look)) for look in (Look(clear=True), Look())]
print(" ".join(map(str, sizes)))
"""


def test_the_review_apps_preview_cache_on_a_full_disk_serves_and_leaves_nothing_partial(tmp_path: Path) -> None:
    """A preview that cannot be kept on disk is still served; no partial or temporary file is left."""
    pytest.importorskip("starlette")
    import numpy as np
    from PIL import Image

    from vhd.records import Kind, Sample
    from vhd.serve.thumbs import Look, PreviewCache

    image = tmp_path / "noise.png"  # noise: its clear preview is a JPEG well over the limit below
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (900, 900, 3), np.uint8)).save(image)
    folder = tmp_path / "previews"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent / "src"), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", PREVIEW_CHILD.format(limit=8 * 1024), str(image), str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    sizes = [int(n) for n in proc.stdout.split()]
    assert len(sizes) == 2 and sizes[0] > 8 * 1024  # the clear view, served whole though it could not be kept
    kept = [p for p in folder.rglob("*") if p.is_file()]
    assert [p.stat().st_size for p in kept] == [sizes[1]]  # only the small blurred look, whole; no temporary
    sample = Sample(id=hashlib.sha256(image.read_bytes()).hexdigest(), kind=Kind.IMAGE, path=str(image))
    cache = PreviewCache(folder)  # with room, the same previews are made and kept
    assert [len(cache.get(sample, 0, look)) for look in (Look(clear=True), Look())] == sizes
    assert len([p for p in folder.rglob("*.jpg")]) == 2
