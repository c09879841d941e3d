from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from tests.bench.conftest import ROWS, write_labels
from tests.bench.fake_detector import OriginalDetector
from vhd.bench.cache import CACHE_FILE, PredictionCache
from vhd.bench.data import load_bench_set
from vhd.bench.original import load_original, wants_original
from vhd.bench.runner import run_bench
from vhd.detectors import registry
from vhd.detectors.registry import create_detector
from vhd.errors import MediaError
from vhd.media.hashing import sha256_file
from vhd.media.image import ImageLimits


@pytest.fixture(autouse=True)
def original_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN, "original", "tests.bench.fake_detector:OriginalDetector")
    OriginalDetector.seen = []


def test_original_bytes_reach_the_detector_unchanged(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    _labels, media = labelled
    frames = media / "clip"
    frames.mkdir()
    for k in range(3):
        Image.new("RGB", (20, 20), (200, 10 * k, 0)).save(frames / f"clip_{k:04d}.png")
    rows = [*ROWS, ("clip", (0, 0, 0), "yes", "A", "synthetic", "test")]
    bench = load_bench_set(write_labels(tmp_path / "l.csv", rows), media=media)
    dets = [create_detector("original"), create_detector("red")]
    with PredictionCache(tmp_path / CACHE_FILE) as cache:
        run = run_bench(bench, dets, cache=cache)
    orig, red = run.detectors
    assert orig.failed == 0 and red.computed == 11
    originals = {sha256_file(media / name) for name, *_ in ROWS}
    seen_images = [s for s in OriginalDetector.seen if s[3] in originals]
    assert len(seen_images) == 10  # every image file, byte for byte, as PNG
    assert all(mime == "image/png" and (w, h) == (40, 30) for mime, w, h, _ in seen_images)
    video_frames = [s for s in OriginalDetector.seen if s[3] not in originals]
    assert len(video_frames) == 3 and all(mime == "image/jpeg" for mime, *_ in video_frames)  # frames sampled
    assert orig.identity == OriginalDetector("original").identity()
    assert orig.key != red.key
    with PredictionCache(tmp_path / CACHE_FILE) as cache:
        again = run_bench(bench, [create_detector("original")], cache=cache)
    assert (again.detectors[0].cached, again.detectors[0].computed) == (11, 0)


def test_original_bytes_are_still_checked(tmp_path: Path) -> None:
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(MediaError, match="not a usable image"):
        load_original(tmp_path / "junk.png")
    Image.new("RGB", (300, 300)).save(tmp_path / "big.png")
    with pytest.raises(MediaError, match="over the limit"):
        load_original(tmp_path / "big.png", ImageLimits(max_pixels=10_000))
    (tmp_path / "empty.jpg").write_bytes(b"")
    with pytest.raises(MediaError, match="empty"):
        load_original(tmp_path / "empty.jpg")


def test_corrupt_file_is_a_per_sample_media_error(labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    (media / "red3.png").write_bytes(b"garbage")
    bench = load_bench_set(labels, media=media)
    run = run_bench(bench, [create_detector("original")])
    errors = [p.error for p in run.detectors[0].predictions.values() if p.error]
    assert len(errors) == 1 and errors[0].startswith("media: not a usable image")


def test_nudenet_gets_original_bytes_for_real(tmp_path: Path) -> None:
    pytest.importorskip("nudenet")
    from skimage import data

    Image.fromarray(data.astronaut()).save(tmp_path / "a.jpg", quality=85)
    Image.fromarray(data.coffee()).save(tmp_path / "b.png")
    (tmp_path / "l.csv").write_text("path,harmful\na.jpg,no\nb.png,no\n")
    det = create_detector("nudenet")
    assert wants_original(det)
    run = run_bench(load_bench_set(tmp_path / "l.csv"), [det])
    preds = run.detectors[0].predictions.values()
    assert len(preds) == 2 and all(p.error is None and p.harmful is not None for p in preds)
    assert any("FACE_FEMALE" in p.labels for p in preds)  # the astronaut's face, found on the original JPEG
