"""Only the image formats the README lists are decoded, decided by content, in every entry point.

TIFF, TGA, PSD, DDS and EPS files named ``.jpg`` must be refused file by file with a one-line reason
naming what they are and what is accepted, and the EPS plugin (which hands files to Ghostscript)
must never run.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import EpsImagePlugin, Image

import vhd
from tests.media.conftest import allowed_images, make_video, refused_images
from vhd.errors import ConfigError, MediaError
from vhd.media.image import ACCEPTED, load_image_encoded, open_image, open_untrusted
from vhd.records import Kind, MediaItem, Sample

SRC = Path(__file__).resolve().parents[2] / "src" / "vhd"


@pytest.fixture(autouse=True)
def no_ghostscript(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record every call into Pillow's EPS plugin (its header parser and its Ghostscript runner)."""
    calls: list[str] = []
    original = EpsImagePlugin.EpsImageFile._open

    def spy_open(self: EpsImagePlugin.EpsImageFile) -> None:
        calls.append("EpsImageFile._open")
        original(self)

    def spy_ghostscript(*args: object, **kwargs: object) -> None:
        calls.append("Ghostscript")
        raise OSError("Ghostscript must never run")

    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", spy_open)
    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", spy_ghostscript)
    yield calls
    assert calls == [], "the EPS plugin was used on an untrusted file"


def write_refused(folder: Path) -> dict[str, Path]:
    """Every refused format, each disguised as a ``.jpg``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fmt, data in refused_images().items():
        path = folder / f"{fmt.lower()}_disguised.jpg"
        path.write_bytes(data)
        paths[fmt] = path
    return paths


def assert_refusal(reason: str, fmt: str) -> None:
    """A refusal names the detected format and every accepted one, on one line."""
    assert "\n" not in reason
    assert fmt in reason, reason
    assert "JPEG, PNG, WebP, BMP, GIF" in reason, reason


def reasons_by_format(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for path, reason in pairs:
        name = Path(path).name
        if name.endswith("_disguised.jpg"):
            out[name.split("_")[0].upper()] = reason
    return out


# --- the one opener --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(refused_images()))
def test_refused_formats_name_themselves_and_the_accepted_ones(fmt: str, tmp_path: Path) -> None:
    path = write_refused(tmp_path)[fmt]
    for call in (lambda: open_image(path), lambda: load_image_encoded(path), lambda: open_untrusted(path)):
        with pytest.raises(MediaError) as info:
            call()
        assert_refusal(str(info.value), fmt)
    with pytest.raises(MediaError) as info:
        open_untrusted(path.read_bytes())
    assert_refusal(str(info.value), fmt)


@pytest.mark.parametrize("fmt", sorted(allowed_images()))
def test_accepted_formats_are_read_by_content_whatever_the_name(fmt: str, tmp_path: Path) -> None:
    assert fmt in ACCEPTED
    path = tmp_path / "named_wrongly.tif"
    path.write_bytes(allowed_images()[fmt])
    with open_untrusted(path) as img:
        assert img.format == fmt
    assert open_image(path).size == (16, 12)


def test_unknown_content_says_what_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "text.jpg"
    path.write_bytes(b"<html>not a photo</html>\n" * 4)
    with pytest.raises(MediaError, match=r"^not a recognised image format .*JPEG, PNG, WebP, BMP, GIF"):
        open_image(path)


def test_a_video_named_jpg_is_named_as_a_video(tmp_path: Path) -> None:
    clip = make_video(tmp_path / "clip.mp4", 3)
    disguised = tmp_path / "clip.jpg"
    disguised.write_bytes(clip.read_bytes())
    with pytest.raises(MediaError, match=r"MP4"):
        open_image(disguised)


def test_no_image_is_opened_outside_the_one_opener() -> None:
    """Every decode of a file goes through `vhd.media.image.open_untrusted` (defined in `vhd.media.untrusted`)."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "media" / "untrusted.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(r"\bImage\.open\(", line):
                offenders.append(f"{path.relative_to(SRC)}:{number}")
    assert offenders == []


# --- every entry point -----------------------------------------------------------------


