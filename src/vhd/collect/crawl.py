"""``vhd crawl``: search sources for each keyword and write a URL list that `vhd fetch` reads.

Sources sit behind one small interface (`CrawlSource.search`) and a registry of ``"module:Class"``
names (`CRAWL_SOURCES`, a `vhd.registry.Registry`), so a source's library (icrawler, yt-dlp) is
imported only when that source is used. Third-party packages add sources through the
``vhd.crawl_sources`` entry-point group. A source is named ``NAME`` or ``NAME:OPTION``
(``icrawler:google``, ``ytdlp:youtube``), like a model spec.

The output CSV holds one row per URL with its ``kind``, ``keyword``, ``source`` (``real``: found
on the web) and the ``crawler`` that found it, plus whatever the source knows (the page it came
from, size, author...). It is rewritten atomically after every keyword, and a small state file
beside it (``<out>.state.json``) records which keywords each crawler finished, so an
interrupted crawl resumes with the next keyword and running it again changes nothing. A URL found
again for another keyword keeps its first keyword.

Example:
    >>> from vhd.collect.crawl import crawl
    >>> result = crawl(["toy", "gun"], source="pexels", per_keyword=40, out="urls.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vhd.collect.keywords import Keyword, load_keywords
from vhd.collect.urls import read_url_list, write_url_list
from vhd.errors import ConfigError, VhdError
from vhd.fileio import atomic_write
from vhd.records import Kind, Source, UrlRow
from vhd.registry import BuiltinEntries, Registry


class CrawlError(VhdError):
    """A source could not search.

    Attributes:
        fatal: Searching further keywords is pointless (bad key, rate limit reached).
    """

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass
class CrawlHit:
    """One item a source found.

    Attributes:
        url: Direct URL of the media file.
        kind: Image or video.
        page_url: The web page it was found on, when known (stable; good for attribution).
        extra: Anything else the source knows (author, size, licence...), as text.
    """

    url: str
    kind: Kind
    page_url: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


class CrawlSource(abc.ABC):
    """A searchable source of image or video URLs.

    Subclasses set `name` and `kinds`, take ``(option, settings)`` in their constructor
    (``option`` is the text after the colon of ``NAME:OPTION``, or None) and implement `search`.
    Constructors check credentials and imports, so a crawl fails before any work.
    """

    name: ClassVar[str] = ""
    kinds: ClassVar[frozenset[Kind]] = frozenset()

    def __init__(self, option: str | None = None, settings: Mapping[str, Any] | None = None) -> None:
        self.option = option
        self.settings = dict(settings or {})

    @property
    def spec(self) -> str:
        """``NAME`` or ``NAME:OPTION``, as recorded in the ``crawler`` column."""
        return f"{self.name}:{self.option}" if self.option else self.name

    @abc.abstractmethod
    def search(self, keyword: str, limit: int, kind: Kind) -> list[CrawlHit]:
        """Return up to ``limit`` hits of ``kind`` for ``keyword``, best first.

        Raises:
            CrawlError: The search failed.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (optional)."""


CRAWL_SOURCES: Registry[type[CrawlSource]] = Registry(
    "crawl source", "vhd.crawl_sources", base=CrawlSource, plural="sources"
)
"""Every crawl source: built-ins below, plugins from the ``vhd.crawl_sources`` entry-point group."""

CRAWL_SOURCES.add(
    "pexels",
    "vhd.collect.pexels:PexelsSource",
    extra="collect",
    needs=["httpx"],
    summary="Pexels stock photos and videos",
)
CRAWL_SOURCES.add(
    "icrawler",
    "vhd.collect.icrawler_source:ICrawlerSource",
    extra="icrawler",
    needs=["icrawler"],
    summary="image search engines, icrawler:bing (default), icrawler:google or icrawler:baidu",
)
CRAWL_SOURCES.add(
    "ytdlp",
    "vhd.collect.ytdlp_source:YtDlpSource",
    extra="ytdlp",
    needs={"yt_dlp": "yt-dlp"},
    summary="video sites through yt-dlp, ytdlp:youtube (default), ytdlp:bilibili, ytdlp:niconico...",
)

BUILTIN: BuiltinEntries = CRAWL_SOURCES.builtin
"""Built-in sources by name (assigning ``"module:Class"`` registers one)."""

ENTRY_POINT_GROUP = CRAWL_SOURCES.group


def source_names() -> list[str]:
    """Names of every registered source (built-in and plugins), sorted."""
    return CRAWL_SOURCES.names()


def create_source(spec: str, settings: Mapping[str, Any] | None = None) -> CrawlSource:
    """Build a source from ``NAME`` or ``NAME:OPTION``.

    The source's constructor checks its option, then its library (so an unknown engine is named
    as such even where the library is missing); either way a crawl fails before any work.

    Args:
        spec: e.g. ``pexels``, ``icrawler:bing``, ``ytdlp:youtube``.
        settings: Source-specific settings (e.g. ``base_url`` for pexels).

    Raises:
        ConfigError: Unknown source (the message lists the valid ones), or bad settings.
        MissingDependencyError: The source's library is not installed.
    """
    name, _, option = spec.strip().partition(":")
    cls = CRAWL_SOURCES.load(name, check_needs=False)
    return cls(option or None, settings)


@dataclass
class KeywordResult:
    """What one keyword gave.

    Attributes:
        keyword: The keyword.
        kind: The kind searched for.
        found: Hits the source returned.
        added: New rows written (hits minus URLs already listed).
        skipped: The keyword was finished by an earlier run.
        error: Why the search failed, if it did.
    """

    keyword: str
    kind: str
    found: int = 0
    added: int = 0
    skipped: bool = False
    error: str | None = None


@dataclass
class CrawlResult:
    """Result of `crawl`.

    Attributes:
        out: The URL list written.
        crawler: The source spec.
        keywords: One entry per keyword and kind, in order.
        rows: Rows in the output file.
        stopped: Why the crawl stopped early (a fatal source error), if it did.
    """

    out: Path
    crawler: str
    keywords: list[KeywordResult] = field(default_factory=list)
    rows: int = 0
    stopped: str | None = None

    @property
    def errors(self) -> int:
        """Keywords whose search failed."""
        return sum(1 for k in self.keywords if k.error)

    def exit_code(self) -> int:
        """0 when every keyword was searched; 1 when some failed or the crawl stopped early."""
        return 1 if self.errors or self.stopped else 0

    def describe(self) -> list[str]:
        """Lines of a summary for people."""
        added = sum(k.added for k in self.keywords)
        done = sum(1 for k in self.keywords if not k.skipped and not k.error)
        skipped = sum(1 for k in self.keywords if k.skipped)
        lines = [
            f"{self.crawler}: searched {done} keyword(s), {skipped} finished earlier, {self.errors} failed; "
            f"{added} new URL(s), {self.rows} in {self.out}"
        ]
        lines += [f"{k.keyword} ({k.kind}): {k.error}" for k in self.keywords if k.error]
        if self.stopped:
            lines.append(f"stopped: {self.stopped}; run the same command again to go on")
        return lines


def _state_path(out: Path) -> Path:
    return out.with_name(out.name + ".state.json")


def _load_state(out: Path) -> dict[str, Any]:
    try:
        data = json.loads(_state_path(out).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("done", {}) if isinstance(data, dict) else {}


def _kinds(source: CrawlSource, kind: str | Kind | None) -> list[Kind]:
    if kind is None or kind == "both":
        return sorted(source.kinds, key=lambda k: k.value)
    wanted = Kind(kind)
    if wanted not in source.kinds:
        found = ", ".join(k.value for k in source.kinds)
        raise ConfigError(f"source {source.spec} finds {found} only, not {wanted.value}; change --kind")
    return [wanted]


def crawl(
    keywords: Sequence[str | Keyword] | None,
    *,
    source: str | CrawlSource,
    per_keyword: int,
    out: str | Path,
    kind: str | Kind | None = None,
    settings: Mapping[str, Any] | None = None,
    on_keyword: Callable[[KeywordResult], None] | None = None,
) -> CrawlResult:
    """Search a source for every keyword and write (or extend) a URL list.

    Args:
        keywords: Keywords (text or `Keyword`); None for the packaged VHD11K keywords.
        source: A source spec (``pexels``, ``icrawler:bing``, ``ytdlp:youtube``) or a source.
        per_keyword: Hits wanted per keyword and kind.
        out: The URL-list CSV (created, or extended: rows already there are kept).
        kind: ``image``, ``video`` or None/``both`` (every kind the source finds).
        settings: Source settings, when ``source`` is a spec.
        on_keyword: Called after each keyword.

    Returns:
        The result (per keyword counts and errors).

    Raises:
        ConfigError: Bad arguments, unknown source, missing credentials.
        MissingDependencyError: The source's library is not installed.
    """
    if per_keyword < 1:
        raise ConfigError(f"--per-keyword must be at least 1, got {per_keyword}")
    words = [k.name if isinstance(k, Keyword) else str(k) for k in (keywords or load_keywords())]
    words = [w.strip() for w in words if w.strip()]
    if not words:
        raise ConfigError("no keywords to crawl; pass --keywords or use the packaged list")
    src = create_source(source, settings) if isinstance(source, str) else source
    out_path = Path(out)
    rows: list[UrlRow] = []
    if out_path.exists():
        existing = read_url_list(out_path)
        if existing.problems:
            first = existing.problems[0]
            raise ConfigError(
                f"{out_path} line {first.line}: {first.reason}; fix the {len(existing.problems)} bad row(s) "
                "or choose another --out (a crawl rewrites the whole file)"
            )
        rows = existing.rows
    seen = {r.url for r in rows}
    done = _load_state(out_path)
    result = CrawlResult(out=out_path, crawler=src.spec, rows=len(rows))
    try:
        for wanted in _kinds(src, kind):
            for word in words:
                key = f"{src.spec}\t{wanted.value}\t{word}"
                entry = KeywordResult(word, wanted.value)
                if done.get(key, {}).get("requested", 0) >= per_keyword:
                    entry.skipped = True
                else:
                    try:
                        hits = src.search(word, per_keyword, wanted)[:per_keyword]
                    except CrawlError as exc:
                        entry.error = str(exc)
                        result.keywords.append(entry)
                        if exc.fatal:
                            result.stopped = str(exc)
                            return result
                        continue
                    entry.found = len(hits)
                    for hit in hits:
                        if hit.url in seen:
                            continue
                        seen.add(hit.url)
                        extra = {"crawler": src.spec}
                        if hit.page_url:
                            extra["page_url"] = hit.page_url
                        extra.update(hit.extra)
                        rows.append(
                            UrlRow(url=hit.url, line=0, kind=hit.kind, keyword=word, source=Source.REAL, meta=extra)
                        )
                        entry.added += 1
                    write_url_list(rows, out_path)
                    done[key] = {"requested": per_keyword, "found": entry.found, "at": round(time.time(), 3)}
                    atomic_write(_state_path(out_path), json.dumps({"version": 1, "done": done}, indent=1) + "\n")
                result.keywords.append(entry)
                if on_keyword is not None:
                    on_keyword(entry)
    finally:
        src.close()
        result.rows = len(rows)
    return result
