"""Label Studio: tasks out, annotations back (``vhd label --export/--import/--push/--pull-labelstudio``).

`vhd.labels.labelstudio.convert` builds tasks (the labelling interface, media URLs, vhd's verdict as
a prediction) and imports an exported JSON file as a labelled set; `vhd.labels.labelstudio.read`
parses and validates what Label Studio wrote (bounded: depth, numbers, size);
`vhd.labels.labelstudio.api` talks to a running Label Studio over HTTP (push, pull). Plain httpx,
not label-studio-sdk (the ``labelstudio`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.labels.labelstudio.api import LabelStudioApi, PullResult, PushResult, pull_labelstudio, push_labelstudio
    from vhd.labels.labelstudio.convert import (
        LabelStudioImport,
        build_tasks,
        export_labelstudio,
        import_labelstudio,
        labeling_config,
    )
    from vhd.labels.labelstudio.read import read_tasks

_LAZY = {
    "LabelStudioImport": "vhd.labels.labelstudio.convert",
    "build_tasks": "vhd.labels.labelstudio.convert",
    "export_labelstudio": "vhd.labels.labelstudio.convert",
    "import_labelstudio": "vhd.labels.labelstudio.convert",
    "labeling_config": "vhd.labels.labelstudio.convert",
    "LabelStudioApi": "vhd.labels.labelstudio.api",
    "PullResult": "vhd.labels.labelstudio.api",
    "PushResult": "vhd.labels.labelstudio.api",
    "pull_labelstudio": "vhd.labels.labelstudio.api",
    "push_labelstudio": "vhd.labels.labelstudio.api",
    "read_tasks": "vhd.labels.labelstudio.read",
}

__all__ = [
    "LabelStudioApi",
    "LabelStudioImport",
    "PullResult",
    "PushResult",
    "build_tasks",
    "export_labelstudio",
    "import_labelstudio",
    "labeling_config",
    "pull_labelstudio",
    "push_labelstudio",
    "read_tasks",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
