"""Video and animation bombs are refused from their headers, before a frame is decoded.

The bombs (`tests.hostile_corpus`): an 8192 x 8192 H.264 clip of 200 kB, and 7000 x 7000 GIF,
APNG and WebP animations of 30 frames of a few kilobytes each. Before the frame limit, one such
file cost 0.25 to 1.9 GB of memory (`benchmarks/video_bombs.py`); here they must come back as
each item's recorded reason, with FFmpeg never opening the video and Pillow never decoding a
frame of the animations.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_corpus import VIDEO_CODECS, animated_bomb, video_bomb, write_video_bomb
from tests.optional import need_module
from vhd.errors import MediaError

ANIMATIONS = {"gif": "GIF", "png": "PNG", "webp": "WEBP"}
REASON = "over the frame limit of 33,177,600"


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_module("av", "pip install 'vhd[video]'")
    folder = tmp_path_factory.mktemp("bombs") / "in"
    folder.mkdir()
    write_video_bomb(folder / "clip.mp4")
    for ext, fmt in ANIMATIONS.items():
        (folder / f"anim.{ext}").write_bytes(animated_bomb(fmt))
    return folder


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every video FFmpeg opens and every image size Pillow decodes, while the test runs."""
    from PIL import ImageFile

    import vhd.media.video as video

    seen: list[Any] = []
    real_load, real_import = ImageFile.ImageFile.load, video._import_av

    def load(self: Any) -> Any:
        seen.append(self.size)
        return real_load(self)

    class Spy:
        def __init__(self, av: Any) -> None:
            self._av = av

        def __getattr__(self, name: str) -> Any:
            return getattr(self._av, name)

        def open(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(("av.open", args[0]))
            return self._av.open(*args, **kwargs)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    monkeypatch.setattr(video, "_import_av", lambda: Spy(real_import()))
    yield seen


def nothing_big(seen: list[Any]) -> bool:
    return not any(s[0] == "av.open" or s[0] * s[1] > 1_000_000 for s in seen)


def test_the_media_loader_refuses_every_bomb_before_decoding(bombs: Path, decodes: list[Any]) -> None:
    from vhd.media.discover import kind_for
    from vhd.media.load import load_sample
    from vhd.records import MediaItem

    for path in sorted(bombs.iterdir()):
        with pytest.raises(MediaError, match=REASON) as caught:
            load_sample(MediaItem(path=path, kind=kind_for(path)))
        assert "refused before decoding; raise max_frame_pixels" in str(caught.value)
    assert nothing_big(decodes), decodes


def test_ingest_frames_and_annotate_record_the_reason(
    bombs: Path, decodes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vhd.cli.main import main

    def run(*args: str) -> Any:
        code = main([*args, "--json", "--no-progress"])
        out = capsys.readouterr().out
        assert code in (0, 1)
        return json.loads(out)

    ingested = run("ingest", str(bombs), "--store", str(tmp_path / "i.db"))
    assert ingested["counts"]["invalid"] == 4 and ingested["counts"]["added"] == 0
    assert all(REASON in entry["reason"] for entry in ingested["invalid"]), ingested["invalid"]

    (framed,) = run("frames", str(bombs), "--out", str(tmp_path / "frames"))
    assert framed["status"] == "failed" and REASON in framed["reason"]

    annotated = run("annotate", str(bombs), "--model", "scripted:demo", "--store", str(tmp_path / "a.db"))
    assert annotated["annotated"] == 0 and annotated["skipped"] == 4
    from vhd.store.sqlite import Store

    with Store(tmp_path / "a.db") as store:
        skips = store.skips()
    assert len(skips) == 4 and all(REASON in s.reason for s in skips), skips
    assert nothing_big(decodes), decodes


def test_a_configured_frame_limit_applies_to_videos_and_animations(tmp_path: Path) -> None:
    """The limit is a setting (``[media] max_frame_pixels``); a still image is not held to it."""
    from PIL import Image

    from vhd.config import MediaConfig
    from vhd.media.load import load_sample, media_settings
    from vhd.records import Kind, MediaItem

    need_module("av", "pip install 'vhd[video]'")
    settings = media_settings(MediaConfig(max_frame_pixels=100 * 100))
    clip, anim, still = tmp_path / "c.webm", tmp_path / "a.gif", tmp_path / "s.png"
    clip.write_bytes(video_bomb("libvpx", "webm", (128, 96), frames=2))
    anim.write_bytes(animated_bomb("GIF", side=128, frames=3))
    Image.new("RGB", (128, 128)).save(still)
    with pytest.raises(MediaError, match=r"video frames are 128x96 = 12,288 pixels, over the frame limit of 10,000"):
        load_sample(MediaItem(path=clip, kind=Kind.VIDEO), settings)
    with pytest.raises(MediaError, match=r"animated image frames are 128x128"):
        load_sample(MediaItem(path=anim, kind=Kind.IMAGE), settings)
    assert load_sample(MediaItem(path=still, kind=Kind.IMAGE), settings).images
    photo = tmp_path / "p.jpg"  # a multi-picture JPEG (a phone photo with its depth map) is no animation
    Image.new("RGB", (128, 128)).save(photo, "MPO", save_all=True, append_images=[Image.new("RGB", (64, 64))])
    assert Image.open(photo).format == "MPO"
    assert load_sample(MediaItem(path=photo, kind=Kind.IMAGE), settings).images
    assert load_sample(MediaItem(path=clip, kind=Kind.VIDEO)).sample.frames == [0, 1]  # the default allows it


def test_a_header_that_hides_the_size_is_caught_when_the_stream_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a readable container header, the decoder's own size is checked before any frame."""
    import vhd.media.videoopen as videoopen
    from vhd.media.video import read_frames

    need_module("av", "pip install 'vhd[video]'")
    clip = tmp_path / "c.mp4"
    clip.write_bytes(video_bomb("libx264", "mp4", (96, 64), frames=3))
    monkeypatch.setattr(videoopen, "declared_frame_size", lambda path, demuxer: None)  # the pre-decode gate
    for strategy in ("auto", "decode"):
        with pytest.raises(MediaError, match="video frames are 96x64"):
            read_frames(clip, 2, strategy=strategy, max_pixels=96 * 64 - 1)
    assert read_frames(clip, 2, max_pixels=96 * 64).indices == [0, 2]


@pytest.mark.parametrize(("name", "encoder", "fmt", "ext"), VIDEO_CODECS)
def test_container_headers_give_the_frame_size(name: str, encoder: str, fmt: str, ext: str, tmp_path: Path) -> None:
    from vhd.media.untrusted import video_demuxer
    from vhd.media.videosize import declared_frame_size

    need_module("av", "pip install 'vhd[video]'")
    import av

    path = tmp_path / f"c{ext}"
    with av.open(str(path), "w", format=fmt) as out:  # 80 x 48: width and height told apart
        stream = out.add_stream(encoder, rate=12)
        stream.width, stream.height = 80, 48
        stream.pix_fmt = "yuvj420p" if encoder == "mjpeg" else "yuv420p"
        for packet in [*stream.encode(av.VideoFrame(80, 48, stream.pix_fmt)), *stream.encode()]:
            out.mux(packet)
    demuxer = video_demuxer(path.read_bytes()[:64])
    assert demuxer is not None
    assert declared_frame_size(path, demuxer) == (80, 48)
    (tmp_path / "cut").write_bytes(path.read_bytes()[:40])  # a header cut short says nothing
    assert declared_frame_size(tmp_path / "cut", demuxer) is None


def test_decodes_wait_for_room_in_one_budget_shared_by_the_process(tmp_path: Path) -> None:
    """`load_sample` in any thread waits while the process's decode budget is taken (`vhd.media.budget`)."""
    import threading

    from PIL import Image

    from vhd.media.budget import decode_budget, video_cost
    from vhd.media.load import MediaSettings, load_sample
    from vhd.records import Kind, MediaItem

    need_module("av", "pip install 'vhd[video]'")
    clip, still = tmp_path / "c.mp4", tmp_path / "s.png"
    clip.write_bytes(video_bomb("libx264", "mp4", (96, 64), frames=3))
    Image.new("RGB", (64, 48)).save(still)
    settings = MediaSettings(decode_memory=3 * 2**30 + 12345)  # a budget of its own for this test
    budget = decode_budget(settings.decode_memory)
    assert decode_budget(settings.decode_memory) is budget  # one per process and size
    assert video_cost((96, 64), 5) < video_cost((7680, 4320), 5) < budget.total
    for item in (MediaItem(path=clip, kind=Kind.VIDEO), MediaItem(path=still, kind=Kind.IMAGE)):
        done: list[Any] = []
        with budget.hold(budget.total):  # every byte taken, as by a large decode in another worker
            worker = threading.Thread(target=lambda item=item, done=done: done.append(load_sample(item, settings)))
            worker.start()
            worker.join(0.5)
            assert worker.is_alive() and not done  # waiting for room, nothing decoded
        worker.join(30)
        assert done and done[0].images and budget.used == 0
    assert budget.peak == budget.total  # nothing ran beside the large holder


def test_hostile_headers_give_no_size_and_no_error(tmp_path: Path) -> None:
    """Boxes nested thousands deep, millions of empty boxes, sizes past the end: None, quickly."""
    import struct
    import time

    from vhd.media.videosize import declared_frame_size

    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I4s", 8 + len(body), kind) + body

    deep = b""
    for _ in range(5000):
        deep = box(b"mdia", deep)
    cases = {
        "deep.mp4": box(b"ftyp", b"isom") + box(b"moov", box(b"trak", deep)),
        "many.mp4": box(b"ftyp", b"isom") + box(b"moov", b"\0\0\0\x08free" * 200_000),
        "past.mp4": box(b"ftyp", b"isom") + struct.pack(">I4s", 2**31, b"moov"),
        "huge.mp4": box(b"ftyp", b"isom") + struct.pack(">I4sQ", 1, b"moov", 2**62),
        "deep.avi": b"RIFF\0\0\0\0AVI " + b"".join(struct.pack("<4sI4s", b"LIST", 10**6, b"hdrl") for _ in range(5000)),
        # an EBML header, a Segment of unknown size, then 100,000 empty Void elements
        "unknown.webm": b"\x1a\x45\xdf\xa3\x80\x18\x53\x80\x67\x01" + b"\xff" * 7 + b"\xec\x80" * 100_000,
    }
    started = time.perf_counter()
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        demuxer = {".mp4": "mov", ".avi": "avi", ".webm": "matroska"}[Path(name).suffix]
        assert declared_frame_size(tmp_path / name, demuxer) is None, name
    assert time.perf_counter() - started < 5  # a few thousand boxes read at most per file
