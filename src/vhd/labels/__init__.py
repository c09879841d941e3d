"""Human labels in and out: `vhd label` (label files, labelled sets, Label Studio).

`vhd.labels.files` reads a labels file (the shared CSV/JSONL layout or a VHD11K release CSV) into
`vhd.records.LabelRow` rows; `vhd.labels.rules` says where a row's path may lead and what several
rows naming one sample mean (`LabelOptions`); `vhd.labels.sets` imports a file as a named labelled
set in the store and loads it back; `vhd.labels.labelstudio` exchanges tasks and annotations with
Label Studio (files, or its HTTP API). Every room that takes labels (bench, compare, icl, split,
categorize, the review app) reads them through here. Importing this package is cheap.

Example:
    >>> from vhd.labels import import_labels, load_labelled_set
    >>> import_labels("labels.csv", store="run.db", name="validation")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.labels.files import CATEGORIES, LabelError, LabelSet, normalize_category, read_labels
    from vhd.labels.labelstudio.api import pull_labelstudio, push_labelstudio
    from vhd.labels.labelstudio.convert import export_labelstudio, import_labelstudio
    from vhd.labels.rules import LabelOptions
    from vhd.labels.sets import ImportResult, LabelledItem, import_labels, labelled_set_names, load_labelled_set

_LAZY = {
    "CATEGORIES": "vhd.labels.files",
    "LabelError": "vhd.labels.files",
    "LabelSet": "vhd.labels.files",
    "normalize_category": "vhd.labels.files",
    "read_labels": "vhd.labels.files",
    "LabelOptions": "vhd.labels.rules",
    "ImportResult": "vhd.labels.sets",
    "LabelledItem": "vhd.labels.sets",
    "import_labels": "vhd.labels.sets",
    "load_labelled_set": "vhd.labels.sets",
    "labelled_set_names": "vhd.labels.sets",
    "export_labelstudio": "vhd.labels.labelstudio.convert",
    "import_labelstudio": "vhd.labels.labelstudio.convert",
    "push_labelstudio": "vhd.labels.labelstudio.api",
    "pull_labelstudio": "vhd.labels.labelstudio.api",
}

__all__ = [
    "CATEGORIES",
    "ImportResult",
    "LabelError",
    "LabelOptions",
    "LabelSet",
    "LabelledItem",
    "export_labelstudio",
    "import_labels",
    "import_labelstudio",
    "labelled_set_names",
    "load_labelled_set",
    "normalize_category",
    "pull_labelstudio",
    "push_labelstudio",
    "read_labels",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
