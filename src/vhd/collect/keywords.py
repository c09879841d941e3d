"""The keyword taxonomy: the search terms a dataset is collected with, each harmful or not.

vhd ships the 45 keywords of VHD11K (42 harmful, 3 unharmful: appendix A of the paper) as package
data (``vhd/collect/data/keywords.yaml``). A user file replaces them: YAML or JSON (a list of
``{name, harmful}`` mappings, optionally under a ``keywords`` key, or a mapping of name to
harmful), CSV (columns ``keyword`` or ``name``, and ``harmful``), or plain text (one keyword a
line, optionally followed by a tab or comma and ``harmful``/``unharmful``; harmful by default).

Example:
    >>> from vhd.collect.keywords import load_keywords
    >>> words = load_keywords()
    >>> len(words), sum(k.harmful for k in words)
    (45, 42)
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from vhd.errors import ConfigError
from vhd.fileio import escape_cell, unescape_cell

FORMATS: Final = ("table", "csv", "json")
"""Output formats of `format_keywords`."""

_TRUE: Final = frozenset({"yes", "y", "true", "1", "harmful"})
_FALSE: Final = frozenset({"no", "n", "false", "0", "unharmful", "harmless"})
_MAX_LENGTH: Final = 200


@dataclass(frozen=True)
class Keyword:
    """One search keyword.

    Attributes:
        name: The keyword as searched for (e.g. ``"knife in hand"``).
        harmful: Whether content found with it is expected to be harmful (the 3 unharmful
            keywords of VHD11K are near misses kept on purpose).
    """

    name: str
    harmful: bool


def _harmful(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{where}: harmful must be yes/no (or harmful/unharmful), got {value!r}")


def _keyword(name: Any, harmful: Any, where: str) -> Keyword:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: a keyword needs a non-empty name")
    text = " ".join(name.split())
    if len(text) > _MAX_LENGTH:
        raise ConfigError(f"{where}: keyword is longer than {_MAX_LENGTH} characters")
    return Keyword(text, _harmful(True if harmful is None else harmful, where))


def _from_data(data: Any, where: str) -> list[Keyword]:
    if isinstance(data, dict) and "keywords" in data:
        data = data["keywords"]
    if isinstance(data, dict):
        return [_keyword(name, harmful, f"{where}: {name}") for name, harmful in data.items()]
    if not isinstance(data, list):
        raise ConfigError(f"{where}: expected a list of keywords (or a mapping of keyword to harmful)")
    out = []
    for i, item in enumerate(data, start=1):
        if isinstance(item, str):
            out.append(_keyword(item, True, f"{where} item {i}"))
        elif isinstance(item, dict):
            out.append(_keyword(item.get("name", item.get("keyword")), item.get("harmful"), f"{where} item {i}"))
        else:
            raise ConfigError(f"{where} item {i}: expected a keyword or a {{name, harmful}} mapping")
    return out


def _cell(value: Any) -> Any:
    """A CSV cell as written before `vhd.fileio.escape_cell` (vhd's keyword CSVs escape formulas)."""
    return unescape_cell(value) if isinstance(value, str) else value


def _from_csv(text: str, where: str) -> list[Keyword]:
    reader = csv.DictReader(io.StringIO(text))
    columns = {c.strip().lower(): c for c in reader.fieldnames or []}
    name_col = columns.get("keyword") or columns.get("name")
    if name_col is None:
        raise ConfigError(f"{where}: a keyword CSV needs a 'keyword' (or 'name') column")
    harm_col = columns.get("harmful")
    return [
        _keyword(_cell(row.get(name_col)), row.get(harm_col) if harm_col else None, f"{where} line {n}")
        for n, row in enumerate(reader, start=2)
        if any((v or "").strip() for v in row.values() if isinstance(v, str))
    ]


def _from_text(text: str, where: str) -> list[Keyword]:
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, flag = line.replace("\t", ",").rpartition(",")
        if sep and flag.strip().lower() in _TRUE | _FALSE:
            out.append(_keyword(name, flag, f"{where} line {n}"))
        else:
            out.append(_keyword(line, True, f"{where} line {n}"))
    return out


def parse_keywords(text: str, fmt: str, *, name: str = "keywords") -> list[Keyword]:
    """Parse keywords from text.

    Args:
        text: The content.
        fmt: ``yaml``, ``json``, ``csv`` or ``txt``.
        name: What to call the source in error messages.

    Returns:
        The keywords, in file order.

    Raises:
        ConfigError: The content is malformed, empty, or names a keyword twice.
    """
    if fmt in ("yaml", "yml"):
        import yaml

        try:
            words = _from_data(yaml.safe_load(text), name)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: not valid YAML ({exc}); fix the file") from exc
    elif fmt == "json":
        try:
            words = _from_data(json.loads(text), name)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{name}: not valid JSON ({exc}); fix the file") from exc
    elif fmt == "csv":
        words = _from_csv(text, name)
    elif fmt == "txt":
        words = _from_text(text, name)
    else:
        raise ConfigError(f"unknown keyword file format {fmt!r}; use yaml, json, csv or txt")
    if not words:
        raise ConfigError(f"{name}: no keywords found")
    seen: set[str] = set()
    for word in words:
        key = word.name.casefold()
        if key in seen:
            raise ConfigError(f"{name}: keyword {word.name!r} is listed twice; keep one")
        seen.add(key)
    return words


def load_keywords(path: str | Path | None = None) -> list[Keyword]:
    """Load the keyword taxonomy: the packaged VHD11K keywords, or a user file instead.

    Args:
        path: A ``.yaml``/``.yml``, ``.json``, ``.csv`` or ``.txt`` file; None for the
            packaged list.

    Returns:
        The keywords, in file order.

    Raises:
        ConfigError: The file is missing or malformed.
    """
    if path is None:
        text = resources.files("vhd.collect").joinpath("data/keywords.yaml").read_text(encoding="utf-8")
        return parse_keywords(text, "yaml", name="packaged keywords")
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".") or "txt"
    if fmt not in ("yaml", "yml", "json", "csv", "txt"):
        raise ConfigError(f"{p}: keyword files must end in .yaml, .json, .csv or .txt")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read keyword file {p}: {exc}; check the path") from exc
    return parse_keywords(text, fmt, name=str(p))


def format_keywords(words: list[Keyword], fmt: str = "table") -> str:
    """Render keywords as an aligned table, CSV (``keyword,harmful``) or JSON.

    Args:
        words: The keywords.
        fmt: ``table``, ``csv`` or ``json``.

    Returns:
        The text, ending with a newline.

    Raises:
        ConfigError: Unknown format.
    """
    if fmt == "json":
        return json.dumps([asdict(w) for w in words], indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["keyword", "harmful"])
        writer.writerows([escape_cell(w.name), "yes" if w.harmful else "no"] for w in words)
        return buf.getvalue()
    if fmt != "table":
        raise ConfigError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    width = max([len("keyword"), *(len(w.name) for w in words)])
    lines = [f"{'keyword':<{width}}  harmful", f"{'-' * width}  -------"]
    lines += [f"{w.name:<{width}}  {'yes' if w.harmful else 'no'}" for w in words]
    harmful = sum(w.harmful for w in words)
    lines.append(f"{len(words)} keywords: {harmful} harmful, {len(words) - harmful} unharmful")
    return "\n".join(lines) + "\n"
