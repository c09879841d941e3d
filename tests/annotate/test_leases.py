"""Several `vhd annotate` runs on one store: each sample is debated (and paid for) once."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.annotate.test_api import judge_reply, kill_after_annotations, make_images
from tests.servers.chat_server import ChatServer
from vhd.store.leases import LeaseOwner
from vhd.store.sqlite import Store


def config(path: Path, base_url: str, lease_seconds: float | None = None) -> Path:
    top = [] if lease_seconds is None else [f"lease_seconds = {lease_seconds}"]
    body = ["[backends.openai]", f'base_url = "{base_url}"', "backoff_base = 0.01", "max_retries = 2"]
    path.write_text("\n".join(top + body) + "\n")
    return path


def command(media: Path, db: Path, cfg: Path, concurrency: int = 2) -> list[str]:
    return [sys.executable, "-m", "vhd", "annotate", str(media), "--model", "openai:m", "--store", str(db),
            "--config", str(cfg), "--concurrency", str(concurrency), "--no-progress", "--json"]  # fmt: skip


@pytest.mark.slow
def test_two_runs_on_one_new_store_debate_each_sample_once(tmp_path: Path) -> None:
    n = 24
    make_images(tmp_path / "m", n)
    db = tmp_path / "shared.db"  # brand-new: both runs create it at once
    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        procs = [subprocess.Popen(command(tmp_path / "m", db, cfg), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]  # fmt: skip
        results = [p.communicate(timeout=240) for p in procs]
        codes = [p.returncode for p in procs]
        assert all(c in (0, 1) for c in codes), results
        summaries = [json.loads(out) for out, _ in results]
        assert srv.chat_requests == 5 * n  # what one run alone would have sent
        assert sum(s["annotated"] for s in summaries) == n
        for s, code in zip(summaries, codes, strict=True):
            assert s["found"] == n and s["annotated"] + s["leased"] + s["already_done"] == n
            assert s["usage"]["calls"] == 5 * s["annotated"]
            assert code == (1 if s["leased_unfinished"] else 0)
        with Store(db) as st:
            anns = [a for _, a in st.iter_annotations()]
            assert len(anns) == n and all(len(a.turns) == 5 and a.verdict.status.final for a in anns)
            assert {a.run_id for a in anns} <= {s["run_id"] for s in summaries}
            assert st.conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # all released
        again = subprocess.run(command(tmp_path / "m", db, cfg), capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and json.loads(again.stdout)["already_done"] == n
        assert srv.chat_requests == 5 * n


@pytest.mark.slow
def test_leases_of_a_killed_run_on_this_machine_are_retaken_at_once(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 12)
    db = tmp_path / "k.db"
    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)  # default lease: a minute
        proc = subprocess.Popen(command(tmp_path / "m", db, cfg), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        kill_after_annotations(proc, db, 3)
        with Store(db) as s:
            left = s.conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0]
            kept = sum(1 for _ in s.iter_annotations())
        assert left > 0 and kept < 12  # the killed run's leases are still there
        before = srv.chat_requests
        rerun = subprocess.run(command(tmp_path / "m", db, cfg), capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        summary = json.loads(rerun.stdout)
        assert summary["leased"] == 0 and summary["annotated"] == 12 - kept
        assert srv.chat_requests - before == 5 * (12 - kept)


@pytest.mark.slow
def test_samples_leased_elsewhere_are_skipped_until_the_lease_expires(tmp_path: Path) -> None:
    paths = make_images(tmp_path / "m", 6)
    db = tmp_path / "e.db"
    ids = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths[:3]]
    with ChatServer(reply=judge_reply) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        first = subprocess.run(command(tmp_path / "m", db, cfg), capture_output=True, text=True, timeout=120)
        assert first.returncode == 0  # learn the configuration hash; then lease three samples from elsewhere
        with Store(db) as st:
            [config_hash] = st.config_hashes()
            other = st.start_run({}, config_hash, {}, "p")
            st.conn.execute("DELETE FROM turns")
            st.conn.execute("DELETE FROM annotations")
            st.claim(LeaseOwner(run_id=other, pid=1, host="another-machine"), config_hash, ids, ttl=600)
        before = srv.chat_requests
        second = subprocess.run(command(tmp_path / "m", db, cfg)[:-1], capture_output=True, text=True, timeout=120)
        assert second.returncode == 1, second.stderr
        assert "3 leased by another run" in second.stdout and srv.chat_requests - before == 5 * 3
        with Store(db) as st:  # ten minutes later, nobody renewed them
            st.conn.execute("UPDATE leases SET expires_at = expires_at - 601")
        third = subprocess.run(command(tmp_path / "m", db, cfg), capture_output=True, text=True, timeout=120)
        assert third.returncode == 0, third.stderr
        s = json.loads(third.stdout)
        assert (s["annotated"], s["already_done"], s["leased"]) == (3, 3, 0)
