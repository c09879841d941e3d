"""URL lists: what `vhd crawl` writes and `vhd fetch` reads.

A URL list is a CSV file with a header row and a ``url`` column, plus optional columns ``id``
(a sha256 the content must have, or any identifier, kept as metadata), ``keyword``, ``source``
(``real`` or ``synthetic``) and ``kind`` (``image`` or ``video``: the content must be of that
kind). Other columns (for example ``crawler`` and ``page_url`` written by `vhd crawl`) are kept as
metadata. JSON Lines (one object a line), a JSON list of objects, and plain text (one URL a line)
are read as well. A URL list is untrusted input: every row is checked here (http or https only,
a host the HTTP client accepts: dotted-decimal IPv4, valid IDNA names; no spaces or control
characters, at most 8,192 characters), and each malformed or repeated row is reported with its
line number instead of stopping the whole list.
"""

from __future__ import annotations

import csv
import io
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from vhd.errors import ConfigError
from vhd.fileio import atomic_write, escape_cell, unescape_cell
from vhd.records import Kind, Source, UrlRow

URL_COLUMNS: Final = ("url", "link", "image_url", "video_url", "imageurl", "videourl", "media_url")
"""Column names read as the URL (case-insensitive), first non-empty one wins."""

BASE_COLUMNS: Final = ("url", "kind", "keyword", "source", "id")
"""Columns with a meaning of their own; every other column is metadata."""

MAX_URL_LENGTH: Final = 8192
"""Longer URLs are rejected."""

_SCHEMES: Final = frozenset({"http", "https"})
_IPV4_STYLE: Final = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")


@dataclass(frozen=True)
class UrlProblem:
    """A row of a URL list that will not be fetched.

    Attributes:
        line: Where it is in the list.
        url: The URL text, when there is one.
        reason: One line that says what is wrong.
        status: ``invalid`` (malformed) or ``duplicate`` (the same URL on an earlier line).
    """

    line: int
    url: str | None
    reason: str
    status: str = "invalid"


@dataclass
class UrlList:
    """Result of `read_url_list`: rows to fetch, in list order, and rows left out."""

    rows: list[UrlRow] = field(default_factory=list)
    problems: list[UrlProblem] = field(default_factory=list)


