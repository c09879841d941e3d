"""Find the images and videos behind a list of inputs: files, folders and manifests.

Inputs may be media files, folders (searched recursively, in sorted order, hidden entries
ignored) or manifests (``.csv``, ``.jsonl`` or a ``.json`` list) that list media with optional
metadata. Anything that cannot become a sample is reported in `Discovery.skipped` with a
reason instead of stopping the run; only a missing top-level input (or an unreadable
manifest) is an error. Manifests are read when given as inputs, and a folder's own
``manifest.csv`` (`FOLDER_MANIFEST`, as ``vhd examples`` writes) is read when that folder is an
input, before its files (so its metadata wins); any other ``.csv`` met while scanning a folder is
skipped like any other non-media file. Symbolic links that lead outside
a scanned folder, file names that are not valid UTF-8 (shown with their bytes escaped, see
`vhd.fileio.display_path`), and anything that is not a regular file (a FIFO, socket or device
named ``*.jpg`` would block or stream forever) are skipped with a reason.

A *frame folder* holds the extracted frames of one video: a folder without subfolders whose
files are all images named ``<stem>_<k:04d>.<png|jpg|jpeg|webp>`` with a single stem and
``k`` running 0, 1, 2, ... without gaps (at least two frames). It becomes one video sample.

This module is a little long (about 500 lines) on purpose: the folder walk has a fast path for
plain files (`PlainFile`, paths recorded without lookups) beside its general path, and the two must
share one collector's state (the paths seen, whether the walk is still fresh) to find the same
samples; splitting them would share private state between modules.
"""

from __future__ import annotations

import errno
import operator
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple, overload

from vhd.boundary import ItemFailure, guarded
from vhd.errors import ConfigError
from vhd.fileio import display_path, not_regular_reason, regular_file_problem
from vhd.media.manifest import KnownSample, RowProblem, read_manifest
from vhd.records import Kind, ManifestRow, MediaItem

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif"})
"""File extensions read as images (case-insensitive)."""

VIDEO_EXTENSIONS = frozenset({".mp4", ".webm", ".mov", ".mkv", ".avi", ".m4v"})
"""File extensions read as videos (case-insensitive)."""

MANIFEST_EXTENSIONS = frozenset({".csv", ".jsonl", ".json"})
"""File extensions read as manifests when given as an input."""

FOLDER_MANIFEST = "manifest.csv"
"""A folder's own manifest: read as one when the folder is an input (``vhd examples`` writes it)."""

_KINDS = {**dict.fromkeys(IMAGE_EXTENSIONS, Kind.IMAGE), **dict.fromkeys(VIDEO_EXTENSIONS, Kind.VIDEO)}

_name = operator.attrgetter("name")

_FRAME_NAME = re.compile(r"^(?P<stem>.+)_(?P<k>\d{4,})\.(?:png|jpe?g|webp)$", re.IGNORECASE)


@dataclass(frozen=True)
class Skipped:
    """An input that did not become a sample, and why.

    Attributes:
        path: The file, folder or manifest concerned.
        reason: One line that says what is wrong.
        row_left_out: A manifest row that could not be read at all (malformed CSV, a NUL byte,
            JSON nested too deep, a path leading outside...): the run finishes, and its exit
            code says that rows were left out, as `vhd label`'s does.
    """

    path: Path
    reason: str
    row_left_out: bool = False

    def __str__(self) -> str:
        return f"{display_path(self.path)}: {self.reason}"


@dataclass
class Discovery:
    """Result of `discover`.

    Attributes:
        items: Samples found, in input order (folders in sorted order), each path once.
        skipped: Inputs left out, with reasons.
    """

    items: list[MediaItem] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _utf8_ok(path: str | Path) -> bool:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _broken_link_reason(path: Path) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop (it leads back to itself)"
    return "broken symbolic link"


def kind_for(path: Path) -> Kind | None:
    """Return the media kind implied by a file's extension, or None when unsupported."""
    ext = path.suffix.lower()
    if ext in IMAGE_EXTENSIONS:
        return Kind.IMAGE
    if ext in VIDEO_EXTENSIONS:
        return Kind.VIDEO
    return None


def frame_folder_frames(folder: str | Path) -> list[Path] | None:
    """Return a frame folder's frames in frame order, or None when it is not one.

    Args:
        folder: A directory.

    Returns:
        The frame files sorted by frame number, or None when the folder has subfolders,
        other files, several stems, fewer than two frames, or gaps in the numbering.
    """
    folder = Path(folder)
    frames: dict[int, Path] = {}
    stems: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_dir() or not entry.is_file():
                return None
        except OSError:
            return None
        match = _FRAME_NAME.match(entry.name)
        if match is None:
            return None
        k = int(match["k"])
        if match["k"] != f"{k:04d}" or k in frames:
            return None
        stems.add(match["stem"])
        frames[k] = folder / entry.name
    if len(frames) < 2 or len(stems) != 1 or sorted(frames) != list(range(len(frames))):
        return None
    return [frames[k] for k in range(len(frames))]


