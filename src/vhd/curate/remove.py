"""Take samples out of a store on request (takedowns), and log who asked, when and why.

A removed sample stays in the store as a record of what was taken out, but it leaves every
listing: exports written afterwards, `vhd dedup` and `vhd split` on the store, and `vhd ingest`
refuses to register the same content again. With ``delete_files`` its media file (or the frames
of a frame folder) is deleted too. Running the same removal twice changes nothing more (files
asked to be deleted the second time are deleted and logged).

Example:
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     remove_samples(store, ["3fa9c2e1"], reason="takedown request #12", delete_files=True)
"""

from __future__ import annotations

import contextlib
import getpass
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhd.store.sqlite import Store, StoreLike, using_store


@dataclass
class Removed:
    """One sample's removal.

    Attributes:
        ref: What the caller gave (id, id prefix or path).
        sample_id: The sample.
        path: Its media.
        already: It had been removed before (nothing new was recorded).
        deleted: Files deleted by this call.
        problems: Files that could not be deleted, with the reason.
    """

    ref: str
    sample_id: str
    path: str
    already: bool = False
    deleted: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class RemoveResult:
    """Outcome of `remove_samples`.

    Attributes:
        removed: Samples removed (or found removed already).
        not_found: References that match no sample, with the reason.
    """

    removed: list[Removed] = field(default_factory=list)
    not_found: list[tuple[str, str]] = field(default_factory=list)


def _media_files(path: Path) -> list[Path]:
    """The files that make up a sample's media: the file, or a frame folder's frames."""
    from vhd.media.discover import frame_folder_frames

    if path.is_dir():
        return frame_folder_frames(path) or []
    return [path] if path.is_file() else []


def _delete(path: Path, done: Removed) -> None:
    for f in _media_files(path):
        try:
            f.unlink()
            done.deleted.append(str(f))
        except OSError as exc:
            done.problems.append(f"{f}: {exc.strerror}")
    if path.is_dir():
        with contextlib.suppress(OSError):  # other files remain in the folder: leave it
            path.rmdir()


def remove_samples(
    store: StoreLike,
    refs: Sequence[str],
    *,
    reason: str = "",
    requested_by: str | None = None,
    delete_files: bool = False,
) -> RemoveResult:
    """Remove samples by id, id prefix (6+ hex characters) or path.

    Args:
        store: The store: an open `Store` or its path.
        refs: Sample references.
        reason: Why (for example the takedown request); kept in the removal log.
        requested_by: Who asked (default: the current user name).
        delete_files: Also delete each sample's media file.

    Returns:
        The samples removed and the references that matched nothing (or several samples).
    """
    if not isinstance(store, Store):
        with using_store(store) as db:
            return remove_samples(db, refs, reason=reason, requested_by=requested_by, delete_files=delete_files)
    from vhd.store.curation import add_deleted_files, record_removal, removed_at

    who = requested_by if requested_by is not None else _user()
    result = RemoveResult()
    for ref in refs:
        found = store.find_samples(ref)
        if not found:
            result.not_found.append((ref, "no sample with this id, id prefix or path"))
            continue
        if len(found) > 1:
            result.not_found.append((ref, f"matches {len(found)} samples; give more of the id"))
            continue
        sample = found[0]
        done = Removed(ref, sample.id, sample.path, already=removed_at(store, sample.id) is not None)
        if not done.already:  # recorded first: a kill before the deletion is finished by a re-run
            record_removal(store, sample.id, sample.path, reason, who, [])
        if delete_files:
            _delete(Path(sample.path), done)
            add_deleted_files(store, sample.id, done.deleted)
        result.removed.append(done)
    return result


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "")
