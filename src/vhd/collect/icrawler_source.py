"""Image search engines through icrawler (``pip install 'vhd[icrawler]'``): a thin adapter.

``icrawler:bing`` (default), ``icrawler:google`` and ``icrawler:baidu`` run icrawler's feeder
and parser for that engine, but its downloader is replaced by one that only records each image
URL: nothing is downloaded here (`vhd fetch` does that, with its safety checks). Search engines
change their result pages often; when icrawler's parser falls behind, a search returns fewer
URLs or none (upgrade icrawler). Safe search is whatever the engine applies by default.

Settings: ``timeout`` (seconds a search may take, default 120), ``filters`` (a mapping passed to
icrawler's ``filters``, e.g. ``{"type": "photo"}``).
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, Final

from vhd.collect.crawl import CrawlError, CrawlHit, CrawlSource
from vhd.errors import ConfigError, require
from vhd.records import Kind

ENGINES: Final = {"bing": "BingImageCrawler", "google": "GoogleImageCrawler", "baidu": "BaiduImageCrawler"}
"""Engine name to icrawler crawler class (in ``icrawler.builtin``)."""


def url_collector(image_downloader: type, found: list[str], lock: threading.Lock) -> type:
    """Return an icrawler downloader class that records URLs into ``found`` instead of downloading.

    Args:
        image_downloader: icrawler's ``ImageDownloader`` (passed in so this module imports
            icrawler lazily).
        found: Receives each image URL, in the order the parser yields them.
        lock: Guards ``found`` (icrawler runs downloader threads).
    """

    class UrlCollector(image_downloader):  # type: ignore[misc]
        def download(self, task: dict[str, Any], default_ext: str, timeout: int = 5, **kwargs: Any) -> bool:
            url = task.get("file_url")
            with lock:
                if self.reach_max_num():
                    self.signal.set(reach_max_num=True)
                    return False
                if isinstance(url, str) and url not in found:
                    found.append(url)
                    self.fetched_num += 1
            task["success"] = True
            return True

        def process_meta(self, task: dict[str, Any]) -> None:
            return None

    return UrlCollector


class ICrawlerSource(CrawlSource):
    """Search an image engine with icrawler (see the module docs)."""

    name = "icrawler"
    kinds = frozenset({Kind.IMAGE})

    def __init__(self, option: str | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(option or "bing", settings)
        if self.option not in ENGINES:
            raise ConfigError(f"unknown icrawler engine {self.option!r}; choose one of {', '.join(ENGINES)}")
        self._builtin: Any = require("icrawler.builtin", "icrawler", "icrawler")
        self._icrawler: Any = require("icrawler", "icrawler")
        self.timeout = float(self.settings.get("timeout", 120.0))
        filters = self.settings.get("filters")
        self.filters = dict(filters) if isinstance(filters, Mapping) else None

    def search(self, keyword: str, limit: int, kind: Kind) -> list[CrawlHit]:
        """Run the engine's feeder and parser for ``keyword`` and collect up to ``limit`` URLs."""
        found: list[str] = []
        lock = threading.Lock()
        crawler_cls = getattr(self._builtin, ENGINES[str(self.option)])
        with tempfile.TemporaryDirectory(prefix="vhd-icrawler-") as scratch:
            crawler = crawler_cls(
                downloader_cls=url_collector(self._icrawler.ImageDownloader, found, lock),
                feeder_threads=1,
                parser_threads=1,
                downloader_threads=1,
                storage={"root_dir": scratch},
                log_level=logging.ERROR,
            )
            errors: list[BaseException] = []

            def run() -> None:
                try:
                    crawler.crawl(keyword=keyword, max_num=limit, filters=self.filters)
                except BaseException as exc:
                    errors.append(exc)

            worker = threading.Thread(target=run, name="vhd-icrawler", daemon=True)
            worker.start()
            worker.join(self.timeout)
            if worker.is_alive():
                crawler.signal.set(reach_max_num=True)
                worker.join(10)
        if errors and not found:
            raise CrawlError(f"icrawler {self.option} failed: {type(errors[0]).__name__}: {errors[0]}")
        return [CrawlHit(url, Kind.IMAGE, None, {"engine": str(self.option)}) for url in found[:limit]]
