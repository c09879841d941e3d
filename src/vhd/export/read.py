"""`read_table`: a JSON Lines or Parquet export read back under the one export schema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, MissingDependencyError
from vhd.export.schema import (
    arrow_schema,
)


def read_table(path: str | os.PathLike[str]) -> Any:
    """Read a JSON Lines or Parquet export back as a ``pyarrow.Table`` under the export schema.

    Both formats give the same column types (`vhd.export.schema.arrow_schema`): timestamps as
    timestamps, and columns that are null in every row or lists that are always empty keep their
    types, which inferring readers (``pandas.read_json``) cannot know. ``.to_pandas()`` gives a
    DataFrame.

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
            return pq.read_table(p, schema=schema)
        if p.suffix == ".jsonl":
            if p.stat().st_size == 0:
                return schema.empty_table()
            options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
            return pj.read_json(p, parse_options=options).select(schema.names)
    except (pa.ArrowInvalid, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{p} is not a vhd export of this version ({first}): export it again") from None
    raise ConfigError(f"{p}: read_table reads .jsonl and .parquet exports; name the file with one of them")
