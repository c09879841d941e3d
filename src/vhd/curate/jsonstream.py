r"""Write a JSON object as ``json.dump(obj, fh, indent=2, ensure_ascii=False)`` would, lists streamed.

The object is written exactly as that call would, but long lists, given as iterators, are
written an item at a time, so they are never held whole.

Example:
    >>> import io
    >>> fh = io.StringIO()
    >>> write_object(fh, [("n", 2), ("items", iter([{"a": 1}]))])
    >>> fh.getvalue() == json.dumps({"n": 2, "items": [{"a": 1}]}, indent=2) + "\n"
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO, Any


def dumps_at(value: Any, level: int) -> str:
    """``value`` as ``json.dump(indent=2)`` writes it ``level`` levels deep (its first line unindented)."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + "  " * level)


def _write_list(fh: IO[str], items: Iterator[Any]) -> None:
    sep = "[\n    "
    for item in items:
        fh.write(sep + dumps_at(item, 2))
        sep = ",\n    "
    fh.write("[]" if sep == "[\n    " else "\n  ]")


def write_object(fh: IO[str], fields: Iterable[tuple[str, Any]]) -> None:
    """Write an object of ``fields`` (key, value) and a newline; iterator values become lists, streamed."""
    fh.write("{")
    sep = "\n  "
    for key, value in fields:
        fh.write(f"{sep}{json.dumps(key, ensure_ascii=False)}: ")
        if isinstance(value, Iterator):
            _write_list(fh, value)
        else:
            fh.write(dumps_at(value, 1))
        sep = ",\n  "
    fh.write("}\n" if sep == "\n  " else "\n}\n")
