from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests.curate.conftest import noise_image, photo, save
from tests.media.conftest import make_video
from vhd.cli.main import main
from vhd.curate.clusters import cluster
from vhd.curate.dedup import apply_marks, find_duplicates
from vhd.curate.fingerprint import Fingerprint, Job, fingerprint, jpeg_quality
from vhd.errors import ConfigError
from vhd.store import Store
from vhd.store.curation import duplicate_marks


def by_name(result: object) -> dict[str, object]:
    return {Path(m.fp.path).name: m for m in result.members}  # type: ignore[attr-defined]


def test_exact_and_near_duplicates_cluster_and_known_misses_do_not(photos: dict[str, Path]) -> None:
    result = find_duplicates(photos["a"].parent, jobs=1)
    m = by_name(result)
    cluster_a = m["a.png"].cluster  # type: ignore[attr-defined]
    for name in ("a_exact.webp", "a_small.jpg", "a_q40.jpg", "a_bright.jpg", "a_crop.jpg"):
        assert m[name].cluster == cluster_a, name  # type: ignore[attr-defined]
    for name in ("a_flip.png", "a_bigcrop.png", "c.jpg", "chelsea.jpg", "rocket.jpg"):
        assert m[name].cluster != cluster_a, name  # type: ignore[attr-defined]
        assert m[name].size == 1, name  # type: ignore[attr-defined]
    assert m["a_exact.webp"].match == "exact"  # type: ignore[attr-defined]
    assert m["a_small.jpg"].match == "near"  # type: ignore[attr-defined]
    assert m["a.png"].kept  # largest (320x320, most bytes: the PNG)
    assert result.counts() == {
        "files": 11,
        "clusters": 1,
        "exact": 1,
        "near": 4,
        "unreadable": 0,
        "rows_left_out": 0,
        "leaks": 0,
    }


def test_keep_policies(photos: dict[str, Path]) -> None:
    files = [photos[k] for k in ("a_small", "a_q40", "a_bright", "a")]
    kept = {
        keep: [Path(m.fp.path).name for m in find_duplicates(files, keep=keep, jobs=1).members if m.kept]
        for keep in ("first", "largest", "quality")
    }
    assert kept["first"] == ["a_small.jpg"]
    assert kept["largest"] == ["a.png"]
    assert kept["quality"] == ["a.png"]
    # Same size: quality prefers the JPEG saved at 92 over the one saved at 40 (largest: more bytes too).
    only_jpegs = [photos["a_q40"], photos["a_bright"]]
    assert [Path(m.fp.path).name for m in find_duplicates(only_jpegs, keep="quality", jobs=1).members if m.kept] == [
        "a_bright.jpg"
    ]


def test_threshold_zero_finds_only_exact(photos: dict[str, Path]) -> None:
    result = find_duplicates([photos["a"], photos["a_exact"], photos["a_q40"]], threshold=0, jobs=1)
    m = by_name(result)
    assert m["a_exact.webp"].cluster == m["a.png"].cluster  # type: ignore[attr-defined]
    assert m["a_q40.jpg"].size == 1 or m["a_q40.jpg"].distance == 0  # type: ignore[attr-defined]


def test_unreadable_files_are_reported_not_fatal(tmp_path: Path, photos: dict[str, Path]) -> None:
    folder = photos["a"].parent
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0garbage")
    (folder / "empty.png").write_bytes(b"")
    (folder / "notes.txt").write_text("x")
    result = find_duplicates(folder, jobs=1)
    reasons = dict((Path(p).name, r) for p, r in result.unreadable)
    assert "empty file" in reasons["empty.png"]
    assert "broken.jpg" in reasons
    assert "unsupported file type" in reasons["notes.txt"]
    assert len(result.members) == 11


