"""Pexels: free stock photos and videos through its documented REST API (a key is required).

Endpoints: ``GET /v1/search`` (photos) and ``GET /videos/search`` (videos), with ``query``,
``per_page`` (at most 80) and ``page``; the key goes in the ``Authorization`` header as is. A
photo's ``src`` holds URLs at several sizes (``original``, ``large2x``, ``large``, ``medium``...);
a video's ``video_files`` lists renditions (``quality`` hd/sd/uhd, ``file_type``, ``width``,
``link``). Pexels allows 200 requests an hour and 20,000 a month; when it answers 429 the crawl
stops cleanly and resumes later. Pexels asks that photographers be credited: their names and
the photo's page are kept in the URL list (``photographer``, ``page_url``).

Settings (``[crawl.pexels]`` in a config file, or keyword arguments): ``api_key_env`` (name of
the variable holding the key, default ``PEXELS_API_KEY``), ``base_url``, ``image_size``
(default ``original``), ``video_quality`` (default ``hd``), ``max_video_width`` (default 1920),
``timeout`` (s, default 30), ``retries`` (default 3), ``backoff`` (s, default 1). Answers are read
through `vhd.netread` (``timeout`` from request to last byte, at most 32 MiB, bounded JSON).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, Final

from vhd.collect.crawl import CrawlError, CrawlHit, CrawlSource
from vhd.errors import ConfigError, require
from vhd.netread import ReplyRefused, client_limits, parse_json
from vhd.records import Kind
from vhd.version import version

DEFAULT_BASE_URL: Final = "https://api.pexels.com"
API_KEY_ENV: Final = "PEXELS_API_KEY"
MAX_PER_PAGE: Final = 80
IMAGE_SIZES: Final = ("original", "large2x", "large", "medium", "small", "portrait", "landscape", "tiny")


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _extra(pairs: Mapping[str, Any]) -> dict[str, str]:
    return {k: t for k, v in pairs.items() if (t := _text(v)) is not None}


def photo_hit(item: Mapping[str, Any], size: str = "original") -> CrawlHit | None:
    """Turn one item of a photo search's ``photos`` into a hit (None when it has no such URL)."""
    src = item.get("src")
    url = src.get(size) if isinstance(src, Mapping) else None
    if not isinstance(url, str) or not url:
        return None
    extra = _extra(
        {
            "pexels_id": item.get("id"),
            "width": item.get("width"),
            "height": item.get("height"),
            "photographer": item.get("photographer"),
            "photographer_url": item.get("photographer_url"),
            "alt": item.get("alt"),
        }
    )
    return CrawlHit(url, Kind.IMAGE, _text(item.get("url")), extra)


def pick_video_file(files: Any, quality: str = "hd", max_width: int = 1920) -> Mapping[str, Any] | None:
    """Choose a rendition: MP4, preferring ``quality``, the widest not wider than ``max_width``.

    When every rendition is wider than ``max_width``, the narrowest is taken.
    """
    if not isinstance(files, list):
        return None
    mp4 = [
        f
        for f in files
        if isinstance(f, Mapping) and isinstance(f.get("link"), str) and f.get("file_type", "video/mp4") == "video/mp4"
    ]
    preferred = [f for f in mp4 if f.get("quality") == quality] or mp4
    if not preferred:
        return None

    def width(f: Mapping[str, Any]) -> int:
        w = f.get("width")
        return w if isinstance(w, int) else 0

    fitting = [f for f in preferred if width(f) <= max_width]
    return max(fitting, key=width) if fitting else min(preferred, key=width)


def video_hit(item: Mapping[str, Any], quality: str = "hd", max_width: int = 1920) -> CrawlHit | None:
    """Turn one item of a video search's ``videos`` into a hit (None when no rendition fits)."""
    chosen = pick_video_file(item.get("video_files"), quality, max_width)
    if chosen is None:
        return None
    owner = item.get("user")
    user: Mapping[str, Any] = owner if isinstance(owner, Mapping) else {}
    extra = _extra(
        {
            "pexels_id": item.get("id"),
            "width": chosen.get("width"),
            "height": chosen.get("height"),
            "duration": item.get("duration"),
            "fps": chosen.get("fps"),
            "photographer": user.get("name"),
            "photographer_url": user.get("url"),
        }
    )
    return CrawlHit(str(chosen["link"]), Kind.VIDEO, _text(item.get("url")), extra)


