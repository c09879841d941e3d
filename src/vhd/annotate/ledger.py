"""A run's ledger: what every model call cost, in the store as it happens, and the run's leases kept.

The debate reports each answered call to `Ledger.add`, which only adds to counters in memory
(no transaction on the hot path). A background thread writes the totals to the store's
``run_usage`` table every `FLUSH_INTERVAL` seconds when they changed, and renews the run's
sample leases every quarter of the lease time. A run killed at any moment (SIGKILL included)
leaves in the store every call answered more than `FLUSH_INTERVAL` seconds (plus the time of
one write) before it died; calls still in flight at that moment, at most ``concurrency``, may
have been charged by the provider and are not counted.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from types import TracebackType

from vhd.errors import StoreWriteError
from vhd.records import Usage
from vhd.store.sqlite import Store

FLUSH_INTERVAL = 0.1
"""Seconds between two writes of the usage counters (at most)."""


class Ledger:
    """Per-call usage counters and lease renewal for one run, written by a background thread.

    Args:
        store: The run's store (its methods are safe to call from another thread).
        run_id: The run.
        lease_seconds: How long the run's leases last without renewal.
        interval: Seconds between writes of the counters.

    Attributes:
        error: The first write that failed (full disk...), or None; the run should stop.
    """

    def __init__(self, store: Store, run_id: str, *, lease_seconds: float, interval: float = FLUSH_INTERVAL) -> None:
        self.store = store
        self.run_id = run_id
        self.lease_seconds = lease_seconds
        self.interval = interval
        self.error: StoreWriteError | None = None
        self._usage = Usage()
        self._written: Usage | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"vhd-ledger-{run_id[:8]}", daemon=True)

    @property
    def usage(self) -> Usage:
        """The run's calls, tokens and cost so far (a copy)."""
        with self._lock:
            return dataclasses.replace(self._usage)

    def add(self, usage: Usage) -> None:
        """Count one answered call (or several); cheap, from any thread."""
        with self._lock:
            self._usage.add(usage)

    def start(self) -> Ledger:
        """Start the background writer."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the writer and write the final totals (safe to call twice)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush()

    def __enter__(self) -> Ledger:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def flush(self) -> None:
        """Write the totals now if they changed since the last write."""
        current = self.usage
        if current == self._written:
            return
        try:
            self.store.record_usage(self.run_id, current)
        except StoreWriteError as exc:
            self.error = self.error or exc
            return
        self._written = current

    def renew(self) -> None:
        """Extend the run's leases by the lease time."""
        try:
            self.store.renew_leases(self.run_id, ttl=self.lease_seconds)
        except StoreWriteError as exc:
            self.error = self.error or exc

    def _loop(self) -> None:
        every = max(self.lease_seconds / 4, self.interval)
        renew_at = time.monotonic() + every
        while not self._stop.wait(self.interval):
            self.flush()
            if time.monotonic() >= renew_at:
                self.renew()
                renew_at = time.monotonic() + every