def test_annotate_skips_refused_formats(tmp_path: Path) -> None:
    media = tmp_path / "media"
    write_refused(media)
    Image.new("RGB", (32, 32), (20, 90, 200)).save(media / "fine.png")
    summary = vhd.annotate([media], model="scripted:demo", store=tmp_path / "run.db")
    assert summary.annotated == 1 and summary.skipped == len(refused_images())
    reasons = reasons_by_format(summary.skip_reasons)
    assert set(reasons) == set(refused_images())
    for fmt, reason in reasons.items():
        assert_refusal(reason, fmt)


def test_ingest_lists_refused_formats_as_invalid(tmp_path: Path) -> None:
    from vhd.curate.ingest import ingest
    from vhd.store import Store

    media = tmp_path / "media"
    write_refused(media)
    Image.new("RGB", (32, 32), (20, 90, 200)).save(media / "fine.png")
    with Store(tmp_path / "run.db") as store:
        result = ingest([media], store)
    assert len(result.added) == 1
    reasons = reasons_by_format(result.invalid)
    assert set(reasons) == set(refused_images())
    for fmt, reason in reasons.items():
        assert_refusal(reason, fmt)


def test_dedup_reports_refused_formats_as_unreadable(tmp_path: Path) -> None:
    from vhd.curate.dedup import find_duplicates

    media = tmp_path / "media"
    write_refused(media)
    Image.new("RGB", (32, 32), (20, 90, 200)).save(media / "fine.png")
    result = find_duplicates(media, jobs=1)
    reasons = reasons_by_format(result.unreadable)
    assert set(reasons) == set(refused_images())
    for fmt, reason in reasons.items():
        assert_refusal(reason, fmt)


def test_frame_folder_with_a_refused_frame_is_refused(tmp_path: Path) -> None:
    from vhd.media.load import load_sample

    folder = tmp_path / "clip"
    folder.mkdir()
    for k in range(3):
        Image.new("RGB", (16, 12), (10, 20 * k, 30)).save(folder / f"clip_{k:04d}.png")
    (folder / "clip_0001.png").write_bytes(refused_images()["TIFF"])
    with pytest.raises(MediaError) as info:
        load_sample(MediaItem(path=folder, kind=Kind.VIDEO, is_frame_folder=True))
    assert_refusal(str(info.value), "TIFF")


def test_bench_records_refused_formats_per_sample(tmp_path: Path) -> None:
    from tests.bench.conftest import write_labels
    from vhd.bench.data import load_bench_set
    from vhd.bench.original import load_original
    from vhd.bench.runner import run_bench
    from vhd.detectors import registry
    from vhd.detectors.registry import create_detector

    media = tmp_path / "media"
    paths = write_refused(media)
    Image.new("RGB", (40, 30), (250, 10, 10)).save(media / "red.png")
    rows = [("red.png", (0, 0, 0), "yes", "A", "real", "test")]
    rows += [(p.name, (0, 0, 0), "no", "", "real", "test") for p in paths.values()]
    bench = load_bench_set(write_labels(tmp_path / "labels.csv", rows), media=media)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
        mp.setitem(registry.BUILTIN, "original", "tests.bench.fake_detector:OriginalDetector")
        run = run_bench(bench, [create_detector("red"), create_detector("original")])
    for det in run.detectors:
        errors = sorted(p.error for p in det.predictions.values() if p.error)
        assert len(errors) == len(paths), (det.label, errors)
        for fmt in paths:
            assert any(fmt in e and "JPEG, PNG, WebP, BMP, GIF" in e for e in errors), (fmt, errors)
    for fmt, path in paths.items():
        with pytest.raises(MediaError) as info:
            load_original(path)
        assert_refusal(str(info.value), fmt)


def test_bench_thumbnails_never_decode_refused_formats(tmp_path: Path) -> None:
    from vhd.bench.data import BenchItem
    from vhd.bench.html import write_thumbnails

    for fmt, path in write_refused(tmp_path / "media").items():
        item = BenchItem(
            line=2, id=hashlib.sha256(path.read_bytes()).hexdigest(), path=path, kind=Kind.IMAGE, harmful=False
        )
        assert write_thumbnails(item, tmp_path, unblurred=False) is None, fmt


