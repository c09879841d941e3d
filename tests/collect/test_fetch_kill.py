"""Killing `vhd fetch` midway and running it again gives the same result as one clean run."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.collect.conftest import leftovers, png_bytes
from tests.collect.media_server import MediaServer, Route

N_FILES = 40


def _serve_slowly(srv: MediaServer, listing: Path) -> None:
    lines = ["url,keyword"]
    for i in range(N_FILES):
        body = png_bytes((i * 6 % 256, 90, 200), (48, 48)) + bytes(4000)
        lines.append(f"{srv.add(f'/f{i}.png', Route(body=body, chunk_size=500, chunk_delay=0.02))},kw{i % 3}")
    lines.append(f"{srv.add('/missing', Route(status=404))},kw0")
    listing.write_text("\n".join(lines) + "\n")


def _run(listing: Path, out: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "vhd", "fetch", str(listing), "--out", str(out), "--allow-private", "--no-progress"]
    cmd += ["--concurrency", "4", "--per-host", "4", "--retries", "0"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _log_lines(out: Path) -> int:
    try:
        return len((out / "fetch-log.jsonl").read_text().splitlines())
    except OSError:
        return 0


def _state(out: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    files = sorted(p.name for p in out.iterdir() if p.suffix == ".png")
    with open(out / "manifest.csv", newline="") as fh:
        manifest = sorted((r["path"], r["url"], r["keyword"]) for r in csv.DictReader(fh))
    return files, manifest


def _wait_for_progress(proc: subprocess.Popen[bytes], out: Path) -> None:
    deadline = time.monotonic() + 30
    while _log_lines(out) < 5:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the fetch made no progress"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_kill_midway_then_rerun_matches_a_clean_run(server: MediaServer, tmp_path: Path, how: signal.Signals) -> None:
    listing = tmp_path / "urls.csv"
    _serve_slowly(server, listing)
    clean = tmp_path / "clean"
    assert _run(listing, clean).wait(120) == 0
    expected = _state(clean)
    assert len(expected[0]) == N_FILES

    out = tmp_path / "killed"
    proc = _run(listing, out)
    _wait_for_progress(proc, out)
    os.kill(proc.pid, how)
    code = proc.wait(30)
    done_before = _log_lines(out)
    assert 5 <= done_before < N_FILES + 1
    if how == signal.SIGINT:
        assert code == 130
        assert not leftovers(out), "an interrupted run removes its partial files"
    else:
        assert code == -signal.SIGKILL
    hits_before = sum(server.hits.values())

    rerun = _run(listing, out)
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr.decode()
    assert _state(out) == expected
    assert not leftovers(out) and not (out / ".partial").exists()
    refetched = sum(server.hits.values()) - hits_before
    assert refetched <= N_FILES + 1 - done_before + 4, "only what was missing is fetched again"
    assert b"fetched" in stdout