class PlainFile(NamedTuple):
    """A plain media file found in a folder, before it is made a `MediaItem` (``iter_discover(plain_files=True)``).

    Cheaper to make than a `MediaItem` and its `Path`: a resumed run meets a million of them and
    makes items only of those that still need work.

    Attributes:
        path: Absolute path (symbolic links not resolved), as a string.
        kind: Image or video.
    """

    path: str
    kind: Kind

    @property
    def is_frame_folder(self) -> bool:
        """Never a frame folder (for code that takes a `MediaItem` or a `PlainFile`)."""
        return False

    def item(self) -> MediaItem:
        """The `MediaItem` of this file."""
        return MediaItem(path=Path(self.path), kind=self.kind)


Found = MediaItem | Skipped
"""What `iter_discover` yields: a sample to use, or an input left out with its reason."""

FoundFile = MediaItem | Skipped | PlainFile
"""What ``iter_discover(..., plain_files=True)`` yields: plain files of folders come as `PlainFile`."""


class _Collector:
    def __init__(
        self,
        frame_folders: bool,
        allow_outside_paths: bool = False,
        known: KnownSample | None = None,
        first_seen: Callable[[str], bool] | None = None,
        record_new: Callable[[str], None] | None = None,
        plain_files: bool = False,
    ) -> None:
        self.frame_folders = frame_folders
        self.plain_files = plain_files
        self.allow_outside_paths, self.known = allow_outside_paths, known
        if first_seen is None:
            seen: set[str] = set()

            def first_seen(key: str) -> bool:
                if key in seen:
                    return False
                seen.add(key)
                return True

            record_new = seen.add
        self.first_seen = first_seen
        self.record_new = record_new
        # True while every path met so far is a plain file of the one folder being walked: those
        # cannot repeat (each folder is listed once, names are unique in it), so they are recorded
        # without a lookup. A symbolic link, a manifest row, a frame folder or a second input ends it.
        self.fresh_walk = record_new is not None

    def new(self, item: MediaItem, real: str | None = None, *, plain: bool = False) -> bool:
        """Whether the item's file is met for the first time (``real``: its resolved path, if known).

        ``plain``: a regular file (not a symbolic link) listed in the folder being walked.
        """
        if plain and self.fresh_walk and real is not None and self.record_new is not None:
            self.record_new(real)
            return True
        self.fresh_walk = False
        return self.first_seen(real if real is not None else os.path.realpath(item.path))

    def add_path(self, path: Path) -> Iterator[FoundFile]:
        """Add a single file or folder found on disk (no manifest metadata)."""
        if not _utf8_ok(path):
            yield Skipped(path, "file name is not valid UTF-8; rename the file to include it")
            return
        if path.is_dir():
            if self.frame_folders and frame_folder_frames(path) is not None:
                item = MediaItem(path=path, kind=Kind.VIDEO, is_frame_folder=True)
                if self.new(item):
                    yield item
            else:
                own = path / FOLDER_MANIFEST
                if own.is_file() and not own.is_symlink():
                    try:
                        yield from self.add_manifest(own)
                    except ConfigError as exc:
                        yield Skipped(own, f"folder manifest not read: {exc}")
                yield from self.scan(path, path)
            return
        problem = regular_file_problem(path)
        if problem is not None:
            yield Skipped(path, problem)
            return
        kind = kind_for(path)
        if kind is None:
            yield Skipped(path, f"unsupported file type {path.suffix.lower() or '(no extension)'}")
            return
        item = MediaItem(path=path, kind=kind)
        if self.new(item):
            yield item

    def scan(self, root: Path, folder: Path) -> Iterator[FoundFile]:
        """Walk ``folder`` (inside ``root``) in sorted order."""
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
            if "".join([e.name for e in entries]).isascii():  # the byte order is the order of the names
                entries.sort(key=_name)
            else:
                entries.sort(key=lambda e: os.fsencode(e.name))
        except OSError as exc:
            yield Skipped(folder, f"cannot list folder ({type(exc).__name__}: {exc.strerror})")
            return
        real_root = os.path.realpath(root)
        real_folder = os.path.realpath(folder)  # resolved once: a plain entry's is this joined with its name
        real_prefix = real_folder if real_folder.endswith(os.sep) else real_folder + os.sep
        top = folder == root
        # Plain files, the bulk of a large folder, take a path of string operations (no `Path` until
        # an item is made); symbolic links, folders and anything odd take the general path.
        for entry in entries:
            name = entry.name
            if name.startswith(".") or (top and name == FOLDER_MANIFEST):
                continue  # hidden, or the folder's own manifest (read before the scan)
            try:  # the listing's file type: no system call for plain files and folders on most filesystems
                if entry.is_file(follow_symlinks=False):
                    mode = stat.S_IFREG
                elif entry.is_dir(follow_symlinks=False):
                    mode = stat.S_IFDIR
                else:
                    mode = os.lstat(entry.path).st_mode
            except OSError:
                continue  # gone since the listing
            real = real_prefix + name
            if mode == stat.S_IFREG and (name.isascii() or _utf8_ok(name)):  # folder: checked before its scan
                dot = name.rfind(".")
                kind = _KINDS.get(name[dot:].lower()) if dot > 0 else None
                if kind is not None:
                    if self.plain_files and self.fresh_walk and self.record_new is not None:
                        self.record_new(real)  # as `new` does for a plain file, without making an item
                        yield PlainFile(entry.path, kind)
                        continue
                    item = MediaItem(path=folder / name, kind=kind)
                    if self.new(item, real, plain=True):
                        yield item if not self.plain_files else PlainFile(entry.path, kind)
                    continue
            path = folder / name
            if stat.S_ISLNK(mode):
                target = real = os.path.realpath(path)
                if not os.path.exists(target):
                    yield Skipped(path, _broken_link_reason(path))
                    continue
                if os.path.commonpath([real_root, target]) != real_root:
                    yield Skipped(path, f"symbolic link points outside {display_path(root)}")
                    continue
                if os.path.isdir(target):
                    continue  # its target is inside the folder and is scanned there
                with suppress(OSError):
                    mode = os.stat(path).st_mode
            if not _utf8_ok(path):
                yield Skipped(path, "file name is not valid UTF-8; rename the file to include it")
                continue
            if stat.S_ISDIR(mode):
                if self.frame_folders and frame_folder_frames(path) is not None:
                    item = MediaItem(path=path, kind=Kind.VIDEO, is_frame_folder=True)
                    if self.new(item, real):
                        yield item
                else:
                    yield from self.scan(root, path)
                continue
            problem = not_regular_reason(mode)
            if problem is not None:
                yield Skipped(path, problem)
                continue
            kind = kind_for(path)
            if kind is None:
                ext = path.suffix.lower() or "(no extension)"
                yield Skipped(path, f"unsupported file type {ext}")
                continue
            item = MediaItem(path=path, kind=kind)
            if self.new(item, real):
                yield item

    def add_manifest(self, manifest: Path) -> Iterator[FoundFile]:
        for row in read_manifest(manifest, allow_outside_paths=self.allow_outside_paths, known=self.known):
            if isinstance(row, RowProblem):
                yield Skipped(manifest, f"{manifest.name} {row}", row_left_out=True)
                continue
            found = guarded(self._row, manifest, row)
            yield (
                Skipped(manifest, f"{manifest.name} {row.where}: {found.reason}")
                if isinstance(found, ItemFailure)
                else found
            )

    def _row(self, manifest: Path, row: ManifestRow) -> Found:
        where = f"{manifest.name} {row.where}"
        path = Path(os.path.abspath(manifest.parent / row.path))
        if not _utf8_ok(path):
            return Skipped(path, f"{where}: file name is not valid UTF-8")
        if not os.path.exists(path):
            return Skipped(path, f"{where}: listed file not found")
        is_frame_folder = False
        if path.is_dir():
            if frame_folder_frames(path) is None:
                return Skipped(path, f"{where}: folder is not a frame folder (<stem>_0000.png ...)")
            kind: Kind | None = Kind.VIDEO
            is_frame_folder = True
        else:
            problem = regular_file_problem(path)
            if problem is not None:
                return Skipped(path, f"{where}: {problem}")
            kind = kind_for(path)
        if row.kind is not None:
            if kind is not None and kind is not row.kind:
                return Skipped(path, f"{where}: kind {row.kind.value} does not match the file")
            kind = row.kind
        if kind is None:
            ext = path.suffix.lower() or "(no extension)"
            return Skipped(path, f"{where}: unsupported file type {ext} (set a kind column)")
        item = MediaItem(
            path=path,
            kind=kind,
            is_frame_folder=is_frame_folder,
            source=row.source,
            keyword=row.keyword,
            generator=row.generator,
            split=row.split,
            harmful=row.harmful,
            id=row.id,
            meta=row.meta,
        )
        if not self.new(item):
            return Skipped(path, f"{where}: listed more than once; kept the first entry")
        return item


