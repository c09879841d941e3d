"""Read a review queue (`vhd review-queue --out FILE`) into the order the gallery shows.

Each row gives a rank, a sample id and the votes (``judge=yes; config:ab12=no; detector:nudenet=yes``).
A row that cannot be used is skipped with its reason; the others are kept.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field

from vhd.errors import ConfigError
from vhd.store.gallery import QueueEntry

_SHA = re.compile(r"[0-9a-f]{64}")


@dataclass
class QueueFile:
    """A review queue as read.

    Attributes:
        entries: Usable rows in rank order.
        skipped: ``(row number, reason)`` for every row left out.
    """

    entries: list[QueueEntry] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def _votes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(";"):
        name, sep, value = part.partition("=")
        if sep:
            out[name.strip()] = value.strip().lower()
    return out


def read_queue(path: str | os.PathLike[str]) -> QueueFile:
    """Read a queue CSV.

    Raises:
        ConfigError: The file cannot be read or has no ``sample_id`` column.
    """
    out = QueueFile()
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames or "sample_id" not in reader.fieldnames:
                raise ConfigError(
                    f"{path} is not a review queue (no sample_id column): write one with `vhd review-queue`"
                )
            for line, row in enumerate(reader, start=2):
                sample_id = (row.get("sample_id") or "").strip().lower()
                if not _SHA.fullmatch(sample_id):
                    out.skipped.append((line, f"sample_id {sample_id[:20]!r} is not a sha256 id"))
                    continue
                try:
                    rank = int(row.get("rank") or line - 1)
                except ValueError:
                    rank = line - 1
                votes = _votes(row.get("votes") or "")
                judge = (row.get("judge") or votes.get("judge") or "").strip().lower()
                dissent = any(k.startswith("detector:") and v in ("yes", "no") and v != judge for k, v in votes.items())
                out.entries.append(QueueEntry(sample_id, rank, dissent))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"cannot read review queue {path}: {exc}; pass a CSV from `vhd review-queue --out`") from exc
    ordered = sorted(out.entries, key=lambda e: e.rank)  # ranks renumbered 1..N: the gallery pages by rank
    out.entries = [QueueEntry(e.sample_id, i, e.detector_dissent) for i, e in enumerate(ordered, start=1)]
    return out
