from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from tests.collect.conftest import jpeg_bytes, leftovers, mp4_bytes, png_bytes
from tests.collect.media_server import MediaServer, Route
from vhd.collect.fetch import FetchReport, fetch, interleave_by_host
from vhd.collect.fetch_settings import FetchSettings
from vhd.collect.fetchlog import folder_lock
from vhd.collect.urls import UrlRow
from vhd.errors import ConfigError
from vhd.records import Kind

LOOPBACK = ("127.0.0.1/32",)


def settings(**overrides: object) -> FetchSettings:
    base: dict[str, object] = {
        "allow_networks": LOOPBACK,
        "timeout": 2.0,
        "retries": 1,
        "backoff": 0.01,
        "max_image_bytes": 200_000,
        "max_video_bytes": 400_000,
    }
    base.update(overrides)
    return FetchSettings(**base)  # type: ignore[arg-type]


def serve(srv: MediaServer, routes: dict[str, Route], **row_fields: object) -> list[UrlRow]:
    return [
        UrlRow(url=srv.add(path, route), line=i + 2, **row_fields)  # type: ignore[arg-type]
        for i, (path, route) in enumerate(routes.items())
    ]


def by_path(report: FetchReport) -> dict[str, object]:
    return {o.url.rsplit("/", 1)[-1]: o for o in report.outcomes}


def media_files(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix in (".png", ".jpg", ".mp4", ".gif"))


def test_good_files_land_under_content_hash_names(server: MediaServer, tmp_path: Path) -> None:
    red, blue, clip = png_bytes("red"), jpeg_bytes("blue"), mp4_bytes(tmp_path)
    rows = serve(
        server,
        {
            "/red.png": Route(body=red, headers={"Content-Type": "text/html"}),
            "/blue": Route(body=blue, chunked=True, chunk_size=100),
            "/clip.bin": Route(body=clip),
            "/again.png": Route(body=red),
        },
        keyword="toy",
        source="real",
    )
    out = tmp_path / "media"
    report = fetch(rows, out, settings=settings())
    assert [o.status for o in report.outcomes] == ["ok"] * 4
    names = {hashlib.sha256(b).hexdigest() + ext for b, ext in ((red, ".png"), (blue, ".jpg"), (clip, ".mp4"))}
    assert set(media_files(out)) == names
    for o in report.outcomes:
        assert (out / str(o.path)).read_bytes() == {"png": red, "jpeg": blue, "mp4": clip}[str(o.format)]
    assert by_path(report)["clip.bin"].kind == "video"
    assert by_path(report)["red.png"].content_type == "text/html"
    with open(out / "manifest.csv", newline="") as fh:
        manifest = list(csv.DictReader(fh))
    assert len(manifest) == 3 and {m["keyword"] for m in manifest} == {"toy"}
    assert {m["path"] for m in manifest} == names
    log = [json.loads(line) for line in (out / "fetch-log.jsonl").read_text().splitlines()]
    assert len(log) == 4 and all(r["status"] == "ok" for r in log)
    assert report.exit_code() == 0 and not leftovers(out) and not (out / ".partial").exists()


