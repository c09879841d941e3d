from __future__ import annotations

import io
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from vhd.bench.cache import CACHE_FILE, cached_count
from vhd.bench.pipeline import benchmark, build_detectors
from vhd.progress import bar

ROOT = Path(__file__).resolve().parents[2]


def test_progress_bar_on_a_terminal(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    buf = io.StringIO()
    calls: list[tuple[int, int | None]] = []
    console = Console(file=buf, force_terminal=True, width=120)
    with bar("benchmarking", unit="samples", console=console) as on_bar:

        def on_progress(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
            calls.append((done, total))
            on_bar(done, total, stage=stage, info=info)

        benchmark(labels, build_detectors(["red"]), tmp_path / "r", media=media, plots=False, progress=on_progress)
    assert calls[-1] == (10, 10) and len(calls) == 10
    text = buf.getvalue()
    assert "benchmarking" in text and "10/10" in text and "samples/s" in text


CHILD = """
import sys
from vhd.detectors import registry
registry.BUILTIN["red"] = "tests.bench.fake_detector:RedDetector"
from vhd.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _bench(tmp_path: Path, labels: Path, media: Path, trace: Path) -> subprocess.Popen[str]:
    args = ["bench", "--labels", str(labels), "--media", str(media), "--out", str(tmp_path / "out")]
    args += ["--detector", "red", "--set", "red.delay=0.25", "--set", f"red.trace={trace}", "--concurrency", "1"]
    args += ["--no-plots", "--bootstrap", "0"]
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_ctrl_c_commits_predictions_and_resumes(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    trace = tmp_path / "trace.txt"
    proc = _bench(tmp_path, labels, media, trace)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not trace.exists() or len(trace.read_text().splitlines()) < 4):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "run the same command again to resume" in err
    done = cached_count(tmp_path / "out")
    assert 3 <= done < 10  # buffered predictions were committed (fewer than the flush batch of 32)
    assert f"{done} prediction(s) are cached" in err
    assert not (tmp_path / "out" / "results.json").exists()
    with sqlite3.connect(tmp_path / "out" / CACHE_FILE) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    proc = _bench(tmp_path, labels, media, trace)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err  # green.png fails in the fake detector
    assert f"red: {done} cached, {10 - done} run" in out