def test_label_import_skips_refused_formats(tmp_path: Path) -> None:
    from vhd.labels.sets import import_labels

    media = tmp_path / "media"
    paths = write_refused(media)
    Image.new("RGB", (24, 24), (1, 90, 200)).save(media / "fine.png")
    labels = media / "val.csv"
    labels.write_text("path,harmful\nfine.png,no\n" + "".join(f"{p.name},yes\n" for p in paths.values()))
    res = import_labels(labels, store=tmp_path / "run.db", name="val")
    assert res.imported == 1 and len(res.skipped) == len(paths)
    for (_line, reason), fmt in zip(sorted(res.skipped), paths, strict=True):
        assert_refusal(reason, fmt)


def test_icl_example_of_a_refused_format_is_a_config_error(tmp_path: Path) -> None:
    from vhd.debate.icl import load_examples
    from vhd.media.load import MediaSettings

    for fmt, path in write_refused(tmp_path / "icl").items():
        examples = tmp_path / "icl" / "examples.csv"
        examples.write_text(f"path,answer\n{path.name},yes\n")
        with pytest.raises(ConfigError) as info:
            load_examples(examples, MediaSettings())
        assert_refusal(str(info.value), fmt)


def test_categorize_with_media_refuses_refused_formats(tmp_path: Path) -> None:
    from vhd.categorize.llm import sample_images
    from vhd.media.load import MediaSettings

    for fmt, path in write_refused(tmp_path / "media").items():
        sample = Sample(id=hashlib.sha256(path.read_bytes()).hexdigest(), kind=Kind.IMAGE, path=str(path))
        with pytest.raises(MediaError) as info:
            sample_images(sample, MediaSettings())
        assert_refusal(str(info.value), fmt)


def test_block_list_hashing_refuses_refused_formats(tmp_path: Path) -> None:
    pytest.importorskip("pdqhash")
    from vhd.collect.blocklist import pdq_hash

    for fmt, data in refused_images().items():
        with pytest.raises(MediaError) as info:
            pdq_hash(data)
        assert_refusal(str(info.value), fmt)
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 10, 10)).save(buf, "PNG")
    assert len(pdq_hash(buf.getvalue())[0]) == 64


# --- videos: only the listed containers reach FFmpeg ---------------------------------------


@pytest.mark.parametrize("fmt", ["PNG", "GIF", "TIFF"])
def test_an_image_named_mp4_is_not_opened_as_a_video(fmt: str, tmp_path: Path) -> None:
    pytest.importorskip("av")
    from vhd.media.video import read_frames

    data = {**allowed_images(), **refused_images()}[fmt]
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    with pytest.raises(MediaError, match=rf"^{fmt} file: not an accepted video format .*MP4, MOV, WebM, MKV, AVI"):
        read_frames(path)


@pytest.mark.parametrize(
    ("name", "codec"),
    [("a.mp4", "libx264"), ("a.mov", "libx264"), ("a.mkv", "libx264"), ("a.webm", "libvpx"), ("a.avi", "mpeg4")],
)
def test_every_listed_container_is_read(name: str, codec: str, tmp_path: Path) -> None:
    pytest.importorskip("av")
    from vhd.media.video import read_frames

    path = make_video(tmp_path / name, 12, codec=codec)
    frames = read_frames(path, 3)
    assert frames.indices == [0, 6, 11]
    disguised = tmp_path / f"renamed{'.mkv' if name.endswith('.mp4') else '.mp4'}"
    disguised.write_bytes(path.read_bytes())
    assert read_frames(disguised, 3).indices == [0, 6, 11]  # by content, whatever the name


def test_annotate_skips_an_image_disguised_as_a_video(tmp_path: Path) -> None:
    pytest.importorskip("av")
    media = tmp_path / "media"
    media.mkdir()
    (media / "clip.mp4").write_bytes(allowed_images()["PNG"])
    make_video(media / "real.mp4", 6)
    summary = vhd.annotate([media], model="scripted:demo", store=tmp_path / "run.db")
    assert summary.annotated == 1 and summary.skipped == 1
    assert summary.skip_reasons[0][1].startswith("PNG file: not an accepted video format")
