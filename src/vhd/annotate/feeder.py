"""The feeding half of an annotation run: discovery to leased samples on a queue.

`Feeder` takes what `vhd.media.discover.iter_discover` yields, `LOOKUP_BATCH` inputs at a time:
it hashes them through the store's stat index (`vhd.media.ids`; a file whose ``stat`` is
unchanged is not read again), counts out repeated, excluded and already-final samples, and leases
the rest to the run a claim batch at a time (`vhd.store.leases`) as the workers' queue drains, so a
run holds leases on at most two claim batches plus the samples in flight. Skipped inputs go to the
store (the summary keeps counts and the first `SKIP_REASONS_KEPT` reasons). The workers that debate
and commit the queued samples are `vhd.annotate.loop`'s, which builds on this class.

The quick path of a resumed run: one query a batch (`vhd.store.statindex.StatIndex.known_files`,
on the stat index alone, in path order) says which files are *settled*: unchanged since hashed,
already final under this configuration, and the only path of the stat index with their bytes.
Such a file is counted done without a search of the annotations by sample id and without
entering the on-disk set of sample ids met (``seen``), the two main costs of a resume before.
The counts stay those of the slow path, because a second file with the same bytes is still
found: one met before it would have made its bytes shared in the index (read in an earlier batch)
or is in the same batch (then the file takes the slow path); one met after it takes the slow path
and, finding its id new to ``seen``, asks `Feeder.settled_before` whether a settled file of an
earlier batch held those bytes.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.annotate.summary import RunSummary
from vhd.boundary import ItemFailure, guarded
from vhd.errors import MediaError, StoreWriteError
from vhd.fileio import FileStat, display_path, file_stat
from vhd.media.discover import PlainFile, Skipped
from vhd.progress import ProgressFn, no_progress
from vhd.records import MediaItem

if TYPE_CHECKING:
    from vhd.annotate.plan import Plan
    from vhd.media.ids import PlannedId
    from vhd.store.sqlite import Store
    from vhd.store.statindex import ScratchSet

SKIP_REASONS_KEPT = 1000
"""Skipped inputs whose reasons the summary keeps (all of them are in the store)."""

LOOKUP_BATCH = 512
"""Inputs stat-ed, looked up in the stat index and checked for a final verdict at once (a resumed
run's cost is mostly these lookups: big batches make it cheap)."""

CLAIM_BATCH = 64
"""Most samples claimed in one store transaction (fewer with low concurrency: twice its value,
at least 8), so runs sharing a store share the work."""


@dataclass(frozen=True)
class RunState:
    """What a run hands its feeder besides the plan: the open store, the summary, and the sets it keeps.

    Attributes:
        db: The open store.
        summary: The run's summary, counted into as samples go.
        run_id: The store's id of the run.
        on_event: Where one-line notices go.
        excluded: Sample id to the reason it is left out (removed, quarantined, a duplicate).
        seen: The on-disk set of sample ids met so far.
        paths_seen: The on-disk set of resolved paths discovery met.
    """

    db: Store
    summary: RunSummary
    run_id: str
    on_event: Callable[[str], None]
    excluded: dict[str, str]
    seen: ScratchSet
    paths_seen: ScratchSet


class Feeder:
    """Discovery, lookups and leases of one run, and the state its workers share."""

    def __init__(self, plan: Plan, state: RunState) -> None:
        from vhd.store.leases import LeaseOwner

        self.db = state.db
        self.settings = plan.settings
        self.summary = state.summary
        self.config_hash = plan.config_hash
        self.run_id = state.run_id
        self.owner = LeaseOwner.here(state.run_id)
        self.on_event = state.on_event
        self.retry_unparsed = plan.options.retry_unparsed
        self.lease_seconds = plan.config.lease_seconds
        self.excluded = state.excluded
        self.seen = state.seen  # sample ids met so far
        self.paths_seen = state.paths_seen  # resolved paths discovery met
        self.settled = 0  # files counted done on the quick path, their ids not in `seen`
        self.rehash = plan.options.rehash
        self.leased_ids: list[str] = []
        self.stopping = False
        self.store_error: StoreWriteError | None = None
        self.on_progress: ProgressFn = no_progress
        self.total = 0
        self.consumed = 0
        self.in_flight = 0
        self.room = asyncio.Event()

    def stop(self, message: str | None) -> None:
        """Take no new sample; ``message`` (if any) goes to the user once."""
        if not self.stopping:
            self.stopping = True
            self.room.set()
            if message:
                self.on_event(message)

    def fail_store(self, exc: StoreWriteError) -> None:
        """The store cannot be written: stop at once, quietly (the run ends with one line)."""
        self.store_error = self.store_error or exc
        self.stop(None)

    def report(self) -> None:
        """Send the run's counts to the progress callback."""
        s = self.summary
        info = f"tok {s.usage.total_tokens:,}  refusals {s.refused}  unparsed {s.unparsed}  errors {s.errors}"
        self.on_progress(s.already_done + s.annotated + s.errors + s.leased, self.total, info=info)

    def finish(self) -> None:
        """Count the samples other runs held that are still without a final verdict."""
        if self.leased_ids:
            unfinished = self.db.unfinished(self.config_hash, self.leased_ids, retry_unparsed=self.retry_unparsed)
            self.summary.leased_unfinished = len(unfinished)

    def next_chunk(self, items: Iterator[MediaItem | PlainFile | Skipped], batch: int) -> list[MediaItem | PlainFile]:
        """The next ``batch`` samples discovery yields; skipped inputs on the way go to the store."""
        chunk: list[MediaItem | PlainFile] = []
        for found in items:
            if isinstance(found, Skipped):
                self.skip(found.path, found.reason, row_left_out=found.row_left_out)
                continue
            chunk.append(found)
            if len(chunk) >= batch:
                break
        self.total += len(chunk)
        return chunk

    async def feed(
        self,
        items: Iterator[MediaItem | PlainFile | Skipped],
        queue: asyncio.Queue[tuple[MediaItem, str] | None],
        batch: int,
        workers: int,
    ) -> None:
        """Sort the inputs out `LOOKUP_BATCH` at a time, lease the rest a claim batch at a time; then end the workers.

        Hashing (through the stat index) and the check for a final verdict take big batches, so a
        resumed run costs a few queries per 512 inputs; leases are taken a claim batch at a time as
        the queue drains, so a run holds leases on at most two claim batches plus those in flight.
        """
        pending: deque[tuple[MediaItem, str]] = deque()  # not done, not yet leased: at most one lookup batch
        try:
            while True:
                while queue.qsize() >= batch and not self.stopping:
                    self.room.clear()
                    await self.room.wait()
                if self.stopping:
                    self.summary.remaining += len(pending)
                    return
                if not pending:
                    chunk = self.next_chunk(items, max(batch, LOOKUP_BATCH))
                    if not chunk:
                        return
                    pending.extend(await self.prepare(chunk))
                    self.consumed += len(chunk)
                    self.report()
                    continue
                sub = [pending.popleft() for _ in range(min(batch, len(pending)))]
                for entry in self.lease(sub):
                    queue.put_nowait(entry)
                self.report()
        except StoreWriteError as exc:
            self.fail_store(exc)
        finally:
            for _ in range(workers):
                queue.put_nowait(None)

    async def prepare(self, chunk: Sequence[MediaItem | PlainFile]) -> list[tuple[MediaItem, str]]:
        """Ids of a lookup batch (through the stat index), counted out when repeated, excluded or done.

        Returns the samples that still need a verdict, in order (not leased yet).
        """
        from vhd.media.ids import resolve_id, stat_items

        index = _VerdictIndex(self.db, self.config_hash, self.retry_unparsed)
        planned = stat_items(chunk, index, rehash=self.rehash)  # stat calls and one lookup: quick
        to_read = [p.needs_read for p in planned]
        reads = [p for p, read in zip(planned, to_read, strict=True) if read]  # only files whose stat changed
        read_ids = await asyncio.gather(*(asyncio.to_thread(guarded, resolve_id, p) for p in reads))  # in threads
        self.db.remember_hashes([entry for p in reads for entry in p.new])
        settled, excluded = index.settled, self.excluded
        read_now = {sid for sid in read_ids if isinstance(sid, str)} if settled else set()
        read_iter = iter(read_ids)
        batch_paths = functools.cache(lambda: _paths_of(planned))  # built only if `settled_before` asks
        fresh: list[tuple[MediaItem | PlainFile, str]] = []
        for item, p, read in zip(chunk, planned, to_read, strict=True):
            known = p.known[0] if settled and not p.folder and p.stats and p.stats[0].path in settled else None
            if read:
                sid = next(read_iter)
            elif known is not None:  # a settled file
                sid = known
                if sid not in read_now and sid not in excluded:  # done; no earlier input had these bytes
                    self.settled += 1
                    self.summary.found += 1
                    self.summary.already_done += 1
                    continue
            else:
                sid = guarded(resolve_id, p)
            if isinstance(sid, MediaError | ItemFailure):
                self.skip(item.path, str(sid))
            elif self.repeated(sid, batch_paths):
                self.summary.duplicates += 1
            elif sid in excluded:
                self.summary.excluded += 1
                self.keep_reason(display_path(item.path), excluded[sid])
            else:
                fresh.append((item, sid))
        done = self.db.done_ids(self.config_hash, [sid for _, sid in fresh], retry_unparsed=self.retry_unparsed)
        self.summary.found += len(done)
        self.summary.already_done += len(done)
        return [(item if isinstance(item, MediaItem) else item.item(), sid) for item, sid in fresh if sid not in done]

    def repeated(self, sid: str, batch_paths: Callable[[], set[str]]) -> bool:
        """Whether an earlier input had this id (the id is added to ``seen``); ``batch_paths``: the batch's paths."""
        if not self.seen.add(sid):
            return True
        return self.settled > 0 and self.settled_before(sid, batch_paths())

    def settled_before(self, sid: str, batch_paths: set[str]) -> bool:
        """Whether a file of an earlier batch held these bytes and took the quick path (its id is not in ``seen``).

        Asked only for an id new to ``seen`` once some file took the quick path. Such a file is an
        entry of the stat index with these bytes, met by discovery in an earlier batch, and still
        vouched for (a file that took the slow path instead put its id in ``seen``).
        """
        for other in self.db.paths_with_hash(sid):
            if other in batch_paths or os.path.realpath(other) not in self.paths_seen:
                continue  # not met, or met in this batch (then it took the slow path)
            try:
                now = file_stat(other)
            except OSError:
                continue
            if self.db.known_hashes([now]).get(now.path) == sid:
                return True
        return False

    def lease(self, fresh: Sequence[tuple[MediaItem, str]]) -> list[tuple[MediaItem, str]]:
        """Lease a claim batch in one transaction: the samples to debate; counts the others."""
        claim = self.db.claim(
            self.owner,
            self.config_hash,
            [sid for _, sid in fresh],
            ttl=self.lease_seconds,
            retry_unparsed=self.retry_unparsed,
        )
        done, leased = set(claim.done), set(claim.leased)
        ready = []
        for item, sid in fresh:
            if sid in done:  # finished by another run since `prepare` looked
                self.summary.found += 1
                self.summary.already_done += 1
            elif sid in leased:
                self.summary.found += 1
                self.summary.leased += 1
                self.leased_ids.append(sid)
            else:
                ready.append((item, sid))
        return ready

    def keep_reason(self, path: str, reason: str) -> None:
        """Keep a skip reason in the summary, up to `SKIP_REASONS_KEPT` (the store has them all)."""
        if len(self.summary.skip_reasons) < SKIP_REASONS_KEPT:
            self.summary.skip_reasons.append((path, reason))

    def skip(self, item_path: str | Path, reason: str, *, row_left_out: bool = False) -> None:
        """An input that cannot be used: counted, its reason in the store."""
        self.summary.skipped += 1
        self.summary.rows_left_out += row_left_out
        path, reason = display_path(item_path), display_path(reason)
        self.keep_reason(path, reason)
        self.db.record_skip(self.run_id, path, reason)


def _paths_of(planned: Sequence[PlannedId]) -> set[str]:
    """The stat-index paths of a batch's files."""
    return {st.path for p in planned for st in p.stats}


class _VerdictIndex:
    """The store's stat index as a `vhd.media.ids.HashIndex` that also keeps a batch's settled paths.

    `vhd.media.ids.stat_items` asks it once a batch; `Feeder.prepare` reads ``settled`` after
    (see `vhd.store.statindex.StatIndex.known_files`).
    """

    def __init__(self, db: Store, config_hash: str, retry_unparsed: bool) -> None:
        self.db, self.config_hash, self.retry_unparsed = db, config_hash, retry_unparsed
        self.settled: set[str] = set()

    def known_hashes(self, stats: Sequence[FileStat]) -> dict[str, str]:
        """The vouched hashes of the files; their settled paths go to ``settled``."""
        known = self.db.known_files(stats, self.config_hash, retry_unparsed=self.retry_unparsed)
        self.settled = known.settled
        return known.hashes

    def remember_hashes(self, entries: Sequence[tuple[FileStat, str]], *, hashed_at_ns: int | None = None) -> None:
        """Record files just read (`vhd.store.statindex.StatIndex.remember_hashes`)."""
        self.db.remember_hashes(entries, hashed_at_ns=hashed_at_ns)
