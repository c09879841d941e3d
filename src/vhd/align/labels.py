"""Labelled sets in the store: human labels under a name, tied to registered samples.

A labelled set is what people decided about some samples (harmful yes/no, an optional reason
and categories), kept in the store's ``labelled_sets`` table under a name, so later commands
(``vhd icl --validation NAME``, Label Studio export) can refer to it. Samples given by path are
loaded through `vhd.media` (validated, hashed, registered as samples); samples given by id must
already be in the store.

Example:
    >>> from vhd.align import import_labels, load_labelled_set
    >>> import_labels("labels.csv", store="run.db", name="validation")  # doctest: +SKIP
    >>> items = load_labelled_set("run.db", "validation")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhd.errors import ConfigError
from vhd.records import LabelledSample
from vhd.store.sqlite import Store

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
    """

    name: str
    source: str
    imported: int = 0
    harmful: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)


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


def load_labelled_set(store: str | os.PathLike[str], name: str) -> list[LabelledItem]:
    """Open a store file and read one labelled set (see `read_labelled_set`)."""
    with Store(store) as db:
        return read_labelled_set(db, name)


def resolve_labels(path: str | os.PathLike[str], store: Store) -> tuple[list[LabelledItem], list[tuple[int, str]]]:
    """Read a labels file and tie every row to a registered sample.

    Rows with a path are loaded through `vhd.media` (validated, hashed) and registered in the
    store; rows with only an id must name a sample the store holds.

    Args:
        path: A labels CSV or a VHD11K annotation file (see `vhd.store.labels.read_labels`).
        store: An open store.

    Returns:
        The usable items in file order, and ``(row, reason)`` for every row left out.
    """
    from vhd.media.discover import discover
    from vhd.media.load import load_sample
    from vhd.store.labels import read_labels

    labels = read_labels(path)
    skipped = [(e.line, e.message) for e in labels.errors]
    items: list[LabelledItem] = []
    for row in labels:
        if row.path is not None:
            found = discover([row.path], frame_folders=True)
            if found.skipped or len(found.items) != 1:
                why = found.skipped[0].reason if found.skipped else "not a single image, video or frame folder"
                skipped.append((row.line, f"{row.path}: {why}"))
                continue
            try:
                loaded = load_sample(found.items[0])
            except Exception as exc:  # MediaError, or a decoder's own error on a corrupt file
                skipped.append((row.line, f"{row.path}: {exc}"))
                continue
            sample = loaded.sample
            if row.id is not None and row.id != sample.id:
                skipped.append((row.line, f"id {row.id[:12]} does not match the file's content ({sample.id[:12]})"))
                continue
            store.upsert_sample(sample)
            sid, where, kind = sample.id, Path(sample.path), sample.kind
        elif row.id is not None:
            stored = store.get_sample(row.id)
            if stored is None:
                skipped.append((row.line, f"sample {row.id[:12]} is not in the store: give its path instead"))
                continue
            sid, where, kind = stored.id, Path(stored.path), stored.kind
        else:  # read_labels leaves out rows with neither
            continue
        items.append(
            LabelledSample(
                id=sid, path=where, kind=kind, harmful=row.harmful, reason=row.reason, categories=list(row.categories)
            )
        )
    return items, skipped


def import_labels(
    path: str | os.PathLike[str], *, store: str | os.PathLike[str] = "vhd.db", name: str | None = None
) -> ImportResult:
    """Import a labels file into the store as a labelled set (the library call behind ``vhd label``).

    Args:
        path: A labels CSV (``path`` or ``id``, ``harmful``, optional ``reason``, ``categories``)
            or a VHD11K annotation file.
        store: The store file (created when missing).
        name: The labelled set (default: the file's stem).

    Returns:
        What was imported and the rows left out with their reasons.

    Raises:
        ConfigError: Unreadable file, missing columns, or a bad set name.
    """
    set_name = check_set_name(name or Path(path).stem)
    with Store(store) as db:
        items, skipped = resolve_labels(path, db)
        save_labelled_set(db, set_name, items, source=os.path.abspath(path))
    return ImportResult(
        name=set_name,
        source=str(path),
        imported=len(items),
        harmful=sum(i.harmful for i in items),
        skipped=skipped,
    )