class PexelsSource(CrawlSource):
    """Search Pexels photos and videos (see the module docs)."""

    name = "pexels"
    kinds = frozenset({Kind.IMAGE, Kind.VIDEO})

    def __init__(self, option: str | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(option, settings)
        if option:
            raise ConfigError(
                f"the pexels source takes no option (got {option!r}); choose images or videos with --kind"
            )
        httpx: Any = require("httpx", "collect")
        s = self.settings
        env = str(s.get("api_key_env", API_KEY_ENV))
        key = os.environ.get(env, "").strip()
        if not key:
            raise ConfigError(f"set {env} to your Pexels API key (free at https://www.pexels.com/api/)")
        self.image_size = str(s.get("image_size", "original"))
        if self.image_size not in IMAGE_SIZES:
            raise ConfigError(f"pexels image_size must be one of {', '.join(IMAGE_SIZES)}, got {self.image_size!r}")
        self.video_quality = str(s.get("video_quality", "hd"))
        self.max_video_width = int(s.get("max_video_width", 1920))
        self.retries = int(s.get("retries", 3))
        self.backoff = float(s.get("backoff", 1.0))
        limits = client_limits(httpx, timeout=float(s.get("timeout", 30.0)), asynchronous=False)
        self._client = httpx.Client(
            base_url=str(s.get("base_url", DEFAULT_BASE_URL)).rstrip("/"),
            follow_redirects=True,
            **limits | {"headers": limits["headers"] | {"Authorization": key, "User-Agent": f"vhd/{version()}"}},
        )

    def _get(self, path: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        import httpx

        attempt = 0
        while True:
            attempt += 1
            problem: str
            try:
                response = self._client.get(path, params=dict(params))
            except httpx.HTTPError as exc:
                problem = f"cannot reach Pexels ({type(exc).__name__}: {exc})"
            except ReplyRefused as exc:  # too slow (a TimeoutError: tried again), too large, compressed
                if not isinstance(exc, TimeoutError):
                    raise CrawlError(f"Pexels' answer was refused: {exc}") from None
                problem = f"Pexels did not answer in time ({exc})"
            else:
                status = response.status_code
                if status == 200:
                    try:
                        data = parse_json(response.content)
                    except ValueError as exc:  # not JSON, too deep, too many objects
                        raise CrawlError(f"Pexels answered unreadable JSON ({exc})") from None
                    if not isinstance(data, Mapping):
                        raise CrawlError("Pexels answered JSON that is not an object")
                    return data
                if status in (401, 403):
                    raise CrawlError(f"Pexels refused the API key (HTTP {status}); check it", fatal=True)
                if status == 429:
                    reset = response.headers.get("x-ratelimit-reset")
                    when = f" (resets at unix time {reset})" if reset else ""
                    raise CrawlError(f"Pexels rate limit reached{when}; finished keywords are kept", fatal=True)
                if status < 500:
                    raise CrawlError(f"Pexels answered HTTP {status}: {response.text[:200]}")
                problem = f"Pexels answered HTTP {status}"
            if attempt > self.retries:
                raise CrawlError(f"{problem} after {attempt} attempts")
            time.sleep(self.backoff * 2 ** (attempt - 1))

    def search(self, keyword: str, limit: int, kind: Kind) -> list[CrawlHit]:
        """Page through Pexels' search until ``limit`` hits or the last page."""
        path, key = ("/v1/search", "photos") if kind is Kind.IMAGE else ("/videos/search", "videos")
        per_page = min(MAX_PER_PAGE, limit)
        hits: list[CrawlHit] = []
        page = 1
        while len(hits) < limit:
            data = self._get(path, {"query": keyword, "per_page": per_page, "page": page})
            items = data.get(key)
            if not isinstance(items, list):
                raise CrawlError(f"Pexels' answer has no {key!r} list; the API may have changed")
            for item in items:
                if not isinstance(item, Mapping):
                    continue
                if kind is Kind.IMAGE:
                    hit = photo_hit(item, self.image_size)
                else:
                    hit = video_hit(item, self.video_quality, self.max_video_width)
                if hit is not None:
                    hits.append(hit)
            if not items or not data.get("next_page"):
                break
            page += 1
        return hits[:limit]

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
