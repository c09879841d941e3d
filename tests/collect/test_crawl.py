from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collect.conftest import jpeg_bytes, mp4_bytes
from tests.collect.media_server import MediaServer, Route
from tests.collect.pexels_server import PexelsServer
from tests.detectors.api_server import ApiServer
from tests.servers.chat_server import Failure
from vhd.cli.main import main
from vhd.collect.crawl import CrawlHit, CrawlSource, crawl, create_source, source_names
from vhd.collect.fetch import fetch
from vhd.collect.fetch_settings import FetchSettings
from vhd.collect.pexels import pick_video_file, video_hit
from vhd.collect.urls import read_url_list
from vhd.collect.ytdlp_source import hits_from_info
from vhd.errors import ConfigError, MissingDependencyError
from vhd.records import Kind


@pytest.fixture
def pexels(monkeypatch: pytest.MonkeyPatch) -> Iterator[PexelsServer]:
    monkeypatch.setenv("PEXELS_API_KEY", "test-key")
    with PexelsServer() as srv:
        yield srv


def test_pexels_images_and_videos_in_the_url_list_format(pexels: PexelsServer, tmp_path: Path) -> None:
    out = tmp_path / "urls.csv"
    result = crawl(
        ["knife in hand", "toy"], source="pexels", per_keyword=5, out=out, settings={"base_url": pexels.base_url}
    )
    assert result.exit_code() == 0 and result.rows == 20
    listing = read_url_list(out)
    assert not listing.problems and len(listing.rows) == 20
    images = [r for r in listing.rows if r.kind is Kind.IMAGE]
    videos = [r for r in listing.rows if r.kind is Kind.VIDEO]
    assert len(images) == len(videos) == 10
    first = images[0]
    assert first.keyword == "knife in hand" and first.source == "real"
    assert first.url.endswith(".jpeg") and first.meta["crawler"] == "pexels"
    assert first.meta["page_url"].startswith("https://www.pexels.com/photo/knife-in-hand-")
    assert first.meta["photographer"] == "Photographer 0"
    assert all(r.url.endswith("-1080.mp4") for r in videos)
    assert videos[0].meta["duration"] == "12" and videos[0].meta["width"] == "1920"
    pages = [p for path, p in pexels.requests if path == "/v1/search" and p["query"] == "toy"]
    assert [p["page"] for p in pages] == ["1", "2"] and pages[0]["per_page"] == "5"


def test_resume_skips_finished_keywords_and_grows_on_request(pexels: PexelsServer, tmp_path: Path) -> None:
    out = tmp_path / "urls.csv"
    options = {"source": "pexels", "out": out, "kind": "image", "settings": {"base_url": pexels.base_url}}
    crawl(["gun"], per_keyword=3, **options)  # type: ignore[arg-type]
    before = len(pexels.requests)
    again = crawl(["gun"], per_keyword=3, **options)  # type: ignore[arg-type]
    assert len(pexels.requests) == before and again.keywords[0].skipped and again.rows == 3
    more = crawl(["gun"], per_keyword=6, **options)  # type: ignore[arg-type]
    assert more.keywords[0].found == 6 and more.keywords[0].added == 3 and more.rows == 6
    exhausted = crawl(["gun"], per_keyword=50, **options)  # type: ignore[arg-type]
    assert exhausted.keywords[0].found == 7 and exhausted.rows == 7
    assert json.loads(Path(str(out) + ".state.json").read_text())["done"]["pexels\timage\tgun"]["found"] == 7


def test_rate_limit_stops_cleanly_and_the_next_run_goes_on(pexels: PexelsServer, tmp_path: Path) -> None:
    out = tmp_path / "urls.csv"
    pexels.rate_limit_after = 2
    words = ["alcohol", "gun", "toy"]
    options = {"source": "pexels", "out": out, "kind": "image", "settings": {"base_url": pexels.base_url}}
    result = crawl(words, per_keyword=3, **options)  # type: ignore[arg-type]
    assert result.stopped and "rate limit" in result.stopped and result.exit_code() == 1
    assert [k.keyword for k in result.keywords if not k.error] == ["alcohol", "gun"]
    assert result.rows == 6
    pexels.rate_limit_after = None
    pexels.requests.clear()
    resumed = crawl(words, per_keyword=3, **options)  # type: ignore[arg-type]
    assert [p["query"] for _, p in pexels.requests] == ["toy"]
    assert resumed.rows == 9 and resumed.exit_code() == 0


