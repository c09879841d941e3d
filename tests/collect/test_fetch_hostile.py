"""Hostile rows and redirects: each is a named per-row outcome; the run finishes and reports every URL."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path
from typing import Any

import pytest

from tests.collect.conftest import png_bytes
from tests.collect.media_server import MediaServer, Route
from vhd.collect.fetch import fetch
from vhd.collect.fetch_settings import FetchSettings
from vhd.collect.urls import check_url, read_url_list
from vhd.errors import VhdError
from vhd.records import UrlRow

BAD_HOSTS = (
    "http://0177.0.0.1/a.jpg",
    "http://0177.0.0.01:8080/x.jpg",
    "http://xn--a.com/x.jpg",
    "http://ab\u00ad.com/y.jpg",
)
DATA_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def _settings() -> FetchSettings:
    return FetchSettings(allow_networks=("127.0.0.1/32",), timeout=2.0, retries=1, backoff=0.01)


def _report_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "fetch-report.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_urls_the_client_cannot_request_are_invalid_rows_when_read() -> None:
    for url in BAD_HOSTS:
        assert check_url(url) is not None, url
    assert "dotted decimal" in str(check_url(BAD_HOSTS[0]))
    assert check_url("http://127.0.0.1:8080/a.jpg") is None
    assert check_url("https://example.com/a.jpg") is None
    assert check_url("https://b\u00fccher.example/a.jpg") is None


def test_bad_hosts_in_a_list_file_and_in_rows_do_not_end_the_run(server: MediaServer, tmp_path: Path) -> None:
    good = server.add("/good.png", Route(body=png_bytes("red")))
    listing = tmp_path / "urls.txt"
    listing.write_text("\n".join([good, *BAD_HOSTS]) + "\n")
    assert [p.line for p in read_url_list(listing).problems] == [2, 3, 4, 5]
    for attempt in range(2):
        out = tmp_path / "from-file"
        report = fetch(listing, out, settings=_settings())
        assert [(o.status, o.error) for o in report.outcomes] == [("ok", "")] + [("invalid", "bad-row")] * 4, attempt
        assert len(_report_rows(out)) == 5
    # Rows handed over directly (not read from a list file) get the same outcome, at fetch time.
    bad = [*BAD_HOSTS, "http://[::1/x.jpg", "ftp://example.com/y.jpg", ""]
    rows = [UrlRow(url=good, line=2)] + [UrlRow(url=u, line=i + 3) for i, u in enumerate(bad)]
    for _ in range(2):
        out = tmp_path / "from-rows"
        report = fetch(rows, out, settings=_settings())
        assert [(o.status, o.error) for o in report.outcomes] == [("ok", "")] + [("invalid", "bad-row")] * len(bad)
        assert all(o.reason and "\n" not in o.reason for o in report.outcomes[1:])
        assert [r["status"] for r in _report_rows(out)] == ["ok"] + ["invalid"] * len(bad)


def test_redirects_to_urls_the_client_cannot_request_are_bad_redirects(server: MediaServer, tmp_path: Path) -> None:
    server.add("/target.png", Route(body=png_bytes("blue")))
    routes = {
        "/to-data": f"{DATA_URL}",
        "/to-octal": "http://0177.0.0.1/x.jpg",
        "/to-octal-port": "http://0177.0.0.01:8080/x.jpg",
        "/to-bad-idna": "http://xn--a.com/x.jpg",
        "/to-soft-hyphen": "http://ab\u00ad.com/x.jpg",
        "/to-javascript": "javascript:alert(1)",
        "/to-bad-port": "http://127.0.0.1:99999/x.jpg",
        "/to-no-host": "http:///x.jpg",
        "/fine": "/target.png",
    }
    rows = [
        UrlRow(url=server.add(path, Route(status=302, headers={"Location": loc})), line=i + 2)
        for i, (path, loc) in enumerate(routes.items())
    ]
    for _ in range(2):
        out = tmp_path / "m"
        report = fetch(rows, out, settings=_settings())
        got = {o.url.rsplit("/", 1)[-1]: (o.status, o.error, o.retryable) for o in report.outcomes}
        assert got == {
            "to-data": ("rejected", "bad-redirect", False),
            "to-octal": ("rejected", "bad-redirect", False),
            "to-octal-port": ("rejected", "bad-redirect", False),
            "to-bad-idna": ("rejected", "bad-redirect", False),
            "to-soft-hyphen": ("rejected", "bad-redirect", False),
            "to-javascript": ("rejected", "bad-redirect", False),
            "to-bad-port": ("rejected", "bad-redirect", False),
            "to-no-host": ("rejected", "bad-redirect", False),
            "fine": ("ok", "", False),
        }
        assert all(o.reason and "\n" not in o.reason for o in report.outcomes if o.status != "ok")
        assert len(_report_rows(out)) == len(routes)
    assert server.hits["/to-octal"] == 2  # once a run: a bad redirect is not retried


def test_an_unexpected_error_on_one_row_is_that_row_s_outcome(
    server: MediaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vhd.collect.download as download_module

    real = download_module.download

    async def flaky(client: Any, row: UrlRow, *args: Any) -> Any:
        if row.url.endswith("/boom.png"):
            raise RuntimeError("something no one foresaw\nsecond line")
        return await real(client, row, *args)

    monkeypatch.setattr(download_module, "download", flaky)
    rows = [
        UrlRow(url=server.add(f"/{name}.png", Route(body=png_bytes(color))), line=i + 2)
        for i, (name, color) in enumerate([("a", "red"), ("boom", "blue"), ("c", "green")])
    ]
    report = fetch(rows, tmp_path / "m", settings=_settings())
    assert [(o.status, o.error) for o in report.outcomes] == [("ok", ""), ("failed", "unexpected"), ("ok", "")]
    reason = "unexpected error (RuntimeError: something no one foresaw second line) (please report it)"
    assert report.outcomes[1].reason == reason
    assert len(_report_rows(tmp_path / "m")) == 3


def test_a_fatal_error_ends_the_run_with_its_own_message_not_an_exception_group(
    server: MediaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vhd.collect.download as download_module

    real = download_module.download

    async def disk_full(client: Any, row: UrlRow, *args: Any) -> Any:
        if row.url.endswith("/late.png"):
            await asyncio.sleep(0.2)
            raise VhdError("cannot write into OUT: No space left on device; free space or fix permissions")
        return await real(client, row, *args)

    monkeypatch.setattr(download_module, "download", disk_full)
    rows = [
        UrlRow(url=server.add("/a.png", Route(body=png_bytes("red"))), line=2),
        UrlRow(url=server.add("/late.png", Route(body=png_bytes("blue"))), line=3),
    ]
    with pytest.raises(VhdError, match="No space left on device"):
        fetch(rows, tmp_path / "m", settings=_settings())
    log = (tmp_path / "m" / "fetch-log.jsonl").read_text()
    assert "/a.png" in log  # what was done before the error is kept: the next run resumes
