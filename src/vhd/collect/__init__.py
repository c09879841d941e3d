"""Collecting data: the keyword taxonomy, crawling sources for URLs, fetching them, block lists.

The public names below load their modules on first use, so importing `vhd.collect` stays cheap
(httpx, icrawler and yt-dlp are imported only by the code that needs them).

Example:
    >>> from vhd.collect import crawl, fetch, load_keywords
    >>> words = [k.name for k in load_keywords() if k.harmful]  # doctest: +SKIP
    >>> crawl(words, source="pexels", per_keyword=20, out="urls.csv")  # doctest: +SKIP
    >>> report = fetch("urls.csv", out="media/", store="run.db")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.collect.addresses import address_problem
    from vhd.collect.blocklist import BlockList, BlockMatch, pdq_hash
    from vhd.collect.crawl import CrawlResult, CrawlSource, crawl, source_names
    from vhd.collect.fetch import fetch, fetch_async
    from vhd.collect.fetch_settings import FetchReport, FetchSettings
    from vhd.collect.keywords import Keyword, load_keywords
    from vhd.collect.sniff import MediaType, sniff
    from vhd.collect.urls import UrlList, read_url_list, write_url_list
    from vhd.records import UrlRow

_EXPORTS = {
    "BlockList": "vhd.collect.blocklist",
    "BlockMatch": "vhd.collect.blocklist",
    "pdq_hash": "vhd.collect.blocklist",
    "CrawlResult": "vhd.collect.crawl",
    "CrawlSource": "vhd.collect.crawl",
    "crawl": "vhd.collect.crawl",
    "source_names": "vhd.collect.crawl",
    "FetchReport": "vhd.collect.fetch_settings",
    "fetch": "vhd.collect.fetch",
    "fetch_async": "vhd.collect.fetch",
    "FetchSettings": "vhd.collect.fetch_settings",
    "Keyword": "vhd.collect.keywords",
    "load_keywords": "vhd.collect.keywords",
    "address_problem": "vhd.collect.addresses",
    "MediaType": "vhd.collect.sniff",
    "sniff": "vhd.collect.sniff",
    "UrlList": "vhd.collect.urls",
    "UrlRow": "vhd.records",
    "read_url_list": "vhd.collect.urls",
    "write_url_list": "vhd.collect.urls",
}

__all__ = [
    "BlockList",
    "BlockMatch",
    "CrawlResult",
    "CrawlSource",
    "FetchReport",
    "FetchSettings",
    "Keyword",
    "MediaType",
    "UrlList",
    "UrlRow",
    "address_problem",
    "crawl",
    "fetch",
    "fetch_async",
    "load_keywords",
    "pdq_hash",
    "read_url_list",
    "sniff",
    "source_names",
    "write_url_list",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
