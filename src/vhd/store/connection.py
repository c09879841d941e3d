r"""The SQLite connection every store opens: text that SQLite cannot take is stored escaped, not a crash.

A file name that is not valid UTF-8 reaches Python as a string with surrogate characters (and so
does any such command-line argument: a ``--reason``, a path to look up); binding one makes
`sqlite3` raise ``UnicodeEncodeError`` and, mid-run, ends the run. `Connection` (pass it as
``sqlite3.connect(..., factory=Connection)``) gives every bound string that cannot be encoded the
treatment of `vhd.fileio.display_path` (its bytes as ``\xNN``), on every ``execute`` and
``executemany``, through the connection and through its cursors alike. Valid text is untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from vhd.fileio import display_path


def _storable(value: Any) -> Any:
    if type(value) is str and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return display_path(value)
    return value


def storable_params(params: Any) -> Any:
    """Return SQL parameters (a sequence or a mapping) with every unencodable string escaped."""
    if isinstance(params, Mapping):
        return {k: _storable(v) for k, v in params.items()}
    if isinstance(params, list | tuple):  # the common case, many ASCII strings (ids, paths): one check in C
        try:
            if "".join(params).isascii():
                return params
        except TypeError:  # not all strings
            pass
    return tuple(_storable(v) for v in params)


class Cursor(sqlite3.Cursor):
    """A cursor whose parameters go through `storable_params`."""

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        """Execute one statement."""
        return super().execute(sql, storable_params(parameters))

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Cursor:
        """Execute one statement for each set of parameters."""
        return super().executemany(sql, (storable_params(p) for p in seq_of_parameters))


class Connection(sqlite3.Connection):
    """A connection whose statements (its own and its cursors') take any Python string."""

    def cursor(self, factory: Any = Cursor) -> Any:
        """Open a cursor (a `Cursor` by default)."""
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        """Execute one statement on a new cursor."""
        cursor: sqlite3.Cursor = self.cursor().execute(sql, parameters)
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        """Execute one statement for each set of parameters on a new cursor."""
        cursor: sqlite3.Cursor = self.cursor().executemany(sql, parameters)
        return cursor
