from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.curate.conftest import photo, save
from tests.media.conftest import make_video, png_header_only
from vhd.cli.main import main
from vhd.curate.ingest import IngestDefaults, ingest
from vhd.errors import ConfigError
from vhd.records import Kind
from vhd.store import Store
from vhd.store.curation import quarantined, removals


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def media(tmp_path: Path) -> Path:
    root = tmp_path / "crawl"
    save(photo("astronaut", (160, 160)), root / "knife attack" / "a.jpg")
    save(photo("coffee", (160, 100)), root / "knife attack" / "b.png")
    save(photo("rocket", (160, 100)), root / "sunset" / "c.webp")
    make_video(root / "sunset" / "clip.mp4", 12)
    (root / "sunset" / "broken.jpg").write_bytes(b"\xff\xd8\xffnot really")
    (root / "sunset" / "bomb.png").write_bytes(png_header_only(60000, 60000))
    (root / "sunset" / "notes.txt").write_text("hello")
    return root


def test_ingest_registers_valid_files_and_lists_invalid_ones(tmp_path: Path, media: Path) -> None:
    with Store(tmp_path / "run.db") as store:
        result = ingest([media], store, defaults=IngestDefaults(source="real", keyword_from_folder=True))
        assert len(result.added) == 4 and not result.updated
        reasons = {Path(p).name: r for p, r in result.invalid}
        assert set(reasons) == {"broken.jpg", "bomb.png", "notes.txt"}
        assert "decompression bomb" in reasons["bomb.png"]
        assert "unsupported file type" in reasons["notes.txt"]
        a = store.get_sample(sha(media / "knife attack" / "a.jpg"))
        assert a is not None and a.kind is Kind.IMAGE and a.source == "real" and a.keyword == "knife attack"
        clip = store.get_sample(sha(media / "sunset" / "clip.mp4"))
        assert clip is not None and clip.kind is Kind.VIDEO and clip.frames == [0, 3, 6, 8, 11]
        assert clip.keyword == "sunset"


def test_second_run_is_a_no_op_and_moves_are_updates(tmp_path: Path, media: Path) -> None:
    with Store(tmp_path / "run.db") as store:
        first = ingest([media], store)
        again = ingest([media], store)
        assert len(again.unchanged) == len(first.added) == 4 and not again.added and not again.updated
        moved = tmp_path / "elsewhere.jpg"
        shutil.copy(media / "knife attack" / "a.jpg", moved)
        third = ingest([moved], store)
        assert third.updated == [sha(moved)]
        assert store.get_sample(sha(moved)).path == str(moved)  # type: ignore[union-attr]


def test_keyword_flag_synthetic_generator_and_manifest_precedence(tmp_path: Path, media: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        f"path,keyword,source\n{media / 'knife attack' / 'a.jpg'},from manifest,\n{media / 'sunset' / 'c.webp'},,real\n"
    )
    with Store(tmp_path / "run.db") as store:
        ingest([manifest], store, defaults=IngestDefaults(keyword="given", generator="sdxl", prompt="a red car"))
        a = store.get_sample(sha(media / "knife attack" / "a.jpg"))
        c = store.get_sample(sha(media / "sunset" / "c.webp"))
        assert a is not None and c is not None
        assert (a.keyword, a.source, a.generator, a.meta["prompt"]) == (
            "from manifest",
            "synthetic",
            "sdxl",
            "a red car",
        )
        assert (c.keyword, c.source) == ("given", "real")
    with pytest.raises(ConfigError, match="synthetic"):
        IngestDefaults(source="real", generator="sdxl")
    with pytest.raises(ConfigError, match="unknown source"):
        IngestDefaults(source="fake")


def test_block_list_quarantines_without_registering(tmp_path: Path, media: Path) -> None:
    bad = media / "knife attack" / "b.png"
    md5 = hashlib.md5(bad.read_bytes()).hexdigest()
    blocks = tmp_path / "blocked.txt"
    blocks.write_text(f"# known bad\nmd5:{md5} case 17\n")
    db = tmp_path / "run.db"
    code = main(
        [
            "ingest",
            str(media),
            "--store",
            str(db),
            "--block-hashes",
            str(blocks),
            "--quarantine",
            str(tmp_path / "q"),
            "--no-progress",
        ]
    )
    assert code == 0
    with Store(db) as store:
        assert store.get_sample(_only(tmp_path / "q")) is None
        q = quarantined(store)
        assert len(q) == 1 and "md5" in q[0].reason and "case 17" in q[0].reason
        assert q[0].moved_to is not None and Path(q[0].moved_to).name == f"{q[0].sha256}.blocked"
    assert not bad.exists()
    assert (
        main(["ingest", str(media), "--store", str(db), "--block-hashes", str(blocks), "--strict", "--no-progress"])
        == 1
    )


