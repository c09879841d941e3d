from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from tests.media.conftest import index_color, make_video
from vhd.errors import ConfigError
from vhd.media.discover import discover, frame_folder_frames
from vhd.records import Kind


def _img(path: Path, color: tuple[int, int, int] = (200, 30, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), color).save(path)
    return path


def _frames(folder: Path, stem: str, count: int, ext: str = "png") -> list[Path]:
    return [_img(folder / f"{stem}_{k:04d}.{ext}", index_color(k)) for k in range(count)]


def _names(found: object, root: Path) -> list[str]:
    items = getattr(found, "items")  # noqa: B009
    return [str(i.path.relative_to(root)) for i in items]


def test_nested_folders_sorted_hidden_ignored(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _img(root / "b.png")
    _img(root / "a.JPG")
    _img(root / "sub" / "c.webp")
    _img(root / "sub" / "deeper" / "a.bmp")
    _img(root / ".hidden.png")
    _img(root / ".cache" / "x.png")
    make_video(root / "sub" / "clip.mp4", 3)
    (root / "notes.txt").write_text("hello")
    found = discover([root])
    assert _names(found, root) == [
        "a.JPG",
        "b.png",
        "sub/c.webp",
        "sub/clip.mp4",
        "sub/deeper/a.bmp",
    ]
    kinds = {i.path.name: i.kind for i in found.items}
    assert kinds["clip.mp4"] is Kind.VIDEO and kinds["b.png"] is Kind.IMAGE
    assert all(i.path.is_absolute() for i in found.items)
    assert [(s.path.name, s.reason) for s in found.skipped] == [("notes.txt", "unsupported file type .txt")]


def test_missing_input_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="input not found"):
        discover([tmp_path / "nope"])


def test_single_files_and_duplicates(tmp_path: Path) -> None:
    a = _img(tmp_path / "a.png")
    other = tmp_path / "x.xyz"
    other.write_bytes(b"?")
    rel = os.path.relpath(a)
    found = discover([a, str(a), rel, tmp_path, other])
    assert [i.path for i in found.items] == [a]
    assert [s.reason for s in found.skipped] == [
        "unsupported file type .xyz",
        "unsupported file type .xyz",
    ]


def test_frame_folder_detection(tmp_path: Path) -> None:
    good = tmp_path / "vid"
    frames = _frames(good, "clip", 5)
    (good / ".DS_Store").write_bytes(b"junk")
    assert frame_folder_frames(good) == frames

    gap = tmp_path / "gap"
    _frames(gap, "clip", 3)
    (gap / "clip_0001.png").unlink()
    two_stems = tmp_path / "stems"
    _frames(two_stems, "a", 2)
    _frames(two_stems, "b", 2)
    with_sub = tmp_path / "sub"
    _frames(with_sub, "clip", 3)
    (with_sub / "inner").mkdir()
    with_text = tmp_path / "text"
    _frames(with_text, "clip", 3)
    (with_text / "readme.txt").write_text("x")
    single = tmp_path / "single"
    _frames(single, "clip", 1)
    camera = tmp_path / "camera"
    for k in (1, 2, 3):
        _img(camera / f"IMG_{k:04d}.jpg")
    for folder in (gap, two_stems, with_sub, with_text, single, camera):
        assert frame_folder_frames(folder) is None, folder.name


