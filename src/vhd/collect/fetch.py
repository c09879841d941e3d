r"""``vhd fetch``: download a URL list into a folder of content-addressed media, resumably.

Every URL is untrusted: only http(s), no private or loopback targets (unless allowed), redirects
checked hop by hop, content sniffed by magic bytes (only images and videos are kept), sizes
capped mid-stream. Files land atomically as ``OUT/<sha256>.<ext>``; nothing is ever written
outside ``OUT`` (names come from hashes, never from URLs or headers). Each outcome is appended
to ``OUT/fetch-log.jsonl`` as it happens, so a killed run resumes where it stopped, and a report
lists every dead link, HTTP error and rejected file with its reason: the link-liveness check a
published URL list needs from time to time (``recheck=True`` fetches everything again).

Example:
    >>> from vhd.collect import fetch
    >>> report = fetch("urls.csv", "media/", store="run.db")  # doctest: +SKIP
    >>> print("\n".join(report.describe()))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vhd.aio import run_sync
from vhd.boundary import item_boundary
from vhd.collect.blocklist import BlockList
from vhd.collect.fetch_settings import FetchFailure, FetchOutcome, FetchReport, FetchSettings
from vhd.collect.fetchlog import (
    QUARANTINE_DIR,
    REPORT_NAME,
    FetchLog,
    clean_partial,
    folder_lock,
    write_manifest,
    write_report,
)
from vhd.collect.urls import UrlList, check_url, read_url_list
from vhd.errors import VhdError
from vhd.media.hashing import is_sha256_hex
from vhd.records import Kind, UrlRow

if TYPE_CHECKING:
    from vhd.collect.download import Downloaded

OnOutcome = Callable[[FetchOutcome], None]

__all__ = ["FetchReport", "OnOutcome", "fetch", "fetch_async", "interleave_by_host"]


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def interleave_by_host(rows: Sequence[tuple[int, UrlRow]]) -> list[tuple[int, UrlRow]]:
    """Order rows round-robin over their hosts, so one big host does not hold every worker."""
    groups: dict[str, list[tuple[int, UrlRow]]] = {}
    for item in rows:
        groups.setdefault(_host(item[1].url), []).append(item)
    out: list[tuple[int, UrlRow]] = []
    queues = [list(reversed(g)) for g in groups.values()]
    while queues:
        out.extend(q.pop() for q in queues)
        queues = [q for q in queues if q]
    return out


class _Job:
    """One fetch run over an output folder (the folder lock is held by the caller)."""

    def __init__(
        self,
        out: Path,
        settings: FetchSettings,
        blocks: BlockList | None,
        quarantine: Path,
        store: Any,
        on_outcome: OnOutcome | None,
    ) -> None:
        from vhd.collect.register import Registrar

        self.out = out
        self.settings = settings
        self.blocks = blocks
        self.quarantine = quarantine
        self.on_outcome = on_outcome
        self.registrar = Registrar(store, settings) if store is not None else None
        self.algorithms = blocks.exact_algorithms if blocks is not None else ["sha256"]
        self.partial = clean_partial(out)
        self.log = FetchLog(out)
        self.latest = self.log.read()

    def _outcome(self, row: UrlRow, **fields: Any) -> FetchOutcome:
        return FetchOutcome(
            url=row.url,
            line=row.line,
            keyword=row.keyword,
            source=row.source,
            id=row.id,
            meta=dict(row.meta),
            fetched_at=time.time(),
            **fields,
        )

    def _record(self, outcome: FetchOutcome) -> FetchOutcome:
        self.log.append(outcome)
        self.latest[outcome.url] = outcome
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        return outcome

    def _done_before(self, row: UrlRow) -> FetchOutcome | None:
        prev = self.latest.get(row.url)
        if self.settings.recheck or prev is None or prev.status != "ok" or not prev.path:
            return None
        try:
            if (self.out / prev.path).stat().st_size != prev.bytes:
                return None
        except OSError:
            return None
        return replace(prev, line=row.line, this_run=False)

    async def run(self, rows: Sequence[UrlRow]) -> list[FetchOutcome]:
        import httpx

        from vhd.collect.addresses import AddressGuard, parse_networks
        from vhd.collect.download import refuse_bad_redirects
        from vhd.collect.netguard import guarded_clients

        results: list[FetchOutcome | None] = [None] * len(rows)
        todo: list[tuple[int, UrlRow]] = []
        unregistered: list[tuple[int, UrlRow, FetchOutcome]] = []
        for index, row in enumerate(rows):
            problem = check_url(row.url)
            if problem is not None:  # rows handed over directly, not read by read_url_list
                results[index] = self._record(self._outcome(row, status="invalid", error="bad-row", reason=problem))
                continue
            prev = self._done_before(row)
            if prev is None:
                todo.append((index, row))
            elif self.registrar is not None and prev.sha256 and not self.registrar.has(prev.sha256):
                unregistered.append((index, row, prev))
            else:
                results[index] = prev
        registered = await asyncio.gather(*(self._register(row, prev) for _, row, prev in unregistered))
        for (index, _, _), outcome in zip(unregistered, registered, strict=True):
            results[index] = outcome
        queue = deque(interleave_by_host(todo))
        hosts: dict[str, asyncio.Semaphore] = {}
        s = self.settings
        guard = AddressGuard(allow_private=s.allow_private, allow_networks=parse_networks(s.allow_networks))
        n_workers = min(s.concurrency, len(todo))

        async def worker(client: httpx.AsyncClient) -> None:
            while queue:
                index, row = queue.popleft()
                semaphore = hosts.setdefault(_host(row.url), asyncio.Semaphore(s.per_host))
                async with semaphore:
                    results[index] = self._record(await self._fetch_one(client, row))

        try:
            async with contextlib.AsyncExitStack() as stack:
                clients = [
                    await stack.enter_async_context(c)
                    for c in guarded_clients(guard, s, n_workers, [refuse_bad_redirects])
                ]
                async with asyncio.TaskGroup() as group:
                    for i in range(n_workers):
                        group.create_task(worker(clients[i % len(clients)]))
        except* VhdError as fatal:  # disk full, permissions: the run stops with that one-line error
            raise fatal.exceptions[0] from None
        return [r for r in results if r is not None]

    async def _fetch_one(self, client: Any, row: UrlRow) -> FetchOutcome:
        from vhd.collect.download import download

        with item_boundary(row) as b:  # one row's surprise never ends the run
            try:
                got = await download(client, row, self.settings, self.partial, self.algorithms)
            except FetchFailure as f:
                return self._outcome(
                    row,
                    status=f.status,
                    error=f.error,
                    reason=f.reason,
                    retryable=f.retryable,
                    http_status=f.http_status,
                    attempts=f.attempts,
                    final_url=f.final_url,
                )
        if b.failure is not None:
            reason = f"{b.failure.reason} (please report it)"
            return self._outcome(row, status="failed", error="unexpected", reason=reason, final_url=row.url)
        try:
            return await self._finish(row, got)
        except OSError as exc:
            problem = exc.strerror or str(exc)
            raise VhdError(f"cannot write into {self.out}: {problem}; free space or fix permissions") from exc
        finally:
            got.tmp.unlink(missing_ok=True)

    async def _finish(self, row: UrlRow, got: Downloaded) -> FetchOutcome:
        sha = got.digests.sha256
        outcome = self._outcome(
            row,
            http_status=got.http_status,
            attempts=got.attempts,
            kind=got.media.kind.value,
            format=got.media.name,
            bytes=got.size,
            sha256=sha,
            final_url=got.final_url,
            content_type=got.content_type,
        )
        prev = self.latest.get(row.url)
        if prev is not None and prev.status == "ok" and prev.sha256 and prev.sha256 != sha:
            outcome.previous_sha256 = prev.sha256
        if row.id and is_sha256_hex(row.id) and row.id.lower() != sha:
            outcome.status, outcome.error = "rejected", "hash-mismatch"
            outcome.reason = f"content hash {sha[:12]}... differs from the list's id {row.id[:12]}... (changed)"
            return outcome
        if self.blocks is not None:
            hit = self.blocks.match_digests(got.digests)
            if hit is None and self.blocks.has_pdq and got.media.kind is Kind.IMAGE:
                hit = await asyncio.to_thread(self.blocks.match, got.tmp, digests=got.digests)
            if hit is not None:
                self.quarantine.mkdir(parents=True, exist_ok=True)
                target = self.quarantine / f"{sha}.blocked"
                os.replace(got.tmp, target)
                outcome.status, outcome.error, outcome.reason = "blocked", "blocklist", hit.describe()
                outcome.path = os.path.relpath(target, self.out)
                return outcome
        target = self.out / f"{sha}{got.media.ext}"
        if target.is_symlink() or not target.is_file():
            os.replace(got.tmp, target)
        outcome.path = target.name
        if self.registrar is not None:
            return await self._register(row, outcome)
        return outcome

    async def _register(self, row: UrlRow, outcome: FetchOutcome) -> FetchOutcome:
        if self.registrar is None:
            return outcome
        problem = await self.registrar.register(self.out / (outcome.path or ""), row, outcome)
        if problem is None:
            return outcome
        shared = any(
            o.sha256 == outcome.sha256 and o.status == "ok" and o.url != outcome.url for o in self.latest.values()
        )
        if not shared:
            (self.out / (outcome.path or "")).unlink(missing_ok=True)
        bad = replace(outcome, status="rejected", error="invalid-media", reason=problem, path=None, this_run=True)
        return self._record(bad) if not outcome.this_run else bad


async def fetch_async(
    urls: str | Path | UrlList | Sequence[UrlRow],
    out: str | Path,
    *,
    settings: FetchSettings | None = None,
    store: Any = None,
    block_list: str | Path | BlockList | None = None,
    quarantine: str | Path | None = None,
    report: str | Path | None = None,
    on_outcome: OnOutcome | None = None,
) -> FetchReport:
    """Fetch a URL list into ``out`` (see the module docs); the async form of `fetch`.

    Args:
        urls: A URL-list file, a `UrlList`, or rows.
        out: The output folder (created when missing).
        settings: Limits, concurrency, retries, the address policy; `FetchSettings()` by default.
        store: A `vhd.store.Store` or the path of one: fetched files are validated with
            `vhd.media.load_sample` and registered as samples (invalid ones are rejected).
        block_list: A `BlockList` or the path of one: matching files are quarantined.
        quarantine: Where blocked files go (default ``OUT/.quarantine``).
        report: Also write the report here (``.json`` for JSON, else CSV); ``OUT/fetch-report.csv``
            is always written.
        on_outcome: Called with every outcome of this run as it happens.

    Returns:
        The report.

    Raises:
        ConfigError: Unreadable list or block list, or another fetch writing to ``out``.
        VhdError: The output folder cannot be written.
        MissingDependencyError: httpx (``vhd[collect]``), or PyAV for a video with a store.
    """
    from vhd.errors import require

    require("httpx", "collect")
    start = time.perf_counter()
    settings = settings or FetchSettings()
    if isinstance(urls, UrlList):
        url_list = urls
    elif isinstance(urls, str | Path):
        url_list = read_url_list(urls)
    else:
        url_list = UrlList(rows=list(urls))
    blocks = BlockList.load(block_list) if isinstance(block_list, str | Path) else block_list
    out_dir = Path(os.path.abspath(out))
    quarantine_dir = Path(os.path.abspath(quarantine)) if quarantine else out_dir / QUARANTINE_DIR
    own_store = None
    if isinstance(store, str | Path):
        from vhd.store import Store

        store = own_store = Store(store, create=True)
    result = FetchReport(out=out_dir)
    try:
        with folder_lock(out_dir):
            job = _Job(out_dir, settings, blocks, quarantine_dir, store, on_outcome)
            fetched: list[FetchOutcome] = []
            try:
                fetched = await job.run(url_list.rows)
            finally:
                job.log.close()
                with contextlib.suppress(OSError):
                    job.partial.rmdir()
                result.manifest_path = write_manifest(out_dir, job.latest)
            problems = [
                FetchOutcome(url=p.url or "", line=p.line, status=p.status, error="bad-row", reason=p.reason)
                for p in url_list.problems
            ]
            result.outcomes = sorted(fetched + problems, key=lambda o: o.line)
            result.elapsed_s = time.perf_counter() - start
            result.report_path = write_report(result.outcomes, out_dir / REPORT_NAME)
            if report is not None:
                result.report_path = write_report(result.outcomes, Path(report))
    finally:
        if own_store is not None:
            own_store.close()
    return result


def fetch(urls: str | Path | UrlList | Sequence[UrlRow], out: str | Path, **options: Any) -> FetchReport:
    """Fetch a URL list into a folder; see `fetch_async` for the arguments.

    Example:
        >>> report = fetch("urls.csv", "media/", settings=FetchSettings(per_host=8))  # doctest: +SKIP
    """
    return run_sync(fetch_async(urls, out, **options))