def test_every_failure_is_reported_with_a_reason_and_nothing_partial_stays(server: MediaServer, tmp_path: Path) -> None:
    rows = serve(
        server,
        {
            "/missing": Route(status=404, body=b"no"),
            "/broken": Route(status=500, body=b"oops"),
            "/flaky.png": Route(body=png_bytes("green"), fail_first=1, fail_status=503),
            "/html.png": Route(body=b"<!doctype html><html><body>" + b"x" * 200, headers={"Content-Type": "image/png"}),
            "/declared-big.png": Route(body=png_bytes("white"), extra_bytes=300_000),
            "/streamed-big.png": Route(body=png_bytes("gray"), extra_bytes=300_000, chunked=True),
            "/truncated.jpg": Route(body=jpeg_bytes("red"), declare_length=50_000),
            "/slow-start.png": Route(body=png_bytes("navy"), delay=1.5),
            "/empty.png": Route(body=b""),
        },
    )
    out = tmp_path / "media"
    report = fetch(rows, out, settings=settings(timeout=0.5))
    got = {name: (o.status, o.error, o.attempts) for name, o in by_path(report).items()}
    assert got == {
        "missing": ("failed", "http-404", 1),
        "broken": ("failed", "http-500", 2),
        "flaky.png": ("ok", "", 2),
        "html.png": ("rejected", "not-media", 1),
        "declared-big.png": ("rejected", "too-large", 1),
        "streamed-big.png": ("rejected", "too-large", 1),
        "truncated.jpg": ("failed", "truncated", 2),
        "slow-start.png": ("failed", "timeout", 2),
        "empty.png": ("rejected", "not-media", 1),
    }
    reasons = {name: o.reason for name, o in by_path(report).items()}
    assert reasons["html.png"] == "content is an HTML page, not an image or video"
    assert "declares" in reasons["declared-big.png"] and "--max-image-size" in reasons["declared-big.png"]
    assert "sent more than" in reasons["streamed-big.png"]
    assert "empty content" in reasons["empty.png"]
    assert all(o.reason for o in report.outcomes if o.status != "ok")
    assert media_files(out) == [hashlib.sha256(png_bytes("green")).hexdigest() + ".png"]
    assert not leftovers(out)
    assert report.retryable == 3 and report.exit_code() == 1 and report.exit_code(strict=True) == 1
    with open(out / "fetch-report.csv", newline="") as fh:
        rows_out = list(csv.DictReader(fh))
    assert [r["status"] for r in rows_out].count("ok") == 1 and all(
        r["reason"] for r in rows_out if r["status"] != "ok"
    )


