"""Register media files as samples in a store, validated exactly as the annotator validates them.

Every file (or folder, or manifest row) found by `vhd.media.discover.discover` is hashed (its id
is the sha256 of its bytes), checked against a hash block list when one is given, then decoded
and validated by `vhd.media.load_sample` (size and pixel limits, truncation, video frames) and
upserted. Files that fail are listed with their reason and skipped; files on the block list are
logged in the store's quarantine table (and moved away when asked) without ever being decoded
for a model or registered.

Re-running is cheap and safe: a file whose ``stat`` is unchanged since it was last hashed is not
read again (the store's stat index; ``rehash`` reads every file), a file whose sample is already
stored under the same path is not decoded again, each sample is written in its own transaction,
and samples removed on request (`vhd remove`) are never brought back.

Example:
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     result = ingest(["crawl/"], store, source="real", keyword_from_folder=True)
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vhd.boundary import ItemFailure, guarded, item_boundary
from vhd.curate.parallel import thread_map
from vhd.errors import ConfigError, MediaError
from vhd.fileio import display_path
from vhd.progress import ProgressFn, renamed_on_progress
from vhd.records import Kind, MediaItem, Source
from vhd.store.sqlite import Store, StoreLike, using_store


@dataclass(frozen=True)
class IngestDefaults:
    """Values given on the command line for fields a manifest row leaves empty.

    Attributes:
        source: ``real`` or ``synthetic`` (read leniently, like a manifest's column).
        keyword: Keyword for every sample.
        keyword_from_folder: Take the keyword from the name of each file's folder.
        generator: Generative model of synthetic samples.
        prompt: Prompt that made synthetic samples (kept in the sample's metadata).
    """

    source: Source | None = None
    keyword: str | None = None
    keyword_from_folder: bool = False
    generator: str | None = None
    prompt: str | None = None

    def __post_init__(self) -> None:
        try:
            source = Source.parse(self.source)
        except ValueError:
            raise ConfigError(f"unknown source {self.source!r}: choose {' or '.join(Source)}") from None
        if source is Source.REAL and (self.generator or self.prompt):
            raise ConfigError(
                "--generator and --prompt describe synthetic samples: drop them or use --source synthetic"
            )
        if source is None and (self.generator or self.prompt):
            source = Source.SYNTHETIC
        object.__setattr__(self, "source", source)

    def apply(self, item: MediaItem) -> MediaItem:
        """Fill the item's empty fields from these defaults."""
        keyword = item.keyword or self.keyword
        if keyword is None and self.keyword_from_folder:
            keyword = Path(item.path).parent.name or None
        meta = dict(item.meta)
        if self.prompt and "prompt" not in meta:
            meta["prompt"] = self.prompt
        return replace(
            item,
            source=item.source or self.source,
            keyword=keyword,
            generator=item.generator or self.generator,
            meta=meta,
        )


LISTED = 100
"""Ids and ``(path, reason)`` pairs an `IngestResult` keeps per kind; the rest are counted."""
KINDS = ("added", "updated", "unchanged", "invalid", "blocked", "refused")


@dataclass
class IngestResult:
    """What `ingest` did, in memory that does not grow with the number of files.

    Every outcome is counted in ``counts``; the lists keep only the first ``listed`` entries of
    each kind (`LISTED`), so ingesting a million files holds a few hundred ids, not a million.
    The full record is in the store: samples (added, updated, unchanged) in its samples table,
    invalid files with their reason in its skips table (`Store.skips`, run id None), blocked
    files in its quarantine table and refused ones in its removals table.

    Attributes:
        added: Ids of samples new to the store (the first ``listed``).
        updated: Ids of samples already stored under another path or with missing fields.
        unchanged: Ids of samples already stored under the same path (not decoded again).
        invalid: ``(path, reason)`` of files skipped as unreadable or invalid.
        blocked: ``(path, reason)`` of files on the block list (quarantined).
        refused: ``(path, reason)`` of files whose sample was removed on request earlier.
        counts: How many of each kind, keyed by the attribute names above.
        rows_left_out: Of the invalid entries, manifest rows that could not be read at all
            (malformed, a NUL byte, JSON nested too deep...): the run's exit code is 1.
        listed: How many entries each list keeps.
        elapsed_s: Wall time.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)
    blocked: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    rows_left_out: int = 0
    listed: int = LISTED
    elapsed_s: float = 0.0

    def note(self, kind: str, entry: Any) -> None:
        """Count one outcome of ``kind`` and keep it when its list is not full."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        kept: list[Any] = getattr(self, kind)
        if len(kept) < self.listed:
            kept.append(entry)

    def count(self, kind: str) -> int:
        """How many outcomes of ``kind`` (``added``, ``invalid``, ...) there were."""
        return self.counts.get(kind, 0)

    @property
    def registered(self) -> int:
        """Samples now in the store from these inputs."""
        return self.count("added") + self.count("updated") + self.count("unchanged")

    @property
    def problems(self) -> int:
        """Files that were invalid or blocked."""
        return self.count("invalid") + self.count("blocked")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary: counts, and the first ``listed`` problem files of each kind."""
        return {
            "added": self.count("added"),
            "updated": self.count("updated"),
            "unchanged": self.count("unchanged"),
            "invalid": [{"path": p, "reason": r} for p, r in self.invalid],
            "blocked": [{"path": p, "reason": r} for p, r in self.blocked],
            "refused": [{"path": p, "reason": r} for p, r in self.refused],
            "counts": dict(self.counts),
            "rows_left_out": self.rows_left_out,
            "listed": self.listed,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def _content_id(item: MediaItem, blocks: Any, store: Store, rehash: bool) -> tuple[str, str | None]:
    """Return the item's sample id and, when a block list is given, why it is blocked.

    Without a block list the id comes through the store's stat index (an unchanged file is not
    read); a block list needs every file's digests, so each file is read.
    """
    from vhd.media.ids import sample_ids
    from vhd.media.load import sample_id

    if blocks is None:
        ident = sample_ids([item], store, rehash=rehash)[0]
        if isinstance(ident, MediaError):
            raise ident
        return ident, None
    from vhd.collect.blocklist import file_digests

    path = Path(item.path)
    single = not (item.is_frame_folder or path.is_dir())
    files = [path] if single else _frame_files(path)
    ident = ""
    for f in files:
        try:
            digests = file_digests(f, blocks.exact_algorithms)
            hit = blocks.match(f, digests=digests)
        except OSError as exc:
            raise MediaError(f"cannot read file ({exc.strerror})") from exc
        ident = digests.sha256 if single else ident
        if hit is not None:
            return ident or sample_id(item), hit.describe()
    return ident or sample_id(item), None


def _frame_files(path: Path) -> list[Path]:
    from vhd.media.discover import frame_folder_frames

    frames = frame_folder_frames(path)
    if frames is None:
        raise MediaError("folder is not (or no longer) a frame folder of <stem>_<k:04d> images")
    return frames


def _quarantine(store: Store, item: MediaItem, ident: str, reason: str, folder: Path | None) -> None:
    from vhd.store.curation import record_quarantine, record_removal, removed_at

    moved = None
    if folder is not None and Path(item.path).is_file():
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{ident}.blocked"
        shutil.move(os.fspath(item.path), target)
        moved = str(target)
    record_quarantine(store, ident, display_path(item.path), reason, moved)
    if store.get_sample(ident) is not None and removed_at(store, ident) is None:
        record_removal(store, ident, display_path(item.path), reason, "block list", [])


@dataclass
class _Checked:
    item: MediaItem
    ident: str
    status: str  # ok | unchanged | blocked | invalid
    reason: str = ""
    loaded: Any = None


def _record(store: Store, checked: _Checked, result: IngestResult, folder: Path | None) -> None:
    """Write one checked item's outcome to the store and the result (main thread only)."""
    from vhd.store.curation import removed_at

    path = display_path(checked.item.path)
    when = removed_at(store, checked.ident) if checked.ident else None
    if checked.status == "blocked":
        _quarantine(store, checked.item, checked.ident, checked.reason, folder)
        result.note("blocked", (path, checked.reason))
    elif when is not None:
        stamp = time.strftime("%Y-%m-%d", time.gmtime(when))
        result.note("refused", (path, f"sample removed from the store on {stamp}; not ingested again"))
    elif checked.status == "unchanged":
        result.note("unchanged", checked.ident)
    elif checked.status == "invalid":
        store.record_skip(None, path, f"ingest: {checked.reason}")
        result.note("invalid", (path, checked.reason))
    else:
        sample = checked.loaded.sample
        new = store.get_sample(sample.id) is None
        store.upsert_sample(sample)
        result.note("added" if new else "updated", sample.id)


@renamed_on_progress
def ingest(
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    store: StoreLike,
    *,
    defaults: IngestDefaults | None = None,
    block_list: Any = None,
    quarantine_dir: str | os.PathLike[str] | None = None,
    frame_folders: bool = False,
    settings: Any = None,
    jobs: int = 2,
    progress: ProgressFn | None = None,
    allow_outside_paths: bool = False,
    rehash: bool = False,
    listed: int = LISTED,
    anchors: Any = None,
) -> IngestResult:
    """Register files, folders and manifests as samples of a store.

    Args:
        inputs: Media files, folders (recursive) and manifests.
        store: The store to write to: an open `Store`, or its file (created when missing).
        defaults: Source, keyword, generator and prompt for fields the inputs leave empty.
        block_list: A `vhd.collect.blocklist.BlockList`, or the path of one.
        quarantine_dir: Move blocked files here as ``<sha256>.blocked`` (default: leave them
            in place; they are logged either way).
        frame_folders: Treat folders of numbered frames (``<stem>_0000.png`` ...) as videos.
        settings: `vhd.media.MediaSettings` (limits, frames per video); defaults to the
            annotator's.
        jobs: Files validated at once (threads).
        progress: Called with (files done, files in total) after each file.
        allow_outside_paths: Accept manifest rows whose paths lead outside the manifest's folder
            (rows naming a sample the store holds are always accepted).
        rehash: Read and hash every file again instead of trusting the store's stat index.
        listed: Ids or files of each kind the result keeps (the rest are counted).
        anchors: `vhd.media.credentials.TrustAnchors` a C2PA signer must chain to for its
            claims to count; default: ``[c2pa]`` ``trust_anchors`` / ``user_anchors`` of the user config.

    Returns:
        What was added, updated, skipped and blocked: counts, and the first `LISTED` ids or
        files of each kind (invalid files are all in the store's skips table).

    Raises:
        ConfigError: An input does not exist, a manifest or the block list cannot be read.
        MissingDependencyError: A video needs PyAV and it is missing.
    """
    if not isinstance(store, Store):
        with using_store(store, create=True) as db:
            return ingest(
                inputs, db, defaults=defaults, block_list=block_list, quarantine_dir=quarantine_dir,
                frame_folders=frame_folders, settings=settings, jobs=jobs, progress=progress,
                allow_outside_paths=allow_outside_paths, rehash=rehash, listed=listed,
            )  # fmt: skip
    store.create()  # handed a store whose file is not made yet: its look-ups below read an empty one
    from vhd.media.discover import Skipped, check_inputs, iter_discover
    from vhd.media.load import MediaSettings

    start = time.perf_counter()
    defaults = defaults or IngestDefaults()
    settings = settings or MediaSettings()
    if isinstance(block_list, str | os.PathLike):
        from vhd.collect.blocklist import BlockList

        block_list = BlockList.load(os.fspath(block_list))
    folder = Path(os.path.abspath(quarantine_dir)) if quarantine_dir else None
    paths = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    from vhd.labels.rules import known_sample
    from vhd.store.statindex import ScratchSet

    check_inputs([os.fspath(p) for p in paths])
    from vhd.media.credentials import TrustAnchors, c2pa_available

    if anchors is None and c2pa_available():
        anchors = TrustAnchors.from_config()
    result = IngestResult(listed=listed)
    discovered = 0
    seen = ScratchSet()

    def items() -> Iterator[MediaItem]:
        """Discovery, streamed: files are checked while the folders are still being walked."""
        nonlocal discovered
        for found in iter_discover(
            [os.fspath(p) for p in paths],
            frame_folders=frame_folders,
            allow_outside_paths=allow_outside_paths,
            known=lambda sample_id, path: known_sample(store, sample_id, path),
            first_seen=seen.add,  # paths met: on disk, not a set in memory
            record_new=seen.put_new,
        ):
            if isinstance(found, Skipped):
                store.record_skip(None, found.path, f"ingest: {found.reason}")
                result.note("invalid", (display_path(found.path), found.reason))
                result.rows_left_out += found.row_left_out
                continue
            discovered += 1
            yield defaults.apply(found)

    def check(item: MediaItem) -> _Checked:
        """`check_one` inside the item boundary: any surprise is the item's ``invalid`` reason."""
        checked = guarded(check_one, item)
        return _Checked(item, "", "invalid", checked.reason) if isinstance(checked, ItemFailure) else checked

    def check_one(item: MediaItem) -> _Checked:
        """Hash, block-check and validate one item (runs in a worker thread)."""
        from vhd.media.credentials import mark_from_credentials
        from vhd.media.load import load_sample

        try:
            ident, blocked = _content_id(item, block_list, store, rehash)
        except MediaError as exc:
            return _Checked(item, "", "invalid", str(exc))
        if blocked is not None:
            return _Checked(item, ident, "blocked", blocked)
        stored = store.get_sample(ident)
        if stored is not None and stored.path == display_path(item.path):
            return _Checked(item, ident, "unchanged")
        try:
            loaded = load_sample(item, settings)
        except MediaError as exc:
            return _Checked(item, ident, "invalid", str(exc))
        loaded.sample = mark_from_credentials(loaded.sample, item.path, anchors)
        return _Checked(item, ident, "ok", loaded=loaded)

    try:
        for done, checked in enumerate(thread_map(check, items(), jobs), start=1):
            with item_boundary(checked.item) as b:
                _record(store, checked, result, folder)
            if b.failure is not None:  # e.g. a quarantine move refused: the item is left out, the run goes on
                path = display_path(checked.item.path)
                store.record_skip(None, path, f"ingest: {b.failure.reason}")
                result.note("invalid", (path, b.failure.reason))
            if progress is not None:
                progress(done, max(done, discovered))  # the total grows while folders are walked
    finally:
        seen.close()
    result.elapsed_s = time.perf_counter() - start
    return result


def register_written(
    path: str | os.PathLike[str],
    data: bytes,
    sha256: str,
    store: Store,
    *,
    kind: Kind,
    frame_count: int = 1,
    defaults: IngestDefaults | None = None,
    block_list: Any = None,
    settings: Any = None,
) -> IngestResult:
    """Register one file the caller just wrote from ``data`` (`vhd generate`), without reading or decoding it.

    The same outcomes as `ingest` (block list, removals on request, unchanged, added, updated) from
    the bytes in hand: the sample id is ``sha256`` and a video's frames are the indices `ingest`
    would sample from ``frame_count`` frames. The caller made the pixels, so they are not
    validated again.

    Raises:
        ConfigError: The block list cannot be read.
    """
    from vhd.media.load import LoadedSample, MediaSettings
    from vhd.media.videoframes import frame_indices
    from vhd.records import Sample

    settings = settings or MediaSettings()
    if isinstance(block_list, str | os.PathLike):
        from vhd.collect.blocklist import BlockList

        block_list = BlockList.load(os.fspath(block_list))
    item = (defaults or IngestDefaults()).apply(MediaItem(path=Path(path), kind=kind))
    result = IngestResult()
    hit = block_list.match(data) if block_list is not None else None
    if hit is not None:
        checked = _Checked(item, sha256, "blocked", hit.describe())
    else:
        stored = store.get_sample(sha256)
        if stored is not None and stored.path == display_path(item.path):
            checked = _Checked(item, sha256, "unchanged")
        else:
            frames = [] if kind is Kind.IMAGE else frame_indices(frame_count, settings.n_frames, settings.first_frames)
            sample = Sample(
                id=sha256, kind=kind, path=display_path(item.path), source=item.source, keyword=item.keyword,
                generator=item.generator, frames=frames, meta=dict(item.meta),
            )  # fmt: skip
            checked = _Checked(item, sha256, "ok", loaded=LoadedSample(sample=sample, images=[]))
    _record(store, checked, result, None)
    return result