def test_bad_or_missing_key(pexels: PexelsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEXELS_API_KEY", "wrong")
    result = crawl(
        ["toy", "gun"], source="pexels", per_keyword=2, out=tmp_path / "u.csv", settings={"base_url": pexels.base_url}
    )
    assert result.stopped and "refused the API key" in result.stopped and len(pexels.requests) == 1
    monkeypatch.delenv("PEXELS_API_KEY")
    with pytest.raises(ConfigError, match="set PEXELS_API_KEY"):
        crawl(["toy"], source="pexels", per_keyword=2, out=tmp_path / "u.csv")
    monkeypatch.setenv("MY_KEY", "test-key")
    ok = crawl(
        ["toy"],
        source="pexels",
        per_keyword=2,
        out=tmp_path / "v.csv",
        settings={"base_url": pexels.base_url, "api_key_env": "MY_KEY"},
    )
    assert ok.rows == 4


def test_crawl_then_fetch_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEXELS_API_KEY", "test-key")
    with MediaServer() as media, PexelsServer(total=2, media_base="http://127.0.0.1:0") as api:
        api.media_base = f"http://127.0.0.1:{media.port}"
        for i in range(2):
            photo = api.photo("toy", i)
            media.add(photo["src"]["original"].split(str(media.port), 1)[1], Route(body=jpeg_bytes((i * 90, 10, 10))))
            video = api.video("toy", i)
            media.add(
                video["video_files"][1]["link"].split(str(media.port), 1)[1], Route(body=mp4_bytes(tmp_path, 4 + i))
            )
        urls = tmp_path / "urls.csv"
        code = main(
            [
                "crawl",
                "--source",
                "pexels",
                "--keywords",
                "toy",
                "--per-keyword",
                "2",
                "--out",
                str(urls),
                "--set",
                f"base_url={api.base_url}",
            ]
        )
        assert code == 0
        report = fetch(urls, tmp_path / "media", settings=FetchSettings(allow_networks=("127.0.0.1/32",)))
    assert [o.status for o in report.outcomes] == ["ok"] * 4
    assert sorted(o.kind for o in report.outcomes) == ["image", "image", "video", "video"]
    assert {o.keyword for o in report.outcomes} == {"toy"} and all(
        o.meta["crawler"] == "pexels" for o in report.outcomes
    )


def test_pick_video_file_prefers_quality_and_width() -> None:
    files = [
        {"quality": "hd", "file_type": "video/mp4", "width": 3840, "link": "uhd"},
        {"quality": "hd", "file_type": "video/mp4", "width": 1280, "link": "720"},
        {"quality": "sd", "file_type": "video/mp4", "width": 640, "link": "360"},
        {"quality": "hd", "file_type": "video/webm", "width": 1920, "link": "webm"},
    ]
    assert pick_video_file(files)["link"] == "720"  # type: ignore[index]
    assert pick_video_file(files, "sd")["link"] == "360"  # type: ignore[index]
    assert pick_video_file(files, "hd", max_width=800)["link"] == "720"  # type: ignore[index]
    assert pick_video_file(files, "hd", max_width=5000)["link"] == "uhd"  # type: ignore[index]
    assert pick_video_file([{"file_type": "video/webm", "link": "x"}]) is None
    assert video_hit({"id": 1, "video_files": "nope"}) is None


def test_ytdlp_results_become_hits() -> None:
    info = {
        "entries": [
            {
                "id": "a1",
                "title": "clip",
                "url": "https://rr1.example/videoplayback?id=a1",
                "protocol": "https",
                "webpage_url": "https://www.youtube.com/watch?v=a1",
                "duration": 31,
                "width": 640,
                "height": 360,
            },
            {"id": "b2", "url": "https://manifest.example/b2.m3u8", "protocol": "m3u8_native"},
            None,
            {"id": "c3", "title": "no url"},
        ]
    }
    hits = hits_from_info(info, "youtube")
    assert len(hits) == 1
    hit = hits[0]
    assert (hit.kind, hit.page_url, hit.extra["video_id"], hit.extra["duration"], hit.extra["site"]) == (
        Kind.VIDEO,
        "https://www.youtube.com/watch?v=a1",
        "a1",
        "31",
        "youtube",
    )
    assert hits_from_info(None, "youtube") == []


def test_registry_and_missing_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"pexels", "icrawler", "ytdlp"} <= set(source_names())
    with pytest.raises(ConfigError, match=r"valid sources: .*icrawler.*pexels.*ytdlp"):
        create_source("flickr")
    with pytest.raises(ConfigError, match="unknown icrawler engine"):
        create_source("icrawler:altavista")
    with pytest.raises(ConfigError, match="unknown yt-dlp site"):
        create_source("ytdlp:myspace")
    monkeypatch.setitem(sys.modules, "icrawler", None)
    monkeypatch.setitem(sys.modules, "icrawler.builtin", None)
    monkeypatch.setitem(sys.modules, "yt_dlp", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[icrawler\]'"):
        create_source("icrawler:bing")
    with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[ytdlp\]'"):
        create_source("ytdlp")


class _Fake(CrawlSource):
    name = "fake"
    kinds = frozenset({Kind.IMAGE})

    def search(self, keyword: str, limit: int, kind: Kind) -> list[CrawlHit]:
        return [CrawlHit(f"https://x.test/{n}.jpg", kind) for n in ("shared", keyword)][:limit]


def test_a_url_found_twice_keeps_its_first_keyword(tmp_path: Path) -> None:
    result = crawl(["a", "b"], source=_Fake(), per_keyword=2, out=tmp_path / "u.csv")
    assert [(k.found, k.added) for k in result.keywords] == [(2, 2), (2, 1)]
    rows = read_url_list(tmp_path / "u.csv").rows
    assert [(r.url.rsplit("/", 1)[1], r.keyword) for r in rows] == [("shared.jpg", "a"), ("a.jpg", "a"), ("b.jpg", "b")]
    with pytest.raises(ConfigError, match="finds image only"):
        crawl(["a"], source=_Fake(), per_keyword=1, out=tmp_path / "u.csv", kind="video")
    (tmp_path / "bad.csv").write_text("url\nftp://nope\n")
    with pytest.raises(ConfigError, match="bad row"):
        crawl(["a"], source=_Fake(), per_keyword=1, out=tmp_path / "bad.csv")


def test_cli_crawl_json_and_settings(pexels: PexelsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    words = tmp_path / "words.txt"
    words.write_text("toy\nspoon, unharmful\n")
    out = tmp_path / "u.csv"
    args = ["crawl", "--source", "pexels", "--keywords", str(words), "--harmful-only", "--kind", "video"]
    code = main(
        [
            *args,
            "--per-keyword",
            "2",
            "--out",
            str(out),
            "--set",
            f"base_url={pexels.base_url}",
            "--set",
            "video_quality=sd",
            "--json",
        ]
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["rows"] == 2 and [k["keyword"] for k in payload["keywords"]] == ["toy"]
    assert all(r.url.endswith("-360.mp4") for r in read_url_list(out).rows)
    assert main(["crawl", "--source", "nope", "--per-keyword", "1", "--out", str(out)]) == 2


@pytest.mark.api
def test_live_icrawler_bing(tmp_path: Path) -> None:
    result = crawl(["red apple"], source="icrawler:bing", per_keyword=3, out=tmp_path / "u.csv")
    assert result.rows >= 1


@pytest.mark.api
def test_live_ytdlp_youtube(tmp_path: Path) -> None:
    result = crawl(["cooking pasta"], source="ytdlp:youtube", per_keyword=2, out=tmp_path / "u.csv")
    assert result.rows >= 1


@pytest.mark.api
def test_live_pexels(tmp_path: Path) -> None:
    result = crawl(["toy"], source="pexels", per_keyword=3, out=tmp_path / "u.csv")
    assert result.rows == 6


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (Failure.deep(200_000), "unreadable JSON"),
        (Failure.endless(limit=256 << 20), "went past the cap of 32 MiB"),
        (Failure.trickle(every=0.3, seconds=30), "did not answer in time"),
    ],
    ids=["deep", "endless", "trickle"],
)
def test_a_hostile_search_answer_is_that_keywords_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failure: Failure, said: str
) -> None:
    monkeypatch.setenv("PEXELS_API_KEY", "test-key")
    with ApiServer(lambda _r: (200, {"photos": [], "page": 1, "per_page": 5, "total_results": 0}, {})) as srv:
        srv.hostile_next([failure, failure] if said == "did not answer in time" else [failure])  # retried
        settings = {"base_url": srv.url, "timeout": 1, "retries": 1, "backoff": 0.01}
        result = crawl(["a", "b"], source="pexels", per_keyword=5, out=tmp_path / "u.csv", settings=settings)
    assert said in str(result.keywords[0].error) and result.keywords[1].error is None
