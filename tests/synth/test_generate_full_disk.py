"""`vhd generate` onto a full disk: one line, nothing partial left, the run recorded, and the rerun works.

A small ``RLIMIT_FSIZE`` in a child (as tests/test_full_disk.py does) fails the image files; a store
is larger than any limit below its images, so the store's record is checked with ``ENOSPC`` raised
by the image writer in-process.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from tests.synth.conftest import TINY
from tests.test_full_disk import LIMIT, run_limited
from vhd.cli.main import main
from vhd.store.sqlite import Store


def args_for(tiny_pipes: dict[str, Path], prompts_csv: Path, out: Path) -> list[str]:
    size = ["--size", "128x128"]  # a random-weight pipeline's image: a noisy PNG of about 50 KB, over `LIMIT`
    return ["generate", str(prompts_csv), "--generator", f"sd:{tiny_pipes['sd']}", "--out", str(out), *TINY, *size]


def test_generate_onto_a_full_disk_stops_in_one_line_and_resumes(
    tiny_pipes: dict[str, Path], prompts_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk ends ``vhd generate`` (it would fail every image after it), nothing partial left."""
    out = tmp_path / "synth"
    args = args_for(tiny_pipes, prompts_csv, out)
    proc = run_limited(args, tmp_path, LIMIT)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("vhd: error")]  # not library warnings
    assert len(said) == 1 and said[0].startswith("vhd: error: generate stopped: File too large"), said
    assert "nothing partial was left" in said[0] and "run the same command again" in said[0]
    assert "failed" not in proc.stdout  # not one failure per image: the run stopped at the first
    assert [p for p in out.rglob("*") if p.is_file()] == []  # no image, no temporary
    assert main(args) == 0  # with room, the same command makes them
    capsys.readouterr()
    assert len(list(out.glob("*.png"))) == 2


def test_a_full_disk_is_recorded_in_the_stores_run(
    tiny_pipes: dict[str, Path],
    prompts_csv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import vhd.synth.outputs

    def full(*_: Any, **__: Any) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(vhd.synth.outputs, "write_output", full)
    db = tmp_path / "run.db"
    args = [*args_for(tiny_pipes, prompts_csv, tmp_path / "synth"), "--store", str(db)]
    assert main(args) == 1
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vhd")]
    assert len(said) == 1 and said[0].startswith("vhd: error: generate stopped: No space left on device"), said
    with Store(db) as store:
        (run,) = store.runs()
        assert run.summary is not None and run.summary["stopped"] == "[Errno 28] No space left on device"
