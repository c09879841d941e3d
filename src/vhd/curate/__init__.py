"""Curating a dataset: ingest, frames, duplicates, train/test splits and removals.

Ingest media into a store, extract video frames, find duplicates, split into train and test,
and take samples out on request.

The public names load their modules on first use, so ``import vhd.curate`` stays cheap.

Example:
    >>> from vhd.curate import find_duplicates, ingest, split_store  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.curate.clusters import cluster
    from vhd.curate.dedup import DedupResult, Leak, apply_marks, find_duplicates, find_leaks
    from vhd.curate.fingerprint import Fingerprint, fingerprint
    from vhd.curate.frames import FramesResult, VideoOutcome, extract_frames
    from vhd.curate.hashindex import HammingIndex
    from vhd.curate.ingest import IngestDefaults, IngestResult, ingest
    from vhd.curate.remove import RemoveResult, remove_samples
    from vhd.curate.split import SplitResult, split_store, write_split_csv

_EXPORTS = {
    "Member": "vhd.curate.members",
    "cluster": "vhd.curate.clusters",
    "DedupResult": "vhd.curate.dedup",
    "Leak": "vhd.curate.dedup",
    "apply_marks": "vhd.curate.dedup",
    "find_duplicates": "vhd.curate.dedup",
    "find_leaks": "vhd.curate.dedup",
    "Fingerprint": "vhd.curate.fingerprint",
    "fingerprint": "vhd.curate.fingerprint",
    "FramesResult": "vhd.curate.frames",
    "VideoOutcome": "vhd.curate.frames",
    "extract_frames": "vhd.curate.frames",
    "HammingIndex": "vhd.curate.hashindex",
    "IngestDefaults": "vhd.curate.ingest",
    "IngestResult": "vhd.curate.ingest",
    "ingest": "vhd.curate.ingest",
    "RemoveResult": "vhd.curate.remove",
    "remove_samples": "vhd.curate.remove",
    "SplitResult": "vhd.curate.split",
    "split_store": "vhd.curate.split",
    "write_split_csv": "vhd.curate.split",
}

__all__ = [
    "DedupResult",
    "Fingerprint",
    "FramesResult",
    "HammingIndex",
    "IngestDefaults",
    "IngestResult",
    "Leak",
    "Member",
    "RemoveResult",
    "SplitResult",
    "VideoOutcome",
    "apply_marks",
    "cluster",
    "extract_frames",
    "find_duplicates",
    "find_leaks",
    "fingerprint",
    "ingest",
    "remove_samples",
    "split_store",
    "write_split_csv",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