def _only(folder: Path) -> str:
    (entry,) = list(folder.iterdir())
    return entry.name.removesuffix(".blocked")


def test_block_list_removes_an_already_registered_sample(tmp_path: Path, media: Path) -> None:
    target = media / "sunset" / "c.webp"
    blocks = tmp_path / "blocked.txt"
    blocks.write_text(f"sha256:{sha(target)}\n")
    with Store(tmp_path / "run.db") as store:
        ingest([media], store)
        result = ingest([media], store, block_list=blocks)
        assert [Path(p).name for p, _ in result.blocked] == ["c.webp"]
        assert target.exists()  # no --quarantine: left in place, logged
        log = removals(store)
        assert [r.sample_id for r in log] == [sha(target)] and log[0].requested_by == "block list"
        assert sha(target) not in {s.id for s, _ in store.iter_annotations()}


def test_removed_samples_are_not_ingested_again(tmp_path: Path, media: Path) -> None:
    db = tmp_path / "run.db"
    main(["ingest", str(media), "--store", str(db), "--no-progress"])
    target = media / "knife attack" / "a.jpg"
    assert main(["remove", str(target), "--store", str(db), "--reason", "takedown #1"]) == 0
    with Store(db) as store:
        result = ingest([media], store)
        assert [Path(p).name for p, _ in result.refused] == ["a.jpg"]
        assert "removed from the store" in result.refused[0][1]


def test_interrupted_ingest_resumes_to_the_same_store(tmp_path: Path, media: Path) -> None:
    def stop_after_two(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with Store(tmp_path / "a.db") as store, pytest.raises(KeyboardInterrupt):
        ingest([media], store, progress=stop_after_two)
    with Store(tmp_path / "a.db") as store:
        ingest([media], store)
        resumed = sorted((s.id, s.path, s.frames) for s in _samples(store))
    with Store(tmp_path / "b.db") as store:
        ingest([media], store)
        clean = sorted((s.id, s.path, s.frames) for s in _samples(store))
    assert resumed == clean and len(clean) == 4


def _samples(store: Store) -> list[object]:
    return [store.get_sample(r[0]) for r in store.conn.execute("SELECT id FROM samples")]


def test_cli_json_summary(tmp_path: Path, media: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(media / "sunset"), "--store", str(tmp_path / "r.db"), "--json", "--keyword", "k"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["added"] == 2 and len(data["invalid"]) == 3
    assert main(["ingest", str(tmp_path / "missing"), "--store", str(tmp_path / "r.db")]) == 2


def test_ingest_result_is_bounded_and_the_store_keeps_everything(tmp_path: Path, media: Path) -> None:
    """With ``listed=1`` the result keeps one entry per kind; counts and the store have them all."""
    bad = media / "bad"
    for k in range(5):
        (bad / f"x{k}.jpg").parent.mkdir(parents=True, exist_ok=True)
        (bad / f"x{k}.jpg").write_bytes(b"\xff\xd8\xff" + bytes([k]) * 10)
    with Store(tmp_path / "run.db") as store:
        result = ingest([media], store, defaults=IngestDefaults(source="real"), listed=1)
        assert len(result.added) == 1 and result.count("added") == 4 == result.registered
        invalid = result.count("invalid")
        assert invalid >= 7 and len(result.invalid) == 1  # 5 broken jpgs, broken.jpg, the bomb, ...
        assert len([s for s in store.skips() if s.reason.startswith("ingest: ")]) == invalid
        summary = result.to_dict()
        assert summary["added"] == 4 and summary["counts"]["invalid"] == invalid and len(summary["invalid"]) == 1
        again = ingest([media], store, listed=2)
        assert again.count("unchanged") == 4 and len(again.unchanged) == 2 and not again.added
