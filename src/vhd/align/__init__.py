"""Aligning the annotator with people.

Human labels, in-context example search, agreement with human ratings (SMID), the review queue
and the cost/quality comparison. Importing this package is cheap: each name loads its module on
first use.

Example:
    >>> from vhd.align import import_labels, load_labelled_set
    >>> import_labels("labels.csv", store="run.db", name="validation")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.align.compare import compare
    from vhd.align.icl_search import search_icl
    from vhd.align.labels import import_labels, load_labelled_set
    from vhd.align.labelstudio import export_labelstudio, import_labelstudio
    from vhd.align.review import build_queue
    from vhd.align.smid import align_ratings

_LAZY = {
    "compare": "vhd.align.compare",
    "search_icl": "vhd.align.icl_search",
    "import_labels": "vhd.align.labels",
    "load_labelled_set": "vhd.align.labels",
    "export_labelstudio": "vhd.align.labelstudio",
    "import_labelstudio": "vhd.align.labelstudio",
    "build_queue": "vhd.align.review",
    "align_ratings": "vhd.align.smid",
}

__all__ = [
    "align_ratings",
    "build_queue",
    "compare",
    "export_labelstudio",
    "import_labels",
    "import_labelstudio",
    "load_labelled_set",
    "search_icl",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
