from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.media.conftest import center_index, index_color, jpeg_bytes, make_video, photo
from vhd.errors import ConfigError, MediaError
from vhd.media.discover import MediaItem, discover
from vhd.media.hashing import combine_hashes, sha256_file
from vhd.media.image import ImageLimits
from vhd.media.load import LoadedSample, MediaSettings, load_sample, sample_id
from vhd.records import Kind


def _frame_folder(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(count):
        path = folder / f"clip_{k:04d}.png"
        Image.new("RGB", (40, 30), index_color(k)).save(path)
        paths.append(path)
    return paths


def test_image_sample(tmp_path: Path) -> None:
    data = jpeg_bytes(photo((640, 480)))
    path = tmp_path / "p.jpg"
    path.write_bytes(data)
    loaded = load_sample(MediaItem(path=path, kind=Kind.IMAGE, keyword="kitchen knife", source="real"))
    sample = loaded.sample
    assert sample.id == hashlib.sha256(data).hexdigest()
    assert (sample.kind, sample.path, sample.frames) == (Kind.IMAGE, str(path), [])
    assert (sample.keyword, sample.source) == ("kitchen knife", "real")
    (image,) = loaded.images
    assert image.data == data  # small RGB JPEG: original bytes


def test_video_sample(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.mp4", 30)
    loaded = load_sample(MediaItem(path=path, kind=Kind.VIDEO), MediaSettings(max_side=32))
    assert loaded.sample.id == sha256_file(path)
    assert loaded.sample.frames == [0, 7, 14, 22, 29]
    assert len(loaded.images) == 5
    assert [center_index(img.to_pil()) for img in loaded.images] == [0, 7, 14, 22, 29]
    assert all(max(img.width, img.height) == 32 for img in loaded.images)


def test_frame_folder_sample(tmp_path: Path) -> None:
    frames = _frame_folder(tmp_path / "clip", 12)
    (item,) = discover([tmp_path / "clip"], frame_folders=True).items
    loaded = load_sample(item)
    expected_id = combine_hashes(sha256_file(p) for p in frames)
    assert loaded.sample.id == expected_id
    assert loaded.sample.id == hashlib.sha256("".join(sha256_file(p) for p in frames).encode()).hexdigest()
    assert loaded.sample.kind is Kind.VIDEO
    assert loaded.sample.frames == [0, 3, 6, 8, 11]
    assert [center_index(img.to_pil()) for img in loaded.images] == [0, 3, 6, 8, 11]


def test_frame_folder_with_a_corrupt_frame(tmp_path: Path) -> None:
    frames = _frame_folder(tmp_path / "clip", 5)
    frames[2].write_bytes(frames[2].read_bytes()[:40])
    (item,) = discover([tmp_path / "clip"], frame_folders=True).items
    with pytest.raises(MediaError, match=r"^frame clip_0002.png: "):
        load_sample(item)


def test_manifest_fields_and_ids(tmp_path: Path) -> None:
    data = jpeg_bytes(photo((100, 80)))
    (tmp_path / "a.jpg").write_bytes(data)
    (tmp_path / "b.jpg").write_bytes(jpeg_bytes(photo((100, 81))))
    digest = hashlib.sha256(data).hexdigest()
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        "path,id,harmful,source,keyword,generator,split,origin\n"
        f"a.jpg,{digest.upper()},yes,synthetic,toy sword,sdxl,test,web\n"
        f"b.jpg,{digest},no,,,,,\n"
    )
    items = discover([manifest]).items
    loaded = load_sample(items[0])
    sample = loaded.sample
    assert sample.id == digest
    assert (sample.harmful, sample.source, sample.keyword, sample.generator, sample.split) == (
        True,
        "synthetic",
        "toy sword",
        "sdxl",
        "test",
    )
    assert sample.meta == {"origin": "web"}
    with pytest.raises(MediaError, match="differs from the manifest id"):
        load_sample(items[1])


def test_non_hash_manifest_id_is_kept_in_meta(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    Image.new("RGB", (10, 10)).save(path)
    loaded = load_sample(MediaItem(path=path, kind=Kind.IMAGE, id="img_0001"))
    assert loaded.sample.meta == {"id": "img_0001"}


def test_bad_media_raises_media_error(tmp_path: Path) -> None:
    bad_image = tmp_path / "x.png"
    bad_image.write_bytes(b"not really a png")
    with pytest.raises(MediaError):
        load_sample(MediaItem(path=bad_image, kind=Kind.IMAGE))
    bad_video = tmp_path / "x.mp4"
    bad_video.write_bytes(b"not really a video" * 10)
    with pytest.raises(MediaError):
        load_sample(MediaItem(path=bad_video, kind=Kind.VIDEO))
    big = tmp_path / "big.jpg"
    big.write_bytes(jpeg_bytes(photo((300, 300))))
    with pytest.raises(MediaError, match="over the limit"):
        load_sample(MediaItem(path=big, kind=Kind.IMAGE), MediaSettings(limits=ImageLimits(max_pixels=1000)))


def test_settings_identity_and_validation() -> None:
    settings = MediaSettings(fmt="JPG")
    assert settings.fmt == "jpeg"
    identity = settings.identity()
    assert identity["max_side"] == 1024 and identity["n_frames"] == 5
    assert identity["first_frames"] == 4000 and identity["quality"] == 90
    assert "limits" not in identity
    assert MediaSettings(limits=ImageLimits(max_pixels=10)).identity() == identity
    assert MediaSettings(max_side=512).identity() != identity
    bad: dict[str, Any]
    for bad in (
        {"fmt": "gif"},
        {"max_side": 8},
        {"quality": 101},
        {"n_frames": 0},
        {"first_frames": 0},
    ):
        with pytest.raises(ConfigError):
            MediaSettings(**bad)


def test_thread_pool_loading_matches_sequential(tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"p{i}.jpg").write_bytes(jpeg_bytes(photo((900 + 100 * i, 700))))
    make_video(tmp_path / "v1.mp4", 20)
    make_video(tmp_path / "v2.webm", 20, codec="libvpx-vp9")
    _frame_folder(tmp_path / "frames", 7)
    items = discover([tmp_path], frame_folders=True).items
    assert len(items) == 9
    settings = MediaSettings(max_side=256)

    def fingerprint(loaded: LoadedSample) -> tuple[str, list[int], list[str]]:
        return loaded.sample.id, loaded.sample.frames, [img.sha256 for img in loaded.images]

    sequential = [fingerprint(load_sample(item, settings)) for item in items]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda it: fingerprint(load_sample(it, settings)), items * 2))
    assert parallel == sequential * 2


def test_sha256_file_streams_large_files(tmp_path: Path) -> None:
    data = bytes(range(256)) * (5 * 4096 + 7)  # a little over 5 MiB, not chunk-aligned
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_sample_id_matches_load_sample(tmp_path: Path) -> None:
    (tmp_path / "p.jpg").write_bytes(jpeg_bytes(photo((120, 90))))
    make_video(tmp_path / "v.mp4", 8)
    _frame_folder(tmp_path / "frames", 6)
    items = discover([tmp_path], frame_folders=True).items
    assert len(items) == 3
    for item in items:
        assert sample_id(item) == load_sample(item).sample.id
    with pytest.raises(MediaError, match="cannot read file"):
        sample_id(MediaItem(path=tmp_path / "gone.png", kind=Kind.IMAGE))
    folder = next(i for i in items if i.is_frame_folder)
    (tmp_path / "frames" / "clip_0003.png").unlink()
    with pytest.raises(MediaError, match="frame folder"):
        sample_id(folder)
