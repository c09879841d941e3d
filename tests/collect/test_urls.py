from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhd.collect.urls import UrlRow, check_url, read_url_list, write_url_list
from vhd.errors import ConfigError
from vhd.records import Kind


def test_csv_rows_problems_and_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "urls.csv"
    path.write_text(
        "url,kind,keyword,source,id,crawler\n"
        "https://example.com/a.jpg,image,toy,real,,pexels\n"
        "ftp://example.com/b.jpg,,,,,\n"
        "javascript:alert(1),,,,,\n"
        "http:///nohost.png,,,,,\n"
        "https://example.com/a b.jpg,,,,,\n"
        "https://example.com/c.mp4,movie,,,,\n"
        "https://example.com/d.png,,,fake,,\n"
        "https://example.com/a.jpg,,,,,\n"
        ",image,gun,,,\n"
        "https://example.com/e.png,,,,,,too,many\n"
        "HTTP://Example.com:8080/f.webp,,,,abc,\n"
    )
    result = read_url_list(path)
    assert [r.url for r in result.rows] == ["https://example.com/a.jpg", "HTTP://Example.com:8080/f.webp"]
    first = result.rows[0]
    assert (first.line, first.kind, first.keyword, first.source, first.meta) == (
        2,
        Kind.IMAGE,
        "toy",
        "real",
        {"crawler": "pexels"},
    )
    assert result.rows[1].id == "abc"
    problems = {p.line: (p.status, p.reason) for p in result.problems}
    assert problems[3][1].startswith("only http and https") and "ftp:" in problems[3][1]
    assert "javascript:" in problems[4][1]
    assert problems[5][1] == "URL has no host"
    assert "spaces" in problems[6][1]
    assert "kind must be image or video" in problems[7][1]
    assert "source must be real or synthetic" in problems[8][1]
    assert problems[9] == ("duplicate", "same URL as line 2")
    assert problems[10][1].startswith("no URL")
    assert "more fields" in problems[11][1]


def test_jsonl_json_and_text(tmp_path: Path) -> None:
    jl = tmp_path / "u.jsonl"
    jl.write_text('{"url": "https://x.org/1.png", "keyword": "gun"}\n{broken\n[1]\n\n{"link": "https://x.org/2.png"}\n')
    result = read_url_list(jl)
    assert [(r.url, r.line) for r in result.rows] == [("https://x.org/1.png", 1), ("https://x.org/2.png", 5)]
    assert [p.line for p in result.problems] == [2, 3]
    js = tmp_path / "u.json"
    js.write_text(json.dumps({"urls": ["https://x.org/1.png", {"url": "https://x.org/2.png", "kind": "video"}, 7]}))
    result = read_url_list(js)
    assert [r.kind for r in result.rows] == [None, Kind.VIDEO] and result.problems[0].line == 3
    txt = tmp_path / "u.txt"
    txt.write_text("# list\nhttps://x.org/1.png\n\nnot a url\n")
    result = read_url_list(txt)
    assert len(result.rows) == 1 and result.problems[0].line == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"link_text,other\nx,y\n", "header row with a 'url' column"), (b"url\n\xff\xfe\x00bad", "not UTF-8")],
)
def test_unusable_files_are_config_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "u.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        read_url_list(path)


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    rows = [
        UrlRow(
            url="https://a.org/1.jpg",
            line=0,
            kind=Kind.IMAGE,
            keyword="toy",
            source="real",
            id=None,
            meta={"crawler": "pexels", "page_url": "https://a.org/p/1"},
        ),
        UrlRow(
            url="https://a.org/2.mp4",
            line=0,
            kind=Kind.VIDEO,
            keyword="gun, animated",
            source=None,
            id="x1",
            meta={"title": 'say "hi"'},
        ),
    ]
    path = write_url_list(rows, tmp_path / "sub" / "out.csv")
    assert path.read_text().splitlines()[0] == "url,kind,keyword,source,id,crawler,page_url,title"
    back = read_url_list(path)
    assert not back.problems
    assert [(r.url, r.kind, r.keyword, r.source, r.id, r.meta) for r in back.rows] == [
        (r.url, r.kind, r.keyword, r.source, r.id, r.meta) for r in rows
    ]
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert not list((tmp_path / "sub").glob(".*tmp"))


@pytest.mark.parametrize(
    "url", ["https://example.com/x", "http://127.0.0.1:8080/a.png", "https://[2001:db8::1]/p", "http://bücher.de/a"]
)
def test_acceptable_urls(url: str) -> None:
    assert check_url(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "data:image/png;base64,AAAA",
        "//example.com/a",
        "https://x.org:99999/",
        "https://x.org/" + "a" * 9000,
    ],
)
def test_refused_urls(url: str) -> None:
    assert check_url(url) is not None
