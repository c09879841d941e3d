"""Labelled sets in the store: human labels under a name, tied to registered samples.

A labelled set is what people decided about some samples (harmful yes/no, an optional reason
and categories), kept in the store's ``labelled_sets`` table under a name, so later commands
(``vhd icl --validation NAME``, Label Studio export) can refer to it. Samples given by path are
loaded through `vhd.media` (validated, hashed, registered as samples); samples given by id must
already be in the store.

Example:
    >>> from vhd.labels import import_labels, load_labelled_set
    >>> import_labels("labels.csv", store="run.db", name="validation")  # doctest: +SKIP
    >>> items = load_labelled_set("run.db", "validation")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.boundary import ItemFailure, guarded
from vhd.errors import ConfigError
from vhd.labels.rules import NOT_FOUND_HINT, LabelOptions, settle_duplicates
from vhd.records import Kind, LabelledSample, LabelRow
from vhd.store.sqlite import Store, StoreLike, using_store

if TYPE_CHECKING:
    from vhd.media.load import LoadedSample, MediaSettings

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


LabelledItem = LabelledSample
"""One human-labelled sample of a labelled set (`LabelledSample`; ``path`` from the store's sample record)."""


@dataclass
class ImportResult:
    """What an import into a labelled set did.

    Attributes:
        name: The labelled set.
        source: The file read.
        imported: Rows written (new or updated).
        harmful: Of those, labelled harmful.
        skipped: ``(row, reason)`` for rows that could not be used.
        notes: ``(row, reason)`` for rows not used because another row of the same sample was
            kept (the same answer, or a conflict settled by ``--duplicates``).
    """

    name: str
    source: str
    imported: int = 0
    harmful: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Resolved:
    """A labels file tied to registered samples (`resolve_labels`).

    Attributes:
        items: The usable items, in file order, one per sample.
        skipped: ``(row, reason)`` for every row left out, in row order.
        notes: ``(row, reason)`` for rows merged into another row of the same sample.
    """

    items: list[LabelledSample] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)

    def messages(self) -> list[str]:
        """One line per row left out or merged, in row order (``row N: ...``)."""
        rows = sorted([*self.skipped, *self.notes])
        return [f"row {line}: {why}" for line, why in rows]


def check_set_name(name: str) -> str:
    """Validate a labelled set's name (letters, digits, ``.``, ``_``, ``-``; 64 at most)."""
    if not _NAME.fullmatch(name):
        raise ConfigError(f"labelled set name {name!r} is not valid: use letters, digits, '.', '_' or '-' (64 at most)")
    return name


def save_labelled_set(store: Store, name: str, items: Sequence[LabelledItem], source: str = "") -> int:
    """Write items into a labelled set in one transaction (a sample's earlier label is replaced).

    Args:
        store: An open store; every item's sample must be registered in it.
        name: The labelled set.
        items: The labels.
        source: The file they came from, recorded with each row.

    Returns:
        The number of rows written.
    """
    return store.save_labelled_set(check_set_name(name), items, source)


def labelled_set_names(store: Store) -> dict[str, int]:
    """Every labelled set in a store with its size, by name."""
    return store.labelled_sets()


def read_labelled_set(store: Store, name: str) -> list[LabelledItem]:
    """Read a labelled set (samples marked removed are left out), ordered by sample id.

    Raises:
        ConfigError: No set of that name (the message lists the sets there are).
    """
    return store.labelled_set(name)


def load_labelled_set(store: StoreLike, name: str) -> list[LabelledItem]:
    """Read one labelled set of a store (an open `Store` or its path; see `read_labelled_set`)."""
    with using_store(store) as db:
        return read_labelled_set(db, name)


def labels_or_set(
    source: str | os.PathLike[str],
    store: str | os.PathLike[str],
    options: LabelOptions | None = None,
    on_event: Callable[[str], None] | None = None,
    *,
    save_as: str | None = None,
    what: str = "labels",
) -> list[LabelledItem]:
    """The labelled samples a command was pointed at: a labels file, or the name of a labelled set.

    A labels file is read with `resolve_label_file` (its samples registered in ``store``); each row
    that cannot be used, or that repeats a sample, goes to ``on_event`` as one line
    (``FILE row N: why``) and the other rows are used. ``save_as`` also stores them as that set.

    Raises:
        ConfigError: A path that does not exist, a file with no usable row, or an unknown set.
    """
    path = Path(source)
    with Store(store, create=True) as db:
        if path.is_file():
            res = resolve_label_file(path, db, options)
            for line in res.messages():
                (on_event or (lambda _m: None))(f"{path} {line}")
            if not res.items:
                first = f" (first: {res.messages()[0]})" if res.messages() else ""
                raise ConfigError(f"no usable row in {path}{first}: fix the file, --media or --path-prefix")
            if save_as is not None:
                save_labelled_set(db, save_as, res.items, source=os.path.abspath(path))
            return res.items
        if path.suffix or os.sep in str(source):
            raise ConfigError(f"{what} {source} not found: give a labels CSV or a labelled set name")
        return read_labelled_set(db, str(source))


def resolve_labels(
    path: str | os.PathLike[str], store: Store, options: LabelOptions | None = None
) -> tuple[list[LabelledItem], list[tuple[int, str]]]:
    """Read a labels file and tie every row to a registered sample (see `resolve_label_file`).

    Returns:
        The usable items in file order, and ``(row, reason)`` for every row left out.
    """
    res = resolve_label_file(path, store, options)
    return res.items, res.skipped