def test_report_csv_and_json(tmp_path: Path, photos: dict[str, Path]) -> None:
    result = find_duplicates(photos["a"].parent, jobs=1)
    rows = list(csv.DictReader(result.write_report(tmp_path / "clusters.csv").open()))
    assert len(rows) == 11
    assert list(rows[0]) == [
        "path",
        "cluster",
        "cluster_size",
        "kept",
        "match",
        "distance",
        "kind",
        "sha256",
        "width",
        "height",
        "bytes",
        "split",
        "error",
    ]
    kept_a = next(r for r in rows if r["path"].endswith("/a.png"))
    assert kept_a["kept"] == "yes" and kept_a["distance"] == "0" and kept_a["cluster"] == kept_a["sha256"]
    small = next(r for r in rows if r["path"].endswith("a_small.jpg"))
    assert small["kept"] == "no" and small["cluster"] == kept_a["cluster"] and int(small["distance"]) <= 10
    data = json.loads(result.write_report(tmp_path / "clusters.json").read_text())
    assert data["counts"]["clusters"] == 1 and len(data["files"]) == 11
    assert data["clusters"][0]["kept"].endswith("a.png") and len(data["clusters"][0]["members"]) == 6
    with pytest.raises(ConfigError, match=r"\.csv or \.json"):
        result.write_report(tmp_path / "clusters.txt")
    assert not list(tmp_path.glob(".clusters*"))  # no temporary files left


def test_leak_across_splits_from_a_manifest(tmp_path: Path, photos: dict[str, Path]) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        f"path,split\n{photos['a']},train\n{photos['a_small']},test\n{photos['c']},test\n{photos['chelsea']},train\n"
    )
    result = find_duplicates(manifest, jobs=1)
    assert len(result.leaks) == 1
    assert result.leaks[0].splits == {"test": 1, "train": 1}
    assert main(["dedup", str(manifest), "--jobs", "1", "--no-progress"]) == 1
    clean = tmp_path / "clean.csv"
    clean.write_text(f"path,split\n{photos['a']},train\n{photos['a_small']},train\n{photos['c']},test\n")
    assert main(["dedup", str(clean), "--jobs", "1", "--no-progress"]) == 0


def test_videos_by_their_frames(tmp_path: Path) -> None:
    def draw(i: int) -> Image.Image:
        return photo("astronaut", (128, 96)).rotate(i * 3)

    def other(i: int) -> Image.Image:
        return photo("coffee", (128, 96)).rotate(i * 3)

    a = make_video(tmp_path / "v" / "a.mp4", 30, size=(128, 96), draw=draw)
    b = make_video(tmp_path / "v" / "a_again.mkv", 30, size=(128, 96), draw=draw, options=None)
    c = make_video(tmp_path / "v" / "coffee.mp4", 30, size=(128, 96), draw=other)
    shorter = make_video(tmp_path / "v" / "short.mp4", 3, size=(128, 96), draw=draw)
    result = find_duplicates(tmp_path / "v", jobs=1)
    m = by_name(result)
    assert m["a.mp4"].cluster == m["a_again.mkv"].cluster  # type: ignore[attr-defined]
    assert m["coffee.mp4"].size == 1 and m["short.mp4"].size == 1  # type: ignore[attr-defined]
    assert all(len(x.fp.phashes) in (5, 3) for x in result.members)
    del a, b, c, shorter


def test_images_and_videos_never_mix(tmp_path: Path) -> None:
    frame = photo("astronaut", (128, 96))
    save(frame, tmp_path / "m" / "still.png")
    make_video(tmp_path / "m" / "clip.mp4", 5, size=(128, 96), draw=lambda i: frame)
    result = find_duplicates(tmp_path / "m", jobs=1)
    assert all(m.size == 1 for m in result.members)


def test_frame_folders_are_videos(tmp_path: Path) -> None:
    for k in range(4):
        save(noise_image(k), tmp_path / "f" / "clip" / f"clip_{k:04d}.png")
        save(noise_image(k), tmp_path / "f" / "copy" / f"copy_{k:04d}.jpg", quality=95)
    result = find_duplicates(tmp_path / "f", frame_folders=True, jobs=1)
    assert [m.fp.kind for m in result.members] == ["video", "video"]
    assert result.members[0].cluster == result.members[1].cluster


