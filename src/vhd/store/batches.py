"""Batch jobs sent to OpenAI-compatible batch APIs (tables ``batch_jobs``, ``batch_requests``).

`BatchJobs` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``. A run
with ``--batch-api`` records every batch it creates (its id, input file, status, output and error
files) and which request (by ``custom_id``, a hash of the request body) went into which batch, so
a run stopped while batches are processed, even for days, picks them up again instead of paying
twice.
"""

from __future__ import annotations

import abc
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

_IN = 500
"""Most ids in one ``IN (...)`` list (SQLite's default limit on parameters is higher)."""


@dataclass(frozen=True)
class BatchJob:
    """One batch as the store knows it.

    Attributes:
        batch_id: The endpoint's batch id.
        run_key: What the batch belongs to (the run's configuration hash).
        stage: Which requests it holds, in words (e.g. ``judge``, ``mixed``).
        input_file_id: The uploaded JSONL file.
        status: The endpoint's last reported status (``validating`` ... ``completed``).
        output_file_id: The results file, once there is one.
        error_file_id: The file of failed requests, once there is one.
        requests: Requests in the batch.
    """

    batch_id: str
    run_key: str
    stage: str
    input_file_id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    requests: int = 0


class BatchJobs(abc.ABC):
    """Reads and writes of the store's batch jobs."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def record_batch(self, job: BatchJob, custom_ids: Sequence[str]) -> None:
        """Remember a batch just created and the requests it holds (one transaction)."""
        now = time.time()
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO batch_jobs (batch_id, run_key, stage, input_file_id, status, "
                "output_file_id, error_file_id, requests, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job.batch_id,
                    job.run_key,
                    job.stage,
                    job.input_file_id,
                    job.status,
                    job.output_file_id,
                    job.error_file_id,
                    len(custom_ids),
                    now,
                    now,
                ),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO batch_requests (custom_id, batch_id) VALUES (?, ?)",
                [(cid, job.batch_id) for cid in custom_ids],
            )

    def update_batch(
        self, batch_id: str, status: str, output_file_id: str | None, error_file_id: str | None, *, collected: bool
    ) -> None:
        """Record a batch's new status and files (``collected``: its results were read)."""
        now = time.time()
        with self._tx() as conn:
            conn.execute(
                "UPDATE batch_jobs SET status = ?, output_file_id = COALESCE(?, output_file_id), "
                "error_file_id = COALESCE(?, error_file_id), updated_at = ?, "
                "collected_at = CASE WHEN ? THEN ? ELSE collected_at END WHERE batch_id = ?",
                (status, output_file_id, error_file_id, now, int(collected), now, batch_id),
            )

    def batches_for(self, custom_ids: Sequence[str], *, usable: Sequence[str]) -> dict[str, str]:
        """For each request already sent, its newest batch whose status is in ``usable``."""
        found: dict[str, str] = {}
        marks_status = ", ".join("?" * len(usable))
        ids = list(dict.fromkeys(custom_ids))
        for start in range(0, len(ids), _IN):
            chunk = ids[start : start + _IN]
            marks = ", ".join("?" * len(chunk))
            rows = self._query(
                f"SELECT r.custom_id, r.batch_id FROM batch_requests r JOIN batch_jobs j ON j.batch_id = r.batch_id "
                f"WHERE r.custom_id IN ({marks}) AND j.status IN ({marks_status}) ORDER BY j.created_at",
                [*chunk, *usable],
            )
            found.update({str(r[0]): str(r[1]) for r in rows})
        return found

    def batch_jobs(self, run_key: str | None = None) -> list[BatchJob]:
        """Every recorded batch (of one run key when given), oldest first."""
        where, params = ("WHERE run_key = ?", [run_key]) if run_key is not None else ("", [])
        rows = self._query(
            "SELECT batch_id, run_key, stage, input_file_id, status, output_file_id, error_file_id, requests "
            f"FROM batch_jobs {where} ORDER BY created_at",
            params,
        )
        return [BatchJob(*tuple(r)) for r in rows]