def resolve_label_file(path: str | os.PathLike[str], store: Store, options: LabelOptions | None = None) -> Resolved:
    """Read a labels file and tie every row to a registered sample.

    Rows with a path are loaded through `vhd.media` (validated, hashed) and registered in the
    store; rows with only an id must name a sample the store holds. A row that cannot be used
    (missing or unreadable media, a wrong id) is listed with its row number and the others are
    used. Rows whose media have the same content are one sample: ``options.duplicates`` settles
    conflicting answers, as it does for rows naming the same path.

    Args:
        path: A labels CSV or a VHD11K annotation file (see `vhd.labels.files.read_labels`).
        store: An open store; rows naming its samples may lead anywhere on disk.
        options: ``--media``, ``--path-prefix``, ``--allow-outside-paths``, ``--duplicates``.

    Returns:
        The usable items, and every row left out or merged with its reason.
    """
    from vhd.labels.files import read_labels

    opts = options or LabelOptions()
    labels = read_labels(path, options=opts, store=store)
    out = Resolved(
        skipped=[(e.line, e.message) for e in labels.errors], notes=[(n.line, n.message) for n in labels.notes]
    )
    found: list[tuple[int, LabelledItem]] = []
    for row in labels:
        item = guarded(_resolve_row, row, store)  # never let one row stop the import
        if isinstance(item, ItemFailure):
            item = f"{row.path or row.id}: {item.reason}"
        if isinstance(item, str):
            out.skipped.append((row.line, item))
        else:
            found.append((row.line, item))
    settled = settle_duplicates([(line, [i.id], i.harmful) for line, i in found], opts.duplicates, "content")
    out.items = [found[k][1] for k in settled.keep]
    out.skipped = sorted([*out.skipped, *settled.dropped])
    out.notes = sorted([*out.notes, *settled.merged])
    return out


def _resolve_row(row: LabelRow, store: Store) -> LabelledItem | str:
    """The item of one row, or why it cannot be used."""
    from vhd.media.discover import MANIFEST_EXTENSIONS, discover
    from vhd.media.load import load_sample

    if row.path is not None:
        if not os.path.lexists(row.path):
            return f"{row.path} not found: {NOT_FOUND_HINT}"
        if row.path.suffix.lower() in MANIFEST_EXTENSIONS and row.path.is_file():
            return f"{row.path} is a manifest, not an image, a video or a frame folder"
        found = discover([row.path], frame_folders=True)
        if found.skipped or len(found.items) != 1:
            why = found.skipped[0].reason if found.skipped else "not a single image, video or frame folder"
            return f"{row.path}: {why}"
        loaded = guarded(load_sample, found.items[0])  # MediaError, or a decoder's own error on a corrupt file
        if isinstance(loaded, ItemFailure):
            return f"{row.path}: {loaded.reason}"
        sample = loaded.sample
        if row.id is not None and row.id != sample.id:
            return f"id {row.id[:12]} does not match the file's content ({sample.id[:12]})"
        store.upsert_sample(sample)
        sid, where, kind = sample.id, Path(sample.path), sample.kind
    elif row.id is not None:
        stored = store.get_sample(row.id)
        if stored is None:
            return f"sample {row.id[:12]} is not in the store: give its path instead"
        sid, where, kind = stored.id, Path(stored.path), stored.kind
    else:  # read_labels leaves out rows with neither
        return "no path or id"
    if row.segments is not None and kind is not Kind.VIDEO:
        return f"{row.path or row.id}: segments on an image: spans are times in a video"
    return LabelledSample(
        id=sid,
        path=str(where),
        kind=kind,
        harmful=row.harmful,
        reason=row.reason,
        categories=list(row.categories),
        segments=row.segments,
    )


def load_labelled_media(items: Sequence[LabelledItem], settings: MediaSettings) -> list[LoadedSample]:
    """Load the media of labelled samples again, in order, for a run over them.

    Args:
        items: The labelled samples.
        settings: How to load them (frames, sizes), from `vhd.media.load.media_settings`.

    Returns:
        One loaded sample per item.

    Raises:
        ConfigError: A sample's path no longer holds a single readable file.
    """
    from vhd.media.discover import discover
    from vhd.media.load import load_sample

    loaded = []
    for item in items:
        found = discover([item.path], frame_folders=True)
        if len(found.items) != 1:
            raise ConfigError(f"labelled sample {item.path} is no longer a single readable file; fix the labels")
        loaded.append(load_sample(found.items[0], settings))
    return loaded


def import_labels(
    path: str | os.PathLike[str],
    *,
    store: StoreLike = "vhd.db",
    name: str | None = None,
    options: LabelOptions | None = None,
) -> ImportResult:
    """Import a labels file into the store as a labelled set (the library call behind ``vhd label``).

    Args:
        path: A labels CSV (``path`` or ``id``, ``harmful``, optional ``reason``, ``categories``)
            or a VHD11K annotation file.
        store: The store: an open `Store`, or its file (created when missing).
        name: The labelled set (default: the file's stem).
        options: ``--media``, ``--path-prefix``, ``--allow-outside-paths`` and ``--duplicates``
            (`vhd.labels.rules.LabelOptions`).

    Returns:
        What was imported and the rows left out with their reasons.

    Raises:
        ConfigError: Unreadable file, missing columns, or a bad set name.
    """
    set_name = check_set_name(name or Path(path).stem)
    with using_store(store, create=True) as db:
        res = resolve_label_file(path, db, options)
        save_labelled_set(db, set_name, res.items, source=os.path.abspath(path))
    return ImportResult(
        name=set_name,
        source=str(path),
        imported=len(res.items),
        harmful=sum(i.harmful for i in res.items),
        skipped=res.skipped,
        notes=res.notes,
    )
