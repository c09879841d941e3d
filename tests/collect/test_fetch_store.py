from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from tests.collect.conftest import jpeg_bytes, leftovers, mp4_bytes, photo_bytes, png_bytes
from tests.collect.media_server import MediaServer, Route
from vhd.collect.blocklist import BlockList, pdq_hash
from vhd.collect.fetch import fetch
from vhd.collect.fetch_settings import FetchSettings
from vhd.collect.urls import UrlRow
from vhd.records import Kind
from vhd.store import Store


def settings(**overrides: object) -> FetchSettings:
    base: dict[str, object] = {"allow_networks": ("127.0.0.1/32",), "timeout": 2.0, "retries": 0, "backoff": 0.01}
    base.update(overrides)
    return FetchSettings(**base)  # type: ignore[arg-type]


def test_store_registers_valid_media_and_rejects_broken_files(server: MediaServer, tmp_path: Path) -> None:
    img, clip = jpeg_bytes("teal", (64, 48)), mp4_bytes(tmp_path, frames=8)
    broken_jpeg = jpeg_bytes("red", (64, 48))[:-400]
    rows = [
        UrlRow(
            url=server.add("/a.jpg", Route(body=img)), line=2, keyword="toy", source="real", meta={"crawler": "pexels"}
        ),
        UrlRow(url=server.add("/v.mp4", Route(body=clip)), line=3, keyword="gun", id="clip-7"),
        UrlRow(url=server.add("/broken.jpg", Route(body=broken_jpeg)), line=4),
    ]
    out, db = tmp_path / "m", tmp_path / "run.db"
    report = fetch(rows, out, settings=settings(), store=db)
    assert [(o.status, o.error) for o in report.outcomes] == [("ok", ""), ("ok", ""), ("rejected", "invalid-media")]
    assert report.outcomes[2].reason.startswith("not a valid image")
    assert not (out / f"{hashlib.sha256(broken_jpeg).hexdigest()}.jpg").exists()
    with Store(db) as store:
        image = store.get_sample(hashlib.sha256(img).hexdigest())
        video = store.get_sample(hashlib.sha256(clip).hexdigest())
        assert store.get_sample(hashlib.sha256(broken_jpeg).hexdigest()) is None
    assert image is not None and video is not None
    assert (image.kind, image.keyword, image.source) == (Kind.IMAGE, "toy", "real")
    assert image.meta["url"] == rows[0].url and image.meta["crawler"] == "pexels"
    assert Path(image.path) == out / f"{image.id}.jpg"
    assert video.kind is Kind.VIDEO and len(video.frames) == 5 and video.meta["id"] == "clip-7"


def test_files_fetched_without_a_store_are_registered_on_a_later_run(server: MediaServer, tmp_path: Path) -> None:
    img = png_bytes("pink", (40, 40))
    rows = [UrlRow(url=server.add("/a.png", Route(body=img)), line=2, keyword="toy")]
    out, db = tmp_path / "m", tmp_path / "run.db"
    fetch(rows, out, settings=settings())
    report = fetch(rows, out, settings=settings(), store=db)
    assert server.hits["/a.png"] == 1 and report.outcomes[0].status == "ok"
    with Store(db) as store:
        sample = store.get_sample(hashlib.sha256(img).hexdigest())
    assert sample is not None and sample.keyword == "toy"


def test_block_list_quarantines_by_exact_and_perceptual_hash(server: MediaServer, tmp_path: Path) -> None:
    known = photo_bytes("astronaut", 512, "PNG")
    reencoded = photo_bytes("astronaut", 320, "JPEG", quality=40)
    by_sha, by_md5 = png_bytes("red"), jpeg_bytes("blue")
    fine = photo_bytes("coffee", 256)
    listing = tmp_path / "blocked.txt"
    entries = [
        f"sha256:{hashlib.sha256(by_sha).hexdigest()} case 1",
        f"md5:{hashlib.md5(by_md5).hexdigest()}",
        f"pdq:{pdq_hash(known)[0]} case 3",
    ]
    listing.write_text("\n".join(entries) + "\n")
    rows = [
        UrlRow(url=server.add("/1.png", Route(body=by_sha)), line=2),
        UrlRow(url=server.add("/2.jpg", Route(body=by_md5)), line=3),
        UrlRow(url=server.add("/3.jpg", Route(body=reencoded)), line=4),
        UrlRow(url=server.add("/4.jpg", Route(body=fine)), line=5),
    ]
    out, db = tmp_path / "m", tmp_path / "run.db"
    report = fetch(rows, out, settings=settings(), store=db, block_list=BlockList.load(listing))
    assert [(o.status, o.error) for o in report.outcomes] == [
        ("blocked", "blocklist"),
        ("blocked", "blocklist"),
        ("blocked", "blocklist"),
        ("ok", ""),
    ]
    assert "sha256" in report.outcomes[0].reason and "case 1" in report.outcomes[0].reason
    assert "md5" in report.outcomes[1].reason and "pdq within" in report.outcomes[2].reason
    quarantined = sorted(p.name for p in (out / ".quarantine").iterdir())
    expected = sorted(f"{hashlib.sha256(b).hexdigest()}.blocked" for b in (by_sha, by_md5, reencoded))
    assert quarantined == expected
    assert (out / ".quarantine" / f"{hashlib.sha256(by_sha).hexdigest()}.blocked").read_bytes() == by_sha
    assert report.outcomes[0].path == f".quarantine/{hashlib.sha256(by_sha).hexdigest()}.blocked"
    visible = sorted(p.name for p in out.iterdir() if p.is_file() and not p.name.startswith("."))
    assert visible == sorted(
        [f"{hashlib.sha256(fine).hexdigest()}.jpg", "fetch-log.jsonl", "fetch-report.csv", "manifest.csv"]
    )
    with open(out / "manifest.csv", newline="") as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == [hashlib.sha256(fine).hexdigest()]
    with Store(db) as store:
        assert all(store.get_sample(hashlib.sha256(b).hexdigest()) is None for b in (by_sha, by_md5, reencoded))
        assert store.get_sample(hashlib.sha256(fine).hexdigest()) is not None
    custom = tmp_path / "q"
    again = fetch(rows, tmp_path / "m2", settings=settings(), block_list=listing, quarantine=custom)
    assert again.counts()["blocked"] == 3 and len(list(custom.iterdir())) == 3


def test_a_trickling_download_hits_max_time(server: MediaServer, tmp_path: Path) -> None:
    rows = [
        UrlRow(
            url=server.add("/slow.png", Route(body=png_bytes() + b"\0" * 2000, chunk_size=100, chunk_delay=0.1)), line=2
        )
    ]
    out = tmp_path / "m"
    report = fetch(rows, out, settings=settings(max_time=0.5))
    assert (report.outcomes[0].status, report.outcomes[0].error) == ("failed", "timeout")
    assert "longer than 0.5 s" in report.outcomes[0].reason
    assert not leftovers(out) and not any(p.suffix == ".png" for p in out.iterdir())
