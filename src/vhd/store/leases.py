"""Who is annotating what, and what each run has spent: tables ``leases`` and ``run_usage``.

`Leases` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx``, ``_query`` and ``path``.

A run claims the samples it is about to debate, in batches, in the same transaction that checks
for a final verdict: a sample with one is done, a sample leased by another live run is skipped,
anything else gets a lease in this run's name. The lease expires ``ttl`` seconds after its last
renewal (a run renews its leases while it works), so the samples of a run that died are taken
again; a lease whose owner is a process of this machine that no longer exists is taken at once.
Saving a sample's annotation releases its lease in the same transaction.

This keeps runs in processes on one machine from paying twice for a sample. A store on a network
filesystem is unsupported: SQLite's locking is not reliable there.

``run_usage`` holds each run's calls, tokens and cost as totals so far, written by the run as it
goes (see `vhd.annotate.ledger`), so a run killed at any moment leaves what it spent.
"""

from __future__ import annotations

import abc
import os
import socket
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import VhdError
from vhd.records import Usage
from vhd.store.reads import final_statuses


def _machine() -> str:
    """This machine, and the process-id namespace on Linux (containers share hostnames)."""
    name = socket.gethostname()
    with suppress(OSError):
        name += "/" + os.readlink("/proc/self/ns/pid")
    return name


@dataclass(frozen=True)
class LeaseOwner:
    """Who holds a lease: a run, in a process, on a machine.

    Attributes:
        run_id: The run (`Store.start_run`).
        pid: The process id.
        host: The machine (hostname, plus the pid namespace where there is one).
    """

    run_id: str
    pid: int
    host: str

    @classmethod
    def here(cls, run_id: str) -> LeaseOwner:
        """The owner for a run in this process."""
        return cls(run_id, os.getpid(), _machine())

    def gone(self) -> bool:
        """Whether this owner is certainly dead: a process of this machine that no longer exists."""
        if self.host != _machine() or self.pid == os.getpid() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # exists, owned by someone else
            return False
        return False


@dataclass
class Claim:
    """What a claim found, each list in the order asked.

    Attributes:
        claimed: Leased to the caller now: debate them.
        done: Already have a final verdict under the configuration.
        leased: Held by another live run.
    """

    claimed: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    leased: list[str] = field(default_factory=list)


class Leases(abc.ABC):
    """Sample leases and per-run usage counters."""

    path: Path

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def claim(
        self,
        owner: LeaseOwner,
        config_hash: str,
        sample_ids: Sequence[str],
        *,
        ttl: float,
        retry_unparsed: bool = False,
    ) -> Claim:
        """Lease the samples nobody else is annotating, in one transaction.

        Args:
            owner: Who takes the leases.
            config_hash: The configuration (leases and verdicts are per configuration).
            sample_ids: The samples, in order.
            ttl: Seconds the new leases last without renewal.
            retry_unparsed: Treat unparsed results as not final.

        Returns:
            Which samples were leased, are done, or are held by another run.
        """
        statuses = final_statuses(retry_unparsed)
        marks = ",".join("?" * len(statuses))
        out = Claim()
        with self._tx() as conn:
            now = time.time()
            done: set[str] = set()
            for start in range(0, len(sample_ids), 500):  # one query per 500 (a resumed run is mostly done)
                chunk = list(sample_ids[start : start + 500])
                done.update(
                    str(r[0])
                    for r in conn.execute(
                        # "+status": look samples up by id, never walk every annotation of the configuration
                        f"SELECT sample_id FROM annotations WHERE config_hash = ? AND +status IN ({marks}) "
                        f"AND sample_id IN ({','.join('?' * len(chunk))})",
                        (config_hash, *statuses, *chunk),
                    )
                )
            for sid in sample_ids:
                if sid in done:
                    out.done.append(sid)
                    continue
                row = conn.execute(
                    "SELECT run_id, pid, host, expires_at FROM leases WHERE sample_id = ? AND config_hash = ?",
                    (sid, config_hash),
                ).fetchone()
                held = row is not None and row[0] != owner.run_id and row[3] > now
                if held and not LeaseOwner(str(row[0]), int(row[1]), str(row[2])).gone():
                    out.leased.append(sid)
                    continue
                conn.execute(
                    "INSERT OR REPLACE INTO leases (sample_id, config_hash, run_id, pid, host, expires_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (sid, config_hash, owner.run_id, owner.pid, owner.host, now + ttl),
                )
                out.claimed.append(sid)
        return out

    def renew_leases(self, run_id: str, *, ttl: float) -> int:
        """Extend every lease of a run to ``ttl`` seconds from now; returns how many it holds."""
        with self._tx() as conn:
            cur = conn.execute("UPDATE leases SET expires_at = ? WHERE run_id = ?", (time.time() + ttl, run_id))
            return cur.rowcount

    def release_leases(self, run_id: str, sample_ids: Sequence[str] | None = None) -> None:
        """Give up a run's leases: all of them, or those of some samples."""
        with self._tx() as conn:
            if sample_ids is None:
                conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
            else:
                conn.executemany(
                    "DELETE FROM leases WHERE run_id = ? AND sample_id = ?", [(run_id, sid) for sid in sample_ids]
                )

    def leased_samples(self, run_id: str) -> list[str]:
        """The samples a run holds leases on, sorted."""
        rows = self._query("SELECT DISTINCT sample_id FROM leases WHERE run_id = ? ORDER BY sample_id", (run_id,))
        return [str(r[0]) for r in rows]

    def unfinished(self, config_hash: str, sample_ids: Sequence[str], *, retry_unparsed: bool = False) -> list[str]:
        """The samples, in the order given, without a final verdict under a configuration."""
        statuses = final_statuses(retry_unparsed)
        marks = ",".join("?" * len(statuses))
        final: set[str] = set()
        for start in range(0, len(sample_ids), 500):
            chunk = list(sample_ids[start : start + 500])
            ids = ",".join("?" * len(chunk))
            rows = self._query(
                f"SELECT sample_id FROM annotations WHERE config_hash = ? AND status IN ({marks}) "
                f"AND sample_id IN ({ids})",
                [config_hash, *statuses, *chunk],
            )
            final.update(str(r[0]) for r in rows)
        return [sid for sid in sample_ids if sid not in final]

    def record_usage(self, run_id: str, usage: Usage) -> None:
        """Store a run's usage so far (totals, replacing what was stored).

        Raises:
            VhdError: No such run.
        """
        with self._tx() as conn:
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise VhdError(f"run {run_id} is not in store {self.path}: call start_run first")
            conn.execute(
                "INSERT INTO run_usage (run_id, calls, prompt_tokens, completion_tokens, cost, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET calls = excluded.calls, "
                "prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, "
                "cost = excluded.cost, updated_at = excluded.updated_at",
                (run_id, usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.cost, time.time()),
            )

    def run_usage(self, run_id: str) -> Usage | None:
        """The calls, tokens and cost a run recorded as it went (None before its first call)."""
        rows = self._query(
            "SELECT calls, prompt_tokens, completion_tokens, cost FROM run_usage WHERE run_id = ?", (run_id,)
        )
        if not rows:
            return None
        r = rows[0]
        return Usage(int(r[0]), int(r[1]), int(r[2]), float(r[3]))
