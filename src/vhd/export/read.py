"""`read_table`: a JSON Lines or Parquet export read back under the one export schema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, MissingDependencyError
from vhd.export.schema import (
    arrow_schema,
)
from vhd.fileio import printable

JSONL_BLOCK_BYTES = 2**20
"""Bytes `read_table` reads of a JSON Lines file at a time; also the longest line it accepts."""


def read_table(path: str | os.PathLike[str]) -> Any:
    """Read a JSON Lines or Parquet export back as a ``pyarrow.Table`` under the export schema.

    Both formats give the same column types (`vhd.export.schema.arrow_schema`): timestamps as
    timestamps, and columns that are null in every row or lists that are always empty keep their
    types, which inferring readers (``pandas.read_json``) cannot know. ``.to_pandas()`` gives a
    DataFrame.

    A Parquet file is checked against the schema from its footer before any row is read: a
    missing column or one of another type (nested, or a number where text belongs) is refused at
    once, whatever the number of rows. A JSON Lines file is read in blocks of `JSONL_BLOCK_BYTES`
    (1 MiB), so a line longer than that is refused after reading one block, never held whole.

    Raises:
        ConfigError: Not a ``.jsonl`` or ``.parquet`` file, or the file does not match the schema.
        MissingDependencyError: pyarrow is not installed.
    """
    try:
        import pyarrow as pa
        import pyarrow.json as pj
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet") from exc
    p = Path(path)
    schema = arrow_schema()
    try:
        if p.suffix == ".parquet":
            found = pq.read_schema(p)
            for want in schema:
                index = found.get_field_index(want.name)
                if index < 0:
                    raise pa.ArrowInvalid(f"no column {want.name!r}")
                if found.field(index).type != want.type:
                    raise pa.ArrowInvalid(f"column {want.name!r} is {found.field(index).type}, not {want.type}")
            return pq.read_table(p, schema=schema)
        if p.suffix == ".jsonl":
            if p.stat().st_size == 0:
                return schema.empty_table()
            options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
            blocks = pj.ReadOptions(block_size=JSONL_BLOCK_BYTES)
            return pj.read_json(p, read_options=blocks, parse_options=options).select(schema.names)
    except (pa.ArrowException, OSError) as exc:  # ArrowException: ArrowInvalid, ArrowNotImplementedError...
        first = printable((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:300]
        if "straddl" in first:  # pyarrow's words for a JSON line longer than its block
            first = f"a line is longer than {JSONL_BLOCK_BYTES // 2**20} MiB"
        raise ConfigError(f"{p} is not a vhd export of this version ({first}): export it again") from None
    raise ConfigError(f"{p}: read_table reads .jsonl and .parquet exports; name the file with one of them")