def test_frame_folders_found_while_scanning(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _frames(root / "v1", "v1", 5)
    _frames(root / "v2", "other", 12, ext="jpg")
    _img(root / "photo.png")
    found = discover([root], frame_folders=True)
    assert _names(found, root) == ["photo.png", "v1", "v2"]
    v1 = found.items[1]
    assert v1.kind is Kind.VIDEO and v1.is_frame_folder
    # A frame folder given directly is one video too.
    direct = discover([root / "v2"], frame_folders=True)
    assert len(direct.items) == 1 and direct.items[0].is_frame_folder


def test_numbered_photos_are_photos_unless_frame_folders_asked(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _frames(root / "shoot", "photo", 4, ext="jpg")
    found = discover([root])
    assert [i.path.name for i in found.items] == [f"photo_{k:04d}.jpg" for k in range(4)]
    assert all(i.kind is Kind.IMAGE and not i.is_frame_folder for i in found.items)
    assert len(discover([root / "shoot"]).items) == 4


def test_symlinks(tmp_path: Path) -> None:
    outside = _img(tmp_path / "outside" / "secret.png")
    root = tmp_path / "root"
    inside = _img(root / "a.png")
    (root / "link_out.png").symlink_to(outside)
    (root / "link_in.png").symlink_to(inside)
    (root / "broken.png").symlink_to(tmp_path / "gone.png")
    (root / "dir_out").symlink_to(outside.parent)
    found = discover([root])
    assert [i.path.name for i in found.items] == ["a.png"]
    reasons = {s.path.name: s.reason for s in found.skipped}
    assert reasons["link_out.png"].startswith("symbolic link points outside")
    assert reasons["dir_out"].startswith("symbolic link points outside")
    assert reasons["broken.png"] == "broken symbolic link"
    assert "link_in.png" not in reasons  # same file as a.png: listed once


def test_non_utf8_file_names_do_not_crash(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _img(root / "ok.png")
    bad = os.path.join(os.fsencode(root), b"caf\xe9.png")
    with open(bad, "wb") as fh:
        fh.write((root / "ok.png").read_bytes())
    found = discover([root])
    assert [i.path.name for i in found.items] == ["ok.png"]
    (skipped,) = found.skipped
    assert "not valid UTF-8" in skipped.reason
    text = str(skipped)
    text.encode("utf-8")  # printable
    assert "caf\\xe9.png" in text  # the byte escaped (vhd.fileio.display_path), not lost to U+FFFD


def _write_csv(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_manifest(tmp_path: Path) -> None:
    media = tmp_path / "media"
    a = _img(media / "a.png")
    _img(media / "b.jpg")
    make_video(media / "c.mp4", 3)
    _frames(media / "frames", "f", 3)
    manifest = _write_csv(
        tmp_path / "m.csv",
        "path,harmful,source,keyword,generator,split,kind,note\n"
        f"{a},yes,real,knife in kitchen,,test,image,first\n"
        "media/b.jpg,0,synthetic,toy gun,sdxl,train,,\n"
        "media/c.mp4,TRUE,real,,,,video,\n"
        "media/frames,no,,,,,,\n"
        "media/missing.png,yes,,,,,,\n"
        "media/a.png,maybe,,,,,,\n"
        "media/b.jpg,yes,fake,,,,,\n"
        "media/b.jpg,yes,,,,,film,\n"
        ",yes,,,,,,\n"
        "media/b.jpg,no,real,,,,,,extra\n"
        "\n"
        "media/a.png,no,,,,,,dup\n",
    )
    found = discover([manifest])
    items = found.items
    assert [i.path.name for i in items] == ["a.png", "b.jpg", "c.mp4", "frames"]
    first, second, video, folder = items
    assert (first.harmful, first.source, first.keyword, first.split) == (
        True,
        "real",
        "knife in kitchen",
        "test",
    )
    assert first.meta == {"note": "first"}
    assert (second.harmful, second.source, second.generator, second.split) == (
        False,
        "synthetic",
        "sdxl",
        "train",
    )
    assert video.harmful is True and video.kind is Kind.VIDEO
    assert folder.is_frame_folder and folder.harmful is False
    reasons = [s.reason for s in found.skipped]
    assert reasons[0] == "m.csv line 6: listed file not found"
    assert reasons[1].startswith("m.csv line 7: expected yes/no")
    assert reasons[2].startswith("m.csv line 8: source must be real or synthetic")
    assert reasons[3].startswith("m.csv line 9: kind must be image or video")
    assert reasons[4].startswith("m.csv line 10: no path")
    assert reasons[5] == "m.csv line 11: more fields than the header has columns"
    assert reasons[6] == "m.csv line 13: listed more than once; kept the first entry"
    assert len(reasons) == 7


def test_vhd11k_style_columns(tmp_path: Path) -> None:
    _img(tmp_path / "imgs" / "x.png")
    make_video(tmp_path / "vids" / "y.mp4", 3)
    images = _write_csv(
        tmp_path / "ann.csv",
        "imagePath,decision,harmfulType,affirmativeDebater_argument_0\n"
        'imgs/x.png,yes,violence,"It shows, clearly, a fight"\n',
    )
    videos = _write_csv(tmp_path / "vann.csv", "videoPath,decision\nvids/y.mp4,no\n")
    found = discover([images, videos])
    x, y = found.items
    assert x.harmful is True and x.kind is Kind.IMAGE
    assert x.meta == {
        "harmfulType": "violence",
        "affirmativeDebater_argument_0": "It shows, clearly, a fight",
    }
    assert y.harmful is False and y.kind is Kind.VIDEO


def test_csv_without_path_column(tmp_path: Path) -> None:
    manifest = _write_csv(tmp_path / "m.csv", "file,harmful\na.png,yes\n")
    with pytest.raises(ConfigError, match="no path column"):
        discover([manifest])


def test_jsonl_manifest(tmp_path: Path) -> None:
    _img(tmp_path / "a.png")
    _img(tmp_path / "b.png")
    lines = [
        json.dumps({"path": "a.png", "harmful": True, "score": 0.5, "id": "img-1"}),
        "{not json",
        json.dumps(["a list"]),
        "",
        json.dumps({"path": "b.png", "label": 0, "kind": "image"}),
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    found = discover([manifest])
    a, b = found.items
    assert (a.harmful, a.id, a.meta) == (True, "img-1", {"score": 0.5})
    assert b.harmful is False
    assert [s.reason.split(":")[0] for s in found.skipped] == ["m.jsonl line 2", "m.jsonl line 3"]


def test_json_manifests(tmp_path: Path) -> None:
    _img(tmp_path / "a.png")
    _img(tmp_path / "b.png")
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([{"imagePath": "a.png", "decision": "no"}, 7]))
    keyed = tmp_path / "keyed.json"
    keyed.write_text(json.dumps({"b.png": {"decision": "yes", "harmfulType": "x"}}))
    found = discover([listed, keyed])
    assert [(i.path.name, i.harmful) for i in found.items] == [("a.png", False), ("b.png", True)]
    assert found.items[1].meta == {"harmfulType": "x"}
    assert [s.reason for s in found.skipped] == ["list.json entry 2: not a JSON object"]
    bad = tmp_path / "bad.json"
    bad.write_text('"just a string"')
    with pytest.raises(ConfigError):
        discover([bad])


def test_manifest_kind_for_unknown_extension(tmp_path: Path) -> None:
    _img(tmp_path / "blob.png").rename(tmp_path / "blob.dat")  # PNG content, odd extension
    manifest = _write_csv(tmp_path / "m.csv", "path,kind\nblob.dat,image\nblob.dat,\n")
    found = discover([manifest])
    assert [i.kind for i in found.items] == [Kind.IMAGE]
    assert "unsupported file type .dat" in found.skipped[0].reason


def test_non_utf8_manifest_is_config_error(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_bytes(b"path\ncaf\xe9.png\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        discover([manifest])


def test_a_folders_own_manifest_is_read_first_and_not_skipped(tmp_path: Path) -> None:
    """`vhd examples` writes manifest.csv into its folder: annotating the folder reads it as a manifest."""
    _img(tmp_path / "a.jpg")
    _img(tmp_path / "b.png", (10, 200, 10))
    (tmp_path / "manifest.csv").write_text("path,keyword\nb.png,green square\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "manifest.csv").write_text("path\nnothing.jpg\n", encoding="utf-8")
    found = discover([tmp_path])
    assert _names(found, tmp_path) == ["b.png", "a.jpg"]  # the manifest's rows first, then the scan
    skipped = {Path(s.path).relative_to(tmp_path).as_posix(): s.reason for s in found.skipped}
    assert "manifest.csv" not in skipped  # read, not skipped as an unsupported file
    assert "unsupported file type .csv" in skipped["sub/manifest.csv"]  # only the folder's own is read


def test_a_broken_folder_manifest_is_a_reason_not_a_stop(tmp_path: Path) -> None:
    _img(tmp_path / "a.jpg")
    (tmp_path / "manifest.csv").write_bytes(b"\xff\xfe\x00garbage")
    found = discover([tmp_path])
    assert _names(found, tmp_path) == ["a.jpg"]
    assert any("manifest" in s.reason for s in found.skipped)
