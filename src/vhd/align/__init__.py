"""Agreement with human ratings: `vhd align` (SMID).

`align_ratings` (`vhd.align.smid`) annotates a rated image set (the Socio-Moral Image Database's
norms, or any CSV of mean ratings), maps ratings to harmful / not harmful by two cut-offs and
reports agreement (accuracy, Cohen's kappa with a bootstrap interval). Labels, in-context search
and the comparison, which lived here in 0.1, are the rooms `vhd.labels`, `vhd.icl` and
`vhd.compare`; their old names still import from here, with a deprecation warning.

Example:
    >>> from vhd.align import align_ratings
    >>> result = align_ratings("smid_norms.csv", "SMID_images/", store="run.db")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.align.smid import align_ratings

_LAZY = {
    "align_ratings": "vhd.align.smid",
}

_MOVED = {
    "compare": "vhd.compare.runner",
    "search_icl": "vhd.icl.search",
    "import_labels": "vhd.labels.sets",
    "load_labelled_set": "vhd.labels.sets",
    "export_labelstudio": "vhd.labels.labelstudio.convert",
    "import_labelstudio": "vhd.labels.labelstudio.convert",
    "build_queue": "vhd.compare.review_queue",
}
"""Names this package exported in 0.1 that live in other rooms now (a deprecation warning each)."""

__all__ = [
    "align_ratings",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, moved=_MOVED)
