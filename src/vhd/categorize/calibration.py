"""Read labelled reasons for calibrating the ``embed`` method from a labels CSV.

The file is the shared labels CSV (or a VHD11K annotation file) with a ``categories`` column
(``;``-separated names or codes). Each harmful row with categories gives one labelled reason:
its ``reason`` column (VHD11K: ``harmfulType``), or, when empty, the reason of the matching
sample's annotation in the store.
"""

from __future__ import annotations

import os

from vhd.boundary import item_boundary
from vhd.errors import ConfigError
from vhd.store.sqlite import Store
from vhd.taxonomy.taxonomy import Taxonomy


def read_calibration(
    path: str | os.PathLike[str], taxonomy: Taxonomy, *, store: Store | None = None
) -> tuple[list[str], list[list[str]], int]:
    """Read labelled reasons and their category codes.

    Args:
        path: The labels file.
        taxonomy: Codes and names in the ``categories`` column are read against it.
        store: Where to look up the reason of rows that have none (by id or path).

    Returns:
        ``(reasons, codes per reason, rows left out)``; rows are left out when unharmful,
        without categories, or without a reason to be found.

    Raises:
        ConfigError: Unreadable file, or a category that the taxonomy does not know.
    """
    from vhd.labels.files import read_labels
    from vhd.labels.rules import LabelOptions

    # only reasons are read here: a row's path is never opened, just looked up in the store
    labels = read_labels(path, taxonomy=taxonomy, options=LabelOptions(allow_outside_paths=True), store=store)
    reasons: list[str] = []
    codes: list[list[str]] = []
    skipped = len(labels.errors)
    for row in labels:
        if not row.harmful or not row.categories:
            skipped += 1
            continue
        row_codes = []
        for name in row.categories:
            cat = taxonomy.find(name)
            if cat is None:
                raise ConfigError(
                    f"{path} row {row.line}: category {name!r} is not in taxonomy {taxonomy.key}: "
                    f"use its codes ({taxonomy.code_range}) or names, or pass the matching --taxonomy"
                )
            row_codes.append(cat.code)
        reason = None
        with item_boundary(row):  # a row whose reason cannot be looked up is left out
            reason = row.reason or _stored_reason(store, row.id, str(row.path) if row.path else None)
        if not reason:
            skipped += 1
            continue
        reasons.append(reason)
        codes.append(row_codes)
    return reasons, codes, skipped


def _stored_reason(store: Store | None, sample_id: str | None, path: str | None) -> str | None:
    if store is None:
        return None
    for ref in (sample_id, path):
        if ref:
            for sample in store.find_samples(ref):
                ann = store.get_annotation(sample.id)
                if ann is not None and ann.verdict.reason.strip():
                    return ann.verdict.reason.strip()
    return None
