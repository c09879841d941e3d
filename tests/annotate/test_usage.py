"""Every model call a run makes is in its usage, as it happens: Ctrl-C twice and SIGKILL lose none.

The loopback server answers the first ``N`` chat requests and holds every later one, so the
calls a run was answered are known exactly when it is stopped.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.annotate.test_api import judge_reply, make_images
from tests.servers.chat_server import ChatServer
from vhd.records import Usage
from vhd.store.leases import LeaseOwner
from vhd.store.sqlite import Store

PRICE_IN, PRICE_OUT = 2.0, 8.0
USAGE = (100, 10)  # tokens the server reports for every call


class Gate:
    """A reply function that answers ``n`` requests, then holds the rest until `open`."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0
        self.lock = threading.Lock()
        self.event = threading.Event()

    def __call__(self, body: dict[str, Any]) -> str:
        with self.lock:
            self.seen += 1
            held = self.seen > self.n
        if held:
            self.event.wait(60)
        return judge_reply(body)

    def open(self) -> None:
        self.event.set()


def answered(srv: ChatServer) -> int:
    return sum(1 for method, path, status in srv.log if method == "POST" and status == 200)


def start(tmp_path: Path, srv: ChatServer, n_images: int = 10) -> subprocess.Popen[str]:
    make_images(tmp_path / "m", n_images)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[backends.openai]\nbase_url = "{srv.base_url}"\nbackoff_base = 0.01\nmax_retries = 0\n'
        f'[prices."openai:m"]\ninput = {PRICE_IN}\noutput = {PRICE_OUT}\n'
    )
    cmd = [sys.executable, "-m", "vhd", "annotate", str(tmp_path / "m"), "--model", "openai:m", "--store",
           str(tmp_path / "u.db"), "--config", str(cfg), "--concurrency", "2", "--no-progress", "--json"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until_held(srv: ChatServer, gate: Gate, in_flight: int = 2) -> None:
    deadline = time.time() + 60
    while time.time() < deadline and srv.chat_requests < gate.n + in_flight:
        time.sleep(0.02)
    assert srv.chat_requests == gate.n + in_flight
    time.sleep(1.0)  # well past the 100 ms the run's usage may lag behind


def expected(calls: int) -> Usage:
    p, c = USAGE
    return Usage(calls, p * calls, c * calls, calls * (p * PRICE_IN + c * PRICE_OUT) / 1e6)


def stored_usage(db: Path) -> Usage:
    with Store(db) as st:
        [run] = st.runs()
        usage = st.run_usage(run.id)
    assert usage is not None
    return usage


@pytest.mark.slow
def test_sigkill_mid_run_keeps_the_usage_of_every_answered_call(tmp_path: Path) -> None:
    gate = Gate(7)  # 7 calls answered: no sample finished (two samples in flight, 5 calls each)
    with ChatServer(reply=gate, usage=USAGE) as srv:
        proc = start(tmp_path, srv)
        try:
            wait_until_held(srv, gate)
            paid = answered(srv)
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        finally:
            gate.open()
    assert paid == 7
    got = stored_usage(tmp_path / "u.db")
    assert got.calls == paid and (got.prompt_tokens, got.completion_tokens) == (7 * 100, 7 * 10)
    assert got.cost == pytest.approx(expected(paid).cost)


@pytest.mark.slow
def test_ctrl_c_twice_counts_the_calls_of_abandoned_samples(tmp_path: Path) -> None:
    gate = Gate(12)
    with ChatServer(reply=gate, usage=USAGE) as srv:
        proc = start(tmp_path, srv)
        try:
            wait_until_held(srv, gate)
            paid = answered(srv)
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            gate.open()
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["interrupted"] and summary["annotated"] * 5 <= 12
    assert summary["remaining"] == 10 - summary["annotated"]  # the two abandoned samples included
    assert summary["usage"]["calls"] == paid == 12
    assert summary["usage"]["cost"] == pytest.approx(expected(paid).cost)
    assert stored_usage(tmp_path / "u.db") == Usage(**summary["usage"])


def _eventually(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the ledger's background thread did not write in time"
        time.sleep(0.02)


def test_ledger_renews_leases_and_flushes_usage_in_the_background(tmp_path: Path) -> None:
    from vhd.annotate.ledger import Ledger

    with Store(tmp_path / "l.db") as st:
        run = st.start_run({}, "cfg", {}, "p")
        st.claim(LeaseOwner.here(run), "cfg", ["a" * 64], ttl=0.4)

        def expires() -> float:
            return float(st.conn.execute("SELECT expires_at FROM leases").fetchone()[0])

        first = expires()
        with Ledger(st, run, lease_seconds=0.4) as ledger:
            for _ in range(3):
                ledger.add(Usage(1, 10, 2, 0.5))
            _eventually(lambda: st.run_usage(run) == Usage(3, 30, 6, 1.5))  # written without being asked
            _eventually(lambda: expires() > first + 0.15)  # renewed while the run works
            ledger.add(Usage(1, 1, 1, 0.25))
        assert st.run_usage(run) == Usage(4, 31, 7, 1.75)  # closing writes the rest
        assert ledger.usage == Usage(4, 31, 7, 1.75)
