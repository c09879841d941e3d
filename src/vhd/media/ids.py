"""Sample ids through a stat index: read only the files whose ``stat`` changed since last hashed.

A sample's id is the sha256 of its file's bytes (or, for a frame folder, of its frames' hex
digests in frame order; see `vhd.media.load.sample_id`). Reading every byte again on each run is
what makes resuming a large run slow, so the callers keep a `HashIndex` (the store implements
one: `vhd.store.statindex`) that maps a file's ``stat`` to the hash its bytes had. The work is cut
in two so a caller can read the changed files in threads: `stat_items` stats a batch and asks the
index once; `resolve_id` hashes what the index did not know.

Example:
    >>> planned = stat_items(items, store)  # doctest: +SKIP
    >>> ids = [resolve_id(p) for p in planned]  # doctest: +SKIP
    >>> store.remember_hashes([entry for p in planned for entry in p.new])  # doctest: +SKIP
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from vhd.errors import MediaError
from vhd.fileio import FileStat, display_path, file_stat
from vhd.media.discover import PlainFile, frame_folder_frames
from vhd.media.hashing import combine_hashes, sha256_file
from vhd.records import MediaItem


class HashIndex(Protocol):
    """Where file hashes are remembered by ``stat`` (`vhd.store.sqlite.Store` is one)."""

    def known_hashes(self, stats: Sequence[FileStat]) -> dict[str, str]:
        """``path -> sha256`` of the files whose stat is unchanged since they were hashed."""
        ...

    def remember_hashes(self, entries: Sequence[tuple[FileStat, str]], *, hashed_at_ns: int | None = None) -> None:
        """Record ``(stat before reading, sha256)`` of files just read."""
        ...


class PlannedId:
    """One item of a batch, stat-ed and looked up in the index.

    A plain class with slots: a resumed run makes one per file, so it is kept cheap to build.

    Attributes:
        item: The item (a `PlainFile` from ``iter_discover(..., plain_files=True)``, or a `MediaItem`).
        files: Its files (one, or a frame folder's frames in order), empty after an error.
        stats: Their stats, taken before any read.
        known: The hash of each file the index vouches for (None: must be read).
        error: Why the item cannot be hashed (gone, no longer a frame folder...).
        folder: The item is a frame folder (its id combines its frames' hashes).
        new: ``(stat, sha256)`` of each file `resolve_id` read, for `HashIndex.remember_hashes`.
    """

    __slots__ = ("error", "files", "folder", "item", "known", "new", "stats")

    def __init__(
        self,
        item: MediaItem | PlainFile,
        files: list[str | Path] | None = None,
        stats: list[FileStat] | None = None,
        known: list[str | None] | None = None,
        error: MediaError | None = None,
        folder: bool = False,
    ) -> None:
        self.item = item
        self.files: list[str | Path] = [] if files is None else files
        self.stats: list[FileStat] = [] if stats is None else stats
        self.known: list[str | None] = [] if known is None else known
        self.error = error
        self.folder = folder
        self.new: list[tuple[FileStat, str]] = []

    @property
    def needs_read(self) -> bool:
        """Whether some file must be read to know the id."""
        return self.error is None and None in self.known


def item_files(item: MediaItem | PlainFile) -> list[Path]:
    """The files whose bytes make an item's id: the file, or a frame folder's frames in order.

    Raises:
        MediaError: The folder is not (or no longer) a frame folder.
    """
    path = Path(item.path)
    if item.is_frame_folder or path.is_dir():
        frames = frame_folder_frames(path)
        if frames is None:
            raise MediaError("folder is not (or no longer) a frame folder of <stem>_<k:04d> images")
        return frames
    return [path]


def stat_items(
    items: Sequence[MediaItem | PlainFile], index: HashIndex | None, *, rehash: bool = False
) -> list[PlannedId]:
    """Stat a batch of items and look their files up in the index (one query for the batch).

    Args:
        items: The items.
        index: Where hashes are remembered; None reads every file.
        rehash: Ignore what the index holds (every file is read; the index is refreshed).
    """
    planned: list[PlannedId] = []
    for item in items:
        raw = item.path
        try:
            st = os.stat(raw)
            if item.is_frame_folder or stat.S_ISDIR(st.st_mode):
                frames = item_files(item)
                planned.append(PlannedId(item, list(frames), [file_stat(f) for f in frames], folder=True))
            else:
                name = raw if isinstance(raw, str) else os.fspath(raw)
                shown = name if name.isascii() else display_path(name)
                now = FileStat(shown, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                planned.append(PlannedId(item, [raw], [now]))
        except MediaError as exc:
            planned.append(PlannedId(item, error=exc))
        except OSError as exc:
            planned.append(PlannedId(item, error=MediaError(f"cannot read file ({exc.strerror})")))
    stats = [s for p in planned for s in p.stats]
    known = index.known_hashes(stats) if index is not None and not rehash and stats else {}
    for p in planned:
        if len(p.stats) == 1:  # most items: one file
            p.known = [known.get(p.stats[0].path)]
        elif p.stats:
            p.known = [known.get(s.path) for s in p.stats]
    return planned


def resolve_id(planned: PlannedId) -> str | MediaError:
    """The item's id: from the index where it vouches for a file, else by reading it.

    Files read are added to ``planned.new``. Safe to run in a thread.
    """
    if planned.error is not None:
        return planned.error
    hashes: list[str] = []
    for path, before, known in zip(planned.files, planned.stats, planned.known, strict=True):
        if known is None:
            try:
                known = sha256_file(path)
            except OSError as exc:
                what = "frame" if planned.folder else "file"
                return MediaError(f"cannot read {what} ({exc.strerror})")
            planned.new.append((before, known))
        hashes.append(known)
    return combine_hashes(hashes) if planned.folder else hashes[0]


def sample_ids(items: Sequence[MediaItem], index: HashIndex | None, *, rehash: bool = False) -> list[str | MediaError]:
    """Ids of a batch of items, reading only files the index does not vouch for, and remembering those.

    Args:
        items: The items.
        index: Where hashes are remembered (a `vhd.store.sqlite.Store`); None reads every file.
        rehash: Read every file whatever the index says (and refresh the index).

    Returns:
        One id (or the `MediaError` saying why there is none) per item, in order.
    """
    planned = stat_items(items, index, rehash=rehash)
    ids = [resolve_id(p) for p in planned]
    if index is not None:
        index.remember_hashes([entry for p in planned for entry in p.new])
    return ids