def test_store_input_apply_marks_and_replace(tmp_path: Path, photos: dict[str, Path]) -> None:
    db = tmp_path / "run.db"
    assert main(["ingest", str(photos["a"].parent), "--store", str(db), "--no-progress"]) == 0
    assert main(["dedup", str(db), "--apply", "--jobs", "1", "--no-progress", "--report", str(tmp_path / "r.csv")]) == 0
    with Store(db) as store:
        marks = duplicate_marks(store)
        assert len(marks) == 6 and sum(m.kept for m in marks) == 1
        kept = next(m for m in marks if m.kept)
        assert store.get_sample(kept.sample_id).path.endswith("a.png")  # type: ignore[union-attr]
        assert {m.cluster for m in marks} == {kept.sample_id}
        # Re-running with threshold 0 replaces the marks: only pixel-identical copies and pHash
        # collisions stay, and the marks that no longer hold are gone.
        result = find_duplicates(db, threshold=0, jobs=1)
        in_clusters = {m.fp.sha256 for members in result.clusters.values() for m in members}
        assert apply_marks(result, store) == (len(in_clusters), 0)
        assert {m.sample_id for m in duplicate_marks(store)} == in_clusters
        assert 2 <= len(in_clusters) < 6
        assert all(m.distance == 0 for m in duplicate_marks(store))


def test_apply_from_a_folder_marks_only_store_samples(tmp_path: Path, photos: dict[str, Path]) -> None:
    db = tmp_path / "run.db"
    main(["ingest", str(photos["a"]), str(photos["a_small"]), "--store", str(db), "--no-progress"])
    with Store(db) as store:
        result = find_duplicates(photos["a"].parent, store=store, jobs=1)
        marked, missing = apply_marks(result, store)
        assert (marked, missing) == (2, 9)
    with pytest.raises(SystemExit):
        main(["dedup", str(photos["a"].parent), "--apply", "--threshold", "x"])
    assert main(["dedup", str(photos["a"].parent), "--apply", "--jobs", "1"]) == 2  # --apply without a store


def test_cluster_rejects_bad_settings() -> None:
    with pytest.raises(ConfigError, match="keep policy"):
        cluster([], keep="newest")
    with pytest.raises(ConfigError, match="between 0 and 64"):
        cluster([], threshold=65)


def test_linked_chains_stay_one_cluster() -> None:
    # a-b within 10 bits, b-c within 10 bits, a-c 16 bits apart: one cluster, c's distance is real.
    a, b, c = 0, (1 << 8) - 1, (1 << 16) - 1
    fps = [Fingerprint(i, f"{i}.png", "image", f"s{i}", f"p{i}", (h,), 10, 10, 100) for i, h in enumerate((a, b, c))]
    members = cluster(fps, threshold=10, keep="first")
    assert {m.cluster for m in members} == {"s0"}
    assert [m.distance for m in members] == [0, 8, 16]


def test_fingerprint_details(tmp_path: Path) -> None:
    img = photo("coffee", (120, 80))
    q = save(img, tmp_path / "q.jpg", quality=55)
    with Image.open(q) as probe:
        assert abs((jpeg_quality(probe) or 0) - 55) <= 1
    fp = fingerprint(Job(0, str(q), "image"))
    assert (fp.width, fp.height, fp.error) == (120, 80, None)
    assert 50 <= fp.fidelity <= 60 and len(fp.phashes) == 1
    png = fingerprint(Job(1, str(save(img, tmp_path / "p.png")), "image"))
    assert png.fidelity == 100
    tiny = fingerprint(Job(2, str(save(img, tmp_path / "big.png")), "image", max_pixels=100))
    assert tiny.error is not None and "over the limit" in tiny.error


@pytest.mark.slow
def test_worker_processes_give_the_same_result(photos: dict[str, Path]) -> None:
    one = find_duplicates(photos["a"].parent, jobs=1)
    two = find_duplicates(photos["a"].parent, jobs=2)
    assert [(m.fp.path, m.cluster, m.kept, m.distance) for m in one.members] == [
        (m.fp.path, m.cluster, m.kept, m.distance) for m in two.members
    ]


def test_fingerprint_many_reads_jobs_lazily(photos: dict[str, Path]) -> None:
    """Jobs come from a generator and are pulled one at a time: no list of jobs is built first."""
    from vhd.curate.fingerprint import fingerprint_many

    files = sorted(p for p in photos["a"].parent.iterdir() if p.is_file())
    pulled: list[int] = []

    def jobs() -> Iterator[Job]:
        for k, p in enumerate(files):
            pulled.append(k)
            yield Job(k, str(p), "image")

    seen_at_done: list[int] = []
    fps = fingerprint_many(jobs(), 1, lambda done: seen_at_done.append(len(pulled)))
    assert [fp.order for fp in fps] == list(range(len(files))) and all(fp.error is None for fp in fps)
    assert seen_at_done[0] == 2 < len(files)  # one file hashed after two were asked for (2 x workers)