def _inputs(inputs: Sequence[str | Path] | str | Path) -> Iterator[str | Path]:
    if isinstance(inputs, str | Path):
        yield inputs
    else:
        yield from inputs


@overload
def iter_discover(
    inputs: Sequence[str | Path] | str | Path,
    *,
    frame_folders: bool = ...,
    allow_outside_paths: bool = ...,
    known: KnownSample | None = ...,
    first_seen: Callable[[str], bool] | None = ...,
    record_new: Callable[[str], None] | None = ...,
    plain_files: Literal[False] = ...,
) -> Iterator[Found]: ...


@overload
def iter_discover(
    inputs: Sequence[str | Path] | str | Path,
    *,
    frame_folders: bool = ...,
    allow_outside_paths: bool = ...,
    known: KnownSample | None = ...,
    first_seen: Callable[[str], bool] | None = ...,
    record_new: Callable[[str], None] | None = ...,
    plain_files: Literal[True],
) -> Iterator[FoundFile]: ...


def iter_discover(
    inputs: Sequence[str | Path] | str | Path,
    *,
    frame_folders: bool = False,
    allow_outside_paths: bool = False,
    known: KnownSample | None = None,
    first_seen: Callable[[str], bool] | None = None,
    record_new: Callable[[str], None] | None = None,
    plain_files: bool = False,
) -> Iterator[FoundFile]:
    """Yield the samples of the inputs, and the inputs left out with reasons, as they are found.

    The streaming form of `discover`: nothing is kept per file but the set of paths already
    yielded, and ``first_seen`` lets the caller keep that set out of memory (e.g. a
    `vhd.store.statindex.ScratchSet`'s ``add``). A top-level input is checked when it is reached,
    so a missing one raises after the samples of the inputs before it were yielded.

    Args:
        inputs: As for `discover`.
        frame_folders: As for `discover`.
        allow_outside_paths: As for `discover`.
        known: As for `discover`.
        first_seen: ``first_seen(real path)`` is True the first time a path is met, False after
            (default: a set in memory).
        record_new: ``record_new(real path)`` records a path known to be met for the first time
            (it may be buffered; ``first_seen`` must see it). Given with ``first_seen``, the plain
            files of a folder walked first are recorded without a lookup. Without it every path
            goes through ``first_seen``.
        plain_files: Yield the plain files found in folders as `PlainFile` (a path string and a
            kind) instead of `MediaItem` (see `PlainFile.item`); files from manifests and frame
            folders stay `MediaItem`.

    Raises:
        ConfigError: An input does not exist, or a manifest cannot be read at all.
    """
    collector = _Collector(frame_folders, allow_outside_paths, known, first_seen, record_new, plain_files)
    for raw in _inputs(inputs):
        path = Path(os.path.abspath(os.fspath(raw)))
        if not os.path.exists(path):
            raise ConfigError(f"input not found: {display_path(raw)}")
        if path.is_file() and path.suffix.lower() in MANIFEST_EXTENSIONS:
            yield from collector.add_manifest(path)
        else:
            yield from collector.add_path(path)
        collector.fresh_walk = False  # the next input's files may repeat this one's


