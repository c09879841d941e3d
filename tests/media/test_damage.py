"""Damaged JPEGs, H.264 and FFV1 streams (a few corrupted bytes) are skipped, not annotated from garbled pixels.

Pillow decodes such a JPEG without a word and FFmpeg conceals the errors of such a video, so the
damage is only seen through FFmpeg's strict error detection (``err_detect=explode``), which needs
PyAV; without PyAV the JPEG check is off, and that is said. FFV1's slice CRCs are checked by vhd.
"""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest
from PIL import Image

import vhd
from tests.media.conftest import jpeg_bytes, make_video, photo
from vhd.errors import MediaError
from vhd.media.image import load_image_encoded, open_image

pytest.importorskip("av")


def damage_jpeg(data: bytes, at: float = 0.5, length: int = 16) -> bytes:
    """Overwrite ``2 * length`` bytes of the entropy-coded data with set bits (a byte-stuffed run of
    ``FF 00``): an impossible Huffman code, which libjpeg and FFmpeg alike conceal by default."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    where = start + int((len(data) - 2 - start) * at)
    return data[:where] + b"\xff\x00" * length + data[where + 2 * length :]


def damage_video(data: bytes, flips: int = 3, keyframes: bool = False, frame: int | None = None) -> bytes:
    """Invert a few bytes inside the two largest compressed frames of a video (or every keyframe,
    or only the one frame given)."""
    import av

    with av.open(io.BytesIO(data)) as container:
        packets = [(p.pos, p.size, p.is_keyframe) for p in container.demux(container.streams.video[0]) if p.size]
    if frame is not None:
        chosen = packets[frame : frame + 1]
    else:
        chosen = [p for p in packets if p[2]] if keyframes else sorted(packets, key=lambda p: -p[1])[:2]
    out = bytearray(data)
    for pos, size, _key in chosen:
        for j in range(1, flips + 1):
            out[pos + size * j // (flips + 1)] ^= 0xFF
    return bytes(out)


def concealed_frames(data: bytes) -> int:
    """Frames FFmpeg decodes from a video with its default (concealing) error handling."""
    import av

    with av.open(io.BytesIO(data)) as container:
        return sum(1 for _ in container.decode(container.streams.video[0]))


def photo_video(path: Path, frames: int = 24) -> Path:
    base = photo((128, 96))
    return make_video(path, frames, size=(128, 96), draw=lambda i: base.rotate(i * 5))


@pytest.mark.parametrize("progressive", [False, True])
def test_damaged_jpeg_is_refused_and_the_intact_one_read(progressive: bool, tmp_path: Path) -> None:
    intact = jpeg_bytes(photo((800, 600)), progressive=progressive)
    damaged = damage_jpeg(intact)
    with Image.open(io.BytesIO(damaged)) as img:
        img.load()  # the premise: Pillow decodes it without any error or warning
    good, bad = tmp_path / "good.jpg", tmp_path / "bad.jpg"
    good.write_bytes(intact)
    bad.write_bytes(damaged)
    assert open_image(good).size == (800, 600)
    assert load_image_encoded(good).data == intact  # the fast path still sends the original bytes
    for read in (open_image, load_image_encoded, lambda p: load_image_encoded(p, max_side=100)):
        with pytest.raises(MediaError, match=r"^damaged: JPEG data has decoding errors") as info:
            read(bad)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("strategy", ["auto", "decode"])
def test_damaged_h264_is_refused_and_the_intact_one_read(strategy: str, tmp_path: Path) -> None:
    from vhd.media.video import read_frames

    good = photo_video(tmp_path / "good.mp4")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(damage_video(good.read_bytes()))
    assert concealed_frames(bad.read_bytes()) == 24  # the premise: FFmpeg conceals it by default
    assert read_frames(good, strategy=strategy).indices == [0, 6, 12, 17, 23]
    with pytest.raises(MediaError, match=r"^damaged: h264 video has decoding errors"):
        read_frames(bad, strategy=strategy)


@pytest.mark.parametrize("frame", [0, 12])
def test_damaged_ffv1_is_refused_by_its_slice_crcs(frame: int, tmp_path: Path) -> None:
    """FFmpeg only logs an FFV1 slice CRC mismatch (even with ``err_detect=crccheck+explode``) and
    conceals the slice; vhd checks the CRCs itself. Damage in the very first frame is found too."""
    from vhd.media.video import read_frames

    base = photo((128, 96))
    good = make_video(tmp_path / "good.mkv", 24, codec="ffv1", size=(128, 96), draw=lambda i: base.rotate(i * 5))
    bad = tmp_path / "bad.mkv"
    bad.write_bytes(damage_video(good.read_bytes(), frame=frame))
    assert concealed_frames(bad.read_bytes()) == 24  # the premise: FFmpeg conceals it by default
    assert read_frames(good).indices == [0, 6, 12, 17, 23]
    with pytest.raises(MediaError, match=rf"^damaged: ffv1 video fails its slice checksum \(CRC\) in frame {frame};"):
        read_frames(bad)


def test_ffv1_without_slice_crcs_is_read(tmp_path: Path) -> None:
    """An FFV1 stream encoded without slice CRCs (``slicecrc=0``) is read as before, unchecked."""
    import av
    import numpy as np

    from vhd.media.video import read_frames

    path = tmp_path / "nocrc.mkv"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("ffv1", rate=24, options={"slicecrc": "0"})
        stream.width, stream.height, stream.pix_fmt = 128, 96, "yuv420p"
        for i in range(24):
            frame = av.VideoFrame.from_ndarray(np.asarray(photo((128, 96)).rotate(i * 5)), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    assert read_frames(path).indices == [0, 6, 12, 17, 23]


def test_damage_in_a_seeked_group_of_pictures_is_found(tmp_path: Path) -> None:
    """The keyframe plan decodes with the same strict check as forward decoding."""
    from tests.media.test_video_plan import encode
    from vhd.media.video import read_frames

    good = encode(tmp_path / "good.mp4", 300, options={"g": "40"})
    planned = read_frames(good)
    assert planned.method == "keyframes" and planned.seeks >= 2
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(damage_video(good.read_bytes(), keyframes=True))
    assert concealed_frames(bad.read_bytes()) == 300
    with pytest.raises(MediaError, match=r"^damaged: h264 video has decoding errors"):
        read_frames(bad)


def test_annotate_skips_damaged_media_and_annotates_the_intact(tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    intact = jpeg_bytes(photo((320, 240)))
    (media / "good.jpg").write_bytes(intact)
    (media / "bad.jpg").write_bytes(damage_jpeg(intact))
    clip = photo_video(media / "good.mp4")
    (media / "bad.mp4").write_bytes(damage_video(clip.read_bytes()))
    summary = vhd.annotate([media], model="scripted:demo", store=tmp_path / "run.db")
    assert (summary.annotated, summary.skipped) == (2, 2)
    reasons = {Path(p).name: r for p, r in summary.skip_reasons}
    assert set(reasons) == {"bad.jpg", "bad.mp4"}
    assert all(r.startswith("damaged: ") and "decoding errors" in r for r in reasons.values())


def test_ingest_dedup_frame_folders_and_bench_refuse_a_damaged_jpeg(tmp_path: Path) -> None:
    from vhd.bench.original import load_original
    from vhd.curate.dedup import find_duplicates
    from vhd.curate.ingest import ingest
    from vhd.media.load import load_sample
    from vhd.records import Kind, MediaItem
    from vhd.store import Store

    media = tmp_path / "media"
    media.mkdir()
    intact = jpeg_bytes(photo((320, 240)))
    (media / "good.jpg").write_bytes(intact)
    (media / "bad.jpg").write_bytes(damage_jpeg(intact))
    with Store(tmp_path / "run.db") as store:
        result = ingest([media], store)
    assert len(result.added) == 1 and [Path(p).name for p, _ in result.invalid] == ["bad.jpg"]
    assert result.invalid[0][1].startswith("damaged: ")
    found = find_duplicates(media, jobs=1)
    assert [(Path(p).name, r.startswith("damaged: ")) for p, r in found.unreadable] == [("bad.jpg", True)]
    with pytest.raises(MediaError, match="damaged: "):
        load_original(media / "bad.jpg")
    assert load_original(media / "good.jpg").data == intact
    folder = tmp_path / "clip"
    folder.mkdir()
    for k in range(3):
        (folder / f"clip_{k:04d}.jpg").write_bytes(intact if k != 1 else damage_jpeg(intact))
    with pytest.raises(MediaError, match=r"^frame clip_0001.jpg: damaged: "):
        load_sample(MediaItem(path=folder, kind=Kind.VIDEO, is_frame_folder=True))


def test_without_pyav_the_jpeg_check_is_off_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from vhd.media import untrusted

    damaged = tmp_path / "bad.jpg"
    damaged.write_bytes(damage_jpeg(jpeg_bytes(photo((320, 240)))))
    assert untrusted.damage_check_note() is None
    monkeypatch.setitem(sys.modules, "av", None)  # `import av` now raises ImportError
    untrusted._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="vhd.media.untrusted"):
        assert open_image(damaged).size == (320, 240)  # not checked: read as before
        assert load_image_encoded(damaged).width == 320
    note = untrusted.damage_check_note()
    assert note is not None and "PyAV" in note and "vhd[video]" in note
    assert [r.getMessage() for r in caplog.records] == [note]  # said once, not once per image
    untrusted._warn_once.cache_clear()