def check_url(url: str) -> str | None:
    """Return why a URL cannot be fetched, or None when it is acceptable.

    Args:
        url: The URL text (already stripped of surrounding spaces).

    Returns:
        A one-line reason, or None.
    """
    if len(url) > MAX_URL_LENGTH:
        return f"URL is longer than {MAX_URL_LENGTH} characters"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "URL contains spaces or control characters (percent-encode them)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"URL cannot be parsed ({exc})"
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        return f"only http and https URLs are fetched, not {scheme + ':' if scheme else 'a URL without a scheme'}"
    if not parts.hostname:
        return "URL has no host"
    if port == 0:
        return "URL has port 0"
    host = parts.hostname
    if _IPV4_STYLE.fullmatch(host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return (
                f"host {host!r} is not a valid IPv4 address (octets 0-255, no leading zeros); "
                "write it in plain dotted decimal, e.g. 127.0.0.1"
            )
    try:
        host.encode("idna")
    except UnicodeError:
        return f"host {host!r} is not a valid domain name"
    return _client_problem(url, host)


def _client_problem(url: str, host: str) -> str | None:
    """Why the HTTP client would refuse ``url`` (IDNA 2008 host rules), or None (also without httpx)."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - vhd[collect] not installed: the checks above only
        return None
    try:
        _ = httpx.URL(url).host  # decoding the host checks its xn-- labels
    except (httpx.InvalidURL, ValueError) as exc:
        detail = " ".join(str(exc).split())
        return f"host {host!r} is not a valid domain name ({detail}); fix the row"
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else str(value).strip()
    return text or None


def parse_url_row(line: int, record: Mapping[Any, Any]) -> UrlRow | UrlProblem:
    """Validate one record (column name to value) of a URL list.

    Args:
        line: Its line (or item) number, for reports.
        record: Column name to value.

    Returns:
        The row, or the problem that keeps it out.
    """
    if None in record:
        return UrlProblem(line, None, "more fields than the header has columns")
    columns = {str(k).strip().lower(): v for k, v in record.items()}
    url = next((_text(columns.get(c)) for c in URL_COLUMNS if _text(columns.get(c))), None)
    if url is None:
        return UrlProblem(line, None, f"no URL (column {' or '.join(URL_COLUMNS[:3])}...)")
    reason = check_url(url)
    if reason is not None:
        return UrlProblem(line, url, reason)
    kind_text = _text(columns.get("kind"))
    kind: Kind | None = None
    if kind_text is not None:
        try:
            kind = Kind(kind_text.lower())
        except ValueError:
            return UrlProblem(line, url, f"kind must be image or video, got {kind_text!r}")
    try:
        source = Source.parse(_text(columns.get("source")))
    except ValueError as exc:
        return UrlProblem(line, url, str(exc))
    meta = {
        str(k).strip(): str(v).strip()
        for k, v in record.items()
        if str(k).strip().lower() not in BASE_COLUMNS and str(k).strip().lower() not in URL_COLUMNS and _text(v)
    }
    return UrlRow(
        url=url,
        line=line,
        kind=kind,
        keyword=_text(columns.get("keyword")),
        source=source,
        id=_text(columns.get("id")),
        meta=meta,
    )


def _records_csv(text: str) -> Iterator[tuple[int, Mapping[Any, Any] | str]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = reader.fieldnames
    except csv.Error as exc:
        raise ConfigError(f"cannot read the header row ({exc}); fix the file") from exc
    names = {str(f).strip().lower() for f in fields or []}
    if not names & set(URL_COLUMNS):
        raise ConfigError("a URL list CSV needs a header row with a 'url' column")
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield reader.line_num, f"malformed CSV row ({exc})"
            continue
        if any(_text(v) for v in record.values() if not isinstance(v, list)):
            # vhd's URL lists escape formula-like cells (`write_url_list`); give back the text
            yield reader.line_num, {k: unescape_cell(v) if isinstance(v, str) else v for k, v in record.items()}


def _records_jsonl(text: str) -> Iterator[tuple[int, Mapping[Any, Any] | str]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON ({exc.msg})"
            continue
        yield number, value if isinstance(value, dict) else "expected a JSON object"


def _records_json(text: str) -> Iterator[tuple[int, Mapping[Any, Any] | str]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc}); fix the file") from exc
    if isinstance(value, dict):
        value = next((v for k, v in value.items() if k in ("urls", "rows", "items") and isinstance(v, list)), None)
    if not isinstance(value, list):
        raise ConfigError("a JSON URL list must be a list of objects (or hold one under 'urls')")
    for number, item in enumerate(value, start=1):
        if isinstance(item, str):
            yield number, {"url": item}
        else:
            yield number, item if isinstance(item, dict) else "expected an object or a URL string"


def _records_text(text: str) -> Iterator[tuple[int, Mapping[Any, Any] | str]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, {"url": line}


def read_url_list(path: str | Path) -> UrlList:
    """Read and validate a URL list (CSV, JSONL, JSON or plain text, by extension).

    Args:
        path: The list; ``.csv``, ``.jsonl``, ``.json``, or anything else read as one URL a line.

    Returns:
        The valid rows (each URL once, first occurrence kept) and the problems, in list order.

    Raises:
        ConfigError: The file is missing, not UTF-8, or (CSV) has no header with a url column.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"URL list {p} is not UTF-8 text ({exc.reason}); convert it") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read URL list {p}: {exc.strerror or exc}; check the path") from exc
    ext = p.suffix.lower()
    readers = {".csv": _records_csv, ".jsonl": _records_jsonl, ".json": _records_json}
    try:
        records = list(readers.get(ext, _records_text)(text))
    except ConfigError as exc:
        raise ConfigError(f"URL list {p}: {exc}") from exc
    result = UrlList()
    first_line: dict[str, int] = {}
    for line, record in records:
        item = UrlProblem(line, None, record) if isinstance(record, str) else parse_url_row(line, record)
        if isinstance(item, UrlProblem):
            result.problems.append(item)
        elif item.url in first_line:
            result.problems.append(
                UrlProblem(line, item.url, f"same URL as line {first_line[item.url]}", status="duplicate")
            )
        else:
            first_line[item.url] = line
            result.rows.append(item)
    return result


def row_record(row: UrlRow) -> dict[str, str]:
    """Return a row as the column-to-text mapping written to a URL list."""
    record = {
        "url": row.url,
        "kind": row.kind.value if row.kind else "",
        "keyword": row.keyword or "",
        "source": row.source or "",
        "id": row.id or "",
    }
    record.update(row.meta)
    return record


def write_url_list(rows: Iterable[UrlRow], path: str | Path) -> Path:
    """Write rows as a URL-list CSV, atomically (a temporary file renamed over the target).

    Columns: ``url, kind, keyword, source, id``, then every metadata column in order of first
    appearance.

    Args:
        rows: The rows.
        path: The CSV to write (its folder is created).

    Returns:
        The path written.
    """
    records = [row_record(r) for r in rows]
    columns = list(BASE_COLUMNS)
    for record in records:
        columns += [k for k in record if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: escape_cell(v) for k, v in record.items()} for record in records)
    return atomic_write(path, buf.getvalue())