def check_inputs(inputs: Sequence[str | Path] | str | Path) -> None:
    """Fail before any work when a top-level input does not exist.

    Raises:
        ConfigError: The first input that does not exist.
    """
    for raw in _inputs(inputs):
        if not os.path.exists(os.path.abspath(os.fspath(raw))):
            raise ConfigError(f"input not found: {display_path(raw)}")


def discover(
    inputs: Sequence[str | Path] | str | Path,
    *,
    frame_folders: bool = False,
    allow_outside_paths: bool = False,
    known: KnownSample | None = None,
) -> Discovery:
    """Turn inputs into media items, skipping (with reasons) what cannot be used.

    Args:
        inputs: Media files, folders and manifests (``.csv``, ``.jsonl``, ``.json``), in the
            order their samples should come.
        frame_folders: Treat every folder holding only numbered frames of one stem
            (``<stem>_0000.png`` ...) as one video. Off by default, because a folder of photos
            named ``img_0000.jpg``, ``img_0001.jpg``... looks the same; a manifest row that points
            at a folder always means a frame folder.
        allow_outside_paths: Accept manifest rows whose paths lead outside the manifest's folder.
        known: ``known(id, path)``: rows naming a sample a store holds may lead anywhere.

    Returns:
        The items found (each path once, first occurrence kept) and the skipped entries.

    Raises:
        ConfigError: An input does not exist, or a manifest cannot be read at all.
    """
    check_inputs(inputs)
    result = Discovery()
    for found in iter_discover(
        inputs, frame_folders=frame_folders, allow_outside_paths=allow_outside_paths, known=known
    ):
        if isinstance(found, Skipped):
            result.skipped.append(found)
        else:
            result.items.append(found)
    return result
