"""Video search through yt-dlp (``pip install 'vhd[ytdlp]'``): a thin adapter.

``ytdlp:youtube`` (default) runs yt-dlp's ``ytsearchN:KEYWORD``; ``ytdlp:youtube-date`` sorts by
date, ``ytdlp:bilibili`` and ``ytdlp:niconico`` search those sites, and any other yt-dlp search
prefix ending in ``search`` is passed through. Each result is resolved (nothing is downloaded)
to one progressive MP4 rendition served over plain HTTP(S), so `vhd fetch` can download it with
its usual checks; streams only offered as HLS/DASH are skipped.

Direct media URLs from video sites expire (YouTube's within hours): fetch soon after crawling.
The ``page_url`` column keeps the stable watch-page link, which is what a link-liveness check
and attribution need. Respect each site's terms of service.

Settings: ``format`` (a yt-dlp format selector; default picks MP4 up to 1080p over HTTP(S)),
``socket_timeout`` (s, default 30).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from vhd.collect.crawl import CrawlError, CrawlHit, CrawlSource
from vhd.errors import ConfigError, require
from vhd.records import Kind

SEARCH_KEYS: Final = {
    "youtube": "ytsearch",
    "youtube-date": "ytsearchdate",
    "bilibili": "bilisearch",
    "niconico": "nicosearch",
}
"""Site name to yt-dlp search prefix."""

DEFAULT_FORMAT: Final = (
    "best[ext=mp4][vcodec!=none][protocol^=http][height<=1080]/best[vcodec!=none][protocol^=http][height<=1080]"
)


def hits_from_info(info: Mapping[str, Any] | None, site: str) -> list[CrawlHit]:
    """Turn yt-dlp's result for a search into hits: one per entry with a direct HTTP(S) URL.

    Args:
        info: What ``YoutubeDL.extract_info(query, download=False)`` returned.
        site: The site name, recorded with each hit.

    Returns:
        Hits in result order (entries without a usable URL are left out).
    """
    if not info:
        return []
    entries = info.get("entries")
    items = entries if isinstance(entries, list) else [info]
    hits: list[CrawlHit] = []
    for entry in items:
        if not isinstance(entry, Mapping):
            continue
        url = entry.get("url")
        protocol = str(entry.get("protocol") or "https")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not protocol.startswith("http"):
            continue
        extra = {
            key: str(entry[field])
            for key, field in (
                ("video_id", "id"),
                ("title", "title"),
                ("duration", "duration"),
                ("uploader", "uploader"),
                ("license", "license"),
                ("width", "width"),
                ("height", "height"),
            )
            if entry.get(field) not in (None, "")
        }
        extra["site"] = site
        page = entry.get("webpage_url") or entry.get("original_url")
        hits.append(CrawlHit(url, Kind.VIDEO, str(page) if page else None, extra))
    return hits


class YtDlpSource(CrawlSource):
    """Search a video site with yt-dlp (see the module docs)."""

    name = "ytdlp"
    kinds = frozenset({Kind.VIDEO})

    def __init__(self, option: str | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(option or "youtube", settings)
        site = str(self.option)
        key = SEARCH_KEYS.get(site, site if site.endswith(("search", "searchdate")) else None)
        if key is None:
            raise ConfigError(
                f"unknown yt-dlp site {site!r}; choose one of {', '.join(SEARCH_KEYS)} or a yt-dlp search prefix"
            )
        self.search_key = key
        self._yt_dlp: Any = require("yt_dlp", "ytdlp", "yt-dlp")
        self.format = str(self.settings.get("format", DEFAULT_FORMAT))
        self.socket_timeout = float(self.settings.get("socket_timeout", 30.0))

    def search(self, keyword: str, limit: int, kind: Kind) -> list[CrawlHit]:
        """Search and resolve up to ``limit`` videos."""
        options = {
            "quiet": True,
            "no_warnings": True,
            "skip_download": True,
            "noplaylist": True,
            "ignoreerrors": True,
            "format": self.format,
            "socket_timeout": self.socket_timeout,
        }
        query = f"{self.search_key}{limit}:{keyword}"
        try:
            with self._yt_dlp.YoutubeDL(options) as ydl:
                info = ydl.extract_info(query, download=False)
        except self._yt_dlp.utils.DownloadError as exc:
            raise CrawlError(f"yt-dlp search failed: {exc}") from exc
        return hits_from_info(info, str(self.option))[:limit]