def test_redirects_are_checked_hop_by_hop(server: MediaServer, tmp_path: Path) -> None:
    good = png_bytes("orange")
    server.add("/target.png", Route(body=good))
    rows = serve(
        server,
        {
            "/to-relative": Route(status=302, headers={"Location": "/target.png"}),
            "/to-absolute": Route(status=301, headers={"Location": server.url("/target.png")}),
            "/to-file": Route(status=302, headers={"Location": "file:///etc/passwd"}),
            "/to-private": Route(status=307, headers={"Location": "http://10.0.0.1/x.png"}),
            "/to-metadata": Route(status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"}),
            "/to-ipv6-loopback": Route(status=302, headers={"Location": "http://[::1]:9/x.png"}),
            "/to-other-loopback": Route(status=302, headers={"Location": f"http://127.0.0.2:{server.port}/target.png"}),
            "/loop": Route(status=302, headers={"Location": "/loop"}),
            "/no-location": Route(status=302),
        },
    )
    report = fetch(rows, tmp_path / "m", settings=settings(max_redirects=3))
    got = {name: (o.status, o.error) for name, o in by_path(report).items()}
    assert got == {
        "to-relative": ("ok", ""),
        "to-absolute": ("ok", ""),
        "to-file": ("rejected", "bad-redirect"),
        "to-private": ("rejected", "private-address"),
        "to-metadata": ("rejected", "private-address"),
        "to-ipv6-loopback": ("rejected", "private-address"),
        "to-other-loopback": ("rejected", "private-address"),
        "loop": ("failed", "too-many-redirects"),
        "no-location": ("failed", "bad-redirect"),
    }
    outcomes = by_path(report)
    assert outcomes["to-relative"].final_url == server.url("/target.png")
    assert "file: URL refused" in outcomes["to-file"].reason
    assert "10.0.0.1 is a private network address" in outcomes["to-private"].reason
    assert "link-local" in outcomes["to-metadata"].reason
    assert "127.0.0.2 is a loopback address" in outcomes["to-other-loopback"].reason
    assert server.hits["/loop"] == 4
    assert server.hits["/target.png"] == 2


def test_loopback_is_refused_by_default_without_any_request(server: MediaServer, tmp_path: Path) -> None:
    rows = serve(server, {"/a.png": Route(body=png_bytes())})
    rows.append(UrlRow(url=f"http://localhost:{server.port}/a.png", line=9))
    report = fetch(rows, tmp_path / "m", settings=FetchSettings(retries=0))
    assert [(o.status, o.error) for o in report.outcomes] == [("rejected", "private-address")] * 2
    assert "--allow-private" in report.outcomes[0].reason
    assert server.hits["/a.png"] == 0 and server.connections == 0
    report = fetch(rows, tmp_path / "m", settings=FetchSettings(allow_private=True))
    assert [o.status for o in report.outcomes] == ["ok", "ok"]


def test_list_kind_and_id_are_enforced(server: MediaServer, tmp_path: Path) -> None:
    img = png_bytes("purple")
    url = server.add("/p.png", Route(body=img))
    rows = [
        UrlRow(url=url, line=2, kind=Kind.VIDEO),
        UrlRow(url=url + "?id", line=3, id="0" * 64),
        UrlRow(url=url + "?ok", line=4, id=hashlib.sha256(img).hexdigest(), kind=Kind.IMAGE),
    ]
    server.add("/p.png?id", Route(body=img))
    server.add("/p.png?ok", Route(body=img))
    report = fetch(rows, tmp_path / "m", settings=settings())
    assert [(o.status, o.error) for o in report.outcomes] == [
        ("rejected", "kind-mismatch"),
        ("rejected", "hash-mismatch"),
        ("ok", ""),
    ]
    assert "the list says video but the content is image" in report.outcomes[0].reason


def test_second_run_fetches_only_what_is_missing(server: MediaServer, tmp_path: Path) -> None:
    rows = serve(
        server,
        {
            "/a.png": Route(body=png_bytes("red")),
            "/b.jpg": Route(body=jpeg_bytes("blue")),
            "/later.png": Route(status=503, body=b"busy"),
            "/gone": Route(status=404),
        },
    )
    out = tmp_path / "m"
    first = fetch(rows, out, settings=settings(retries=0))
    assert [o.status for o in first.outcomes] == ["ok", "ok", "failed", "failed"]
    server.routes["/later.png"] = Route(body=png_bytes("lime"))
    second = fetch(rows, out, settings=settings(retries=0))
    assert [o.status for o in second.outcomes] == ["ok", "ok", "ok", "failed"]
    assert [o.this_run for o in second.outcomes] == [False, False, True, True]
    assert server.hits["/a.png"] == 1 and server.hits["/b.jpg"] == 1 and server.hits["/later.png"] == 2
    assert len(second.fetched) == 1
    (out / str(second.outcomes[0].path)).unlink()
    third = fetch(rows, out, settings=settings(retries=0))
    assert server.hits["/a.png"] == 2 and third.outcomes[0].this_run
    recheck = fetch(rows, out, settings=settings(retries=0, recheck=True))
    assert server.hits["/b.jpg"] == 2 and all(o.this_run for o in recheck.outcomes)
    server.routes["/b.jpg"] = Route(body=jpeg_bytes("yellow"))
    changed = fetch(rows, out, settings=settings(retries=0, recheck=True))
    assert changed.outcomes[1].previous_sha256 == hashlib.sha256(jpeg_bytes("blue")).hexdigest()
    assert len(media_files(out)) == 4


def test_leftovers_of_a_killed_run_are_cleared_and_the_folder_is_locked(server: MediaServer, tmp_path: Path) -> None:
    out = tmp_path / "m"
    (out / ".partial").mkdir(parents=True)
    (out / ".partial" / "dead.part").write_bytes(b"half a file")
    (out / "fetch-log.jsonl").write_text('{"url": "http://127.0.0.1:1/x", "status": "ok", "pa')
    rows = serve(server, {"/a.png": Route(body=png_bytes())})
    report = fetch(rows, out, settings=settings())
    assert report.outcomes[0].status == "ok" and not leftovers(out)
    lines = (out / "fetch-log.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["status"] == "ok"
    with folder_lock(out), pytest.raises(ConfigError, match="another vhd fetch"):
        fetch(rows, out, settings=settings())


def test_list_file_problems_and_json_report(server: MediaServer, tmp_path: Path) -> None:
    url = server.add("/a.png", Route(body=png_bytes()))
    listing = tmp_path / "urls.csv"
    listing.write_text(f"url,keyword\n{url},toy\nftp://x/y,\n{url},again\n")
    report = fetch(listing, tmp_path / "m", settings=settings(), report=tmp_path / "r.json")
    assert [(o.line, o.status, o.error) for o in report.outcomes] == [
        (2, "ok", ""),
        (3, "invalid", "bad-row"),
        (4, "duplicate", "bad-row"),
    ]
    data = json.loads((tmp_path / "r.json").read_text())
    assert [d["status"] for d in data] == ["ok", "invalid", "duplicate"] and data[0]["keyword"] == "toy"


def test_interleave_by_host_round_robins() -> None:
    rows = [(i, UrlRow(url=f"https://{h}/{i}", line=i)) for i, h in enumerate(["a", "a", "a", "b", "c", "c"])]
    assert [i for i, _ in interleave_by_host(rows)] == [0, 3, 4, 1, 5, 2]


def test_nothing_is_written_outside_out(server: MediaServer, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "m"
    out.mkdir()
    (out / ".partial").symlink_to(outside, target_is_directory=True)
    img = png_bytes("red")
    sha = hashlib.sha256(img).hexdigest()
    (out / f"{sha}.png").symlink_to(outside / "victim.png")
    headers = {"Content-Disposition": 'attachment; filename="../../evil.png"'}
    rows = serve(
        server, {"/..%2F..%2Fevil.png": Route(body=img, headers=headers), "/b.png": Route(body=png_bytes("blue"))}
    )
    report = fetch(rows, out, settings=settings())
    assert [o.status for o in report.outcomes] == ["ok", "ok"]
    assert list(outside.iterdir()) == []
    target = out / f"{sha}.png"
    assert not target.is_symlink() and target.read_bytes() == img
    assert not (tmp_path / "evil.png").exists()
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {
        f"{sha}.png",
        f"{hashlib.sha256(png_bytes('blue')).hexdigest()}.png",
        "fetch-log.jsonl",
        "fetch-report.csv",
        "manifest.csv",
    }


def test_a_size_refusal_names_the_limit_that_applied(server: MediaServer, tmp_path: Path) -> None:
    gib = 1024**3
    rows = serve(
        server,
        {
            "/huge": Route(body=png_bytes("white"), declare_length=10 * gib),
            "/huge-image.png": Route(body=png_bytes("white"), declare_length=300_000),
        },
    )
    video = Route(body=png_bytes("red"), declare_length=10 * gib)
    rows.append(UrlRow(url=server.add("/huge-video", video), line=9, kind=Kind.VIDEO))
    report = fetch(rows, tmp_path / "media", settings=settings(max_image_bytes=1000, max_video_bytes=2 * gib))
    reasons = {name: o.reason for name, o in by_path(report).items()}
    # Unknown kind: the larger (video) limit applies and is the one named.
    assert "declares 10.0 GiB, over the video limit of 2.0 GiB (raise --max-video-size)" in reasons["huge"]
    assert "over the image limit of" in reasons["huge-image.png"] and "--max-image-size" in reasons["huge-image.png"]
    assert "over the video limit of 2.0 GiB" in reasons["huge-video"]
    swapped = fetch(rows[:1], tmp_path / "m2", settings=settings(max_image_bytes=3 * gib, max_video_bytes=1000))
    assert "over the image limit of 3.0 GiB (raise --max-image-size)" in swapped.outcomes[0].reason
