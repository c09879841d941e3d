"""The test session itself ends cleanly: a stuck native call is timed out, fixture servers die with it (issue 33).

Each test runs a tiny pytest session in a subprocess with the project's own pytest settings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STUCK = """
import ctypes
def test_stuck_in_native_code():
    libc = ctypes.CDLL("libc.so.6")
    mutex = ctypes.create_string_buffer(64)  # all zero: a default mutex
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # waits for good, in C, not woken by signals
"""

SERVER = """
import sys, time
from pathlib import Path
from tests.servers import popen_server
def test_holds_a_server(tmp_path):
    proc = popen_server([sys.executable, "-c", "import time; time.sleep(120)"])
    Path({pid_file!r}).write_text(str(proc.pid))
    time.sleep(120)
"""


def _session(tmp_path: Path, body: str, *opts: str) -> subprocess.Popen[bytes]:
    test = tmp_path / "test_inner.py"
    test.write_text(body, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]
    cmd += ["--rootdir", str(tmp_path), *opts, str(test)]
    return subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a glibc mutex through ctypes")
def test_the_per_test_timeout_ends_a_test_stuck_in_native_code(tmp_path: Path) -> None:
    proc = _session(tmp_path, STUCK, "-o", "timeout=1")
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("a test stuck in a native call outlived its timeout (use timeout_method = 'thread')")
    assert proc.returncode != 0
    assert b"Timeout" in out, out.decode(errors="replace")[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_fixture_server_dies_with_a_killed_session(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    proc = _session(tmp_path, SERVER.format(pid_file=str(pid_file)), "-o", "timeout=0")
    server = 0
    try:
        deadline = time.monotonic() + 60
        while not pid_file.is_file() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0].decode()[-2000:]
            time.sleep(0.05)
        server = int(pid_file.read_text())
        assert _alive(server)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 5
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server), "the server outlived the test session that started it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if server and _alive(server):
            os.kill(server, signal.SIGKILL)
