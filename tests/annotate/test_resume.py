"""The quick path of a resumed `vhd annotate`: settled files skip the set of ids met, the counts do not change.

A file whose stat is unchanged, whose bytes already have a final verdict, and which is the only
path of the stat index with those bytes is counted done without entering the on-disk set of
sample ids met (`vhd.annotate.feeder`). Each scenario here runs the resume twice on copies of one
store, once as it is and once with the quick path turned off (every file through the set, as
before it existed), and asks for the same summary, the same files read, and the same store rows.
Copies of a file placed before, after and beside the original, in the same batch of lookups and
in another, in a second input, and a file excluded after it was annotated are the cases where a
shortcut could miscount.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
import vhd.media.ids as ids_mod
from tests.annotate.test_scale import make_images
from vhd.annotate import feeder as feeder_mod
from vhd.annotate.summary import RunSummary
from vhd.fileio import file_stat
from vhd.records import Annotation, Kind, Sample, Status, Verdict
from vhd.store.migrations import backup_store
from vhd.store.sqlite import Store
from vhd.store.statindex import KnownFiles, ScratchSet, StatIndex


def copy_of(src: Path, dest: Path) -> Path:
    """A byte-identical copy of ``src``, dated a minute back."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    then = time.time() - 60
    os.utime(dest, (then, then))
    return dest


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lookups 4 inputs at a time, so a handful of files spans several batches."""
    monkeypatch.setattr(feeder_mod, "LOOKUP_BATCH", 4)


def annotate(inputs: list[Path], db: Path) -> RunSummary:
    return vhd.annotate(inputs, model="scripted:demo", store=db, rounds=1, concurrency=2)


def counts(summary: RunSummary) -> dict[str, Any]:
    """The summary without what differs between any two runs (ids, times, the store's path)."""
    out = summary.to_dict()
    for key in ("run_id", "elapsed_s", "store"):
        out.pop(key)
    return out


def rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The store's samples, annotations and stat index, without run ids and times."""
    conn = sqlite3.connect(db)
    try:
        return {
            "samples": conn.execute("SELECT id, kind, path FROM samples ORDER BY id").fetchall(),
            "annotations": conn.execute(
                "SELECT sample_id, config_hash, status, harmful, reason FROM annotations ORDER BY sample_id"
            ).fetchall(),
            "stat_index": conn.execute(
                "SELECT path, size, mtime_ns, inode, sha256, shared FROM stat_index ORDER BY path"
            ).fetchall(),
            "skips": conn.execute("SELECT path, reason FROM skips ORDER BY id").fetchall(),
        }
    finally:
        conn.close()


def without_quick_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is ever settled: every file goes through the set of ids met (the behaviour before the quick path)."""
    real = StatIndex.known_files

    def none_settled(self: StatIndex, *args: Any, **kwargs: Any) -> KnownFiles:
        return KnownFiles(real(self, *args, **kwargs).hashes, set())

    monkeypatch.setattr(StatIndex, "known_files", none_settled)


def resume_both_ways(
    inputs: list[Path], db: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[RunSummary, list[str], int]:
    """Resume on a copy of ``db`` without the quick path, then on ``db`` with it; both must agree.

    Returns the quick run's summary, the files it read, and how many files it settled.
    """
    slow_db = db.with_name("slow.db")
    backup_store(db, slow_db)
    settled: list[int] = []
    real_prepare = feeder_mod.Feeder.prepare

    async def watching(self: feeder_mod.Feeder, chunk: Any) -> Any:
        out = await real_prepare(self, chunk)
        settled.append(self.settled)
        return out

    with monkeypatch.context() as m:
        m.setattr(feeder_mod.Feeder, "prepare", watching)
        without_quick_path(m)
        reads.clear()
        slow = annotate(inputs, slow_db)
        slow_reads = sorted(reads)
        assert max(settled, default=0) == 0
    settled.clear()
    with monkeypatch.context() as m:
        m.setattr(feeder_mod.Feeder, "prepare", watching)
        reads.clear()
        quick = annotate(inputs, db)
    assert counts(quick) == counts(slow)
    assert sorted(reads) == slow_reads
    assert rows(db) == rows(slow_db)
    return quick, sorted(reads), max(settled, default=0)


def test_a_finished_run_resumes_without_reads_or_the_set_of_ids(
    tmp_path: Path, reads: list[str], small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_images(tmp_path / "m", 10)
    db = tmp_path / "s.db"
    assert annotate([tmp_path / "m"], db).annotated == 10
    adds: list[str] = []
    real_add = ScratchSet.add

    def counting(self: ScratchSet, key: str) -> bool:
        adds.append(key)
        return real_add(self, key)

    monkeypatch.setattr(ScratchSet, "add", counting)
    again, read, settled = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert (again.already_done, again.annotated, again.duplicates) == (10, 0, 0)
    assert read == [] and settled == 10
    adds.clear()
    annotate([tmp_path / "m"], db)
    assert adds == []  # no sample id (and, walking one folder, no path) went through a lookup


def test_two_copies_known_from_the_first_run_stay_one_done_one_duplicate(
    tmp_path: Path, reads: list[str], small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_images(tmp_path / "m", 10)
    copy_of(paths[2], tmp_path / "m" / "img_0002_copy.png")  # right after its original
    copy_of(paths[5], tmp_path / "m" / "sub" / "late.png")  # walked last, batches later
    db = tmp_path / "s.db"
    first = annotate([tmp_path / "m"], db)
    assert (first.annotated, first.duplicates) == (10, 2)
    again, read, settled = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert (again.already_done, again.duplicates, again.annotated) == (10, 2, 0)
    assert read == [] and settled == 8  # the two pairs share their bytes in the index: slow path


@pytest.mark.parametrize(
    "where",
    [
        "sub/late_copy.png",  # walked after every original, in a later batch
        "aa/early_copy.png",  # walked before every original: its original comes batches later
        "img_0000_copy.png",  # in the original's batch, right after it
        "img_0003_copy.png",  # in the batch after its original's
    ],
)
def test_a_copy_added_after_the_first_run_is_a_duplicate_wherever_it_is_met(
    tmp_path: Path, reads: list[str], small_batches: None, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    paths = make_images(tmp_path / "m", 10)
    db = tmp_path / "s.db"
    annotate([tmp_path / "m"], db)
    original = paths[0] if "0000" in where or "late" in where else paths[2] if "0003" in where else paths[9]
    copy = copy_of(original, tmp_path / "m" / where)
    again, read, _ = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert read == [str(copy)]
    assert (again.already_done, again.duplicates, again.annotated) == (10, 1, 0)
    # and the run after that: both files are known, and share their bytes
    again2, read2, settled2 = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert (again2.already_done, again2.duplicates, read2, settled2) == (10, 1, [], 9)


def test_a_copy_in_a_second_input_is_a_duplicate(
    tmp_path: Path, reads: list[str], small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_images(tmp_path / "a", 6)
    make_images(tmp_path / "b", 3, start=100)
    copy = copy_of(paths[1], tmp_path / "b" / "img_9999.png")
    db = tmp_path / "s.db"
    annotate([tmp_path / "a"], db)
    again, read, _ = resume_both_ways([tmp_path / "a", tmp_path / "b"], db, reads, monkeypatch)
    assert (again.already_done, again.duplicates, again.annotated) == (6, 1, 3)
    assert sorted(read) == sorted([str(copy), *(str(p) for p in sorted((tmp_path / "b").glob("img_01*.png")))])


def test_a_touched_file_is_read_again_and_stays_done(
    tmp_path: Path, reads: list[str], small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_images(tmp_path / "m", 8)
    db = tmp_path / "s.db"
    annotate([tmp_path / "m"], db)
    then = time.time() - 30
    os.utime(paths[3], (then, then))  # same bytes, new mtime: read again, the entry replaced
    Image.new("RGB", (8, 8), (250, 1, 2)).save(paths[6])  # new bytes: read and annotated
    os.utime(paths[6], (then, then))
    again, read, settled = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert read == [str(paths[3]), str(paths[6])]
    assert (again.already_done, again.annotated, again.duplicates) == (7, 1, 0) and settled == 6


def test_a_file_excluded_after_it_was_annotated_is_counted_excluded(
    tmp_path: Path, reads: list[str], small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vhd.cli.main import main

    paths = make_images(tmp_path / "m", 6)
    db = tmp_path / "s.db"
    annotate([tmp_path / "m"], db)
    import hashlib

    gone = hashlib.sha256(paths[4].read_bytes()).hexdigest()
    assert main(["remove", gone, "--store", str(db), "--reason", "takedown"]) == 0
    again, read, settled = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert (again.already_done, again.excluded, read, settled) == (5, 1, [], 5)


def test_the_same_folder_by_another_name_takes_the_slow_path(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_images(tmp_path / "m", 5)
    (tmp_path / "link").symlink_to(tmp_path / "m")
    db = tmp_path / "s.db"
    annotate([tmp_path / "m"], db)
    by_link, read, _ = resume_both_ways([tmp_path / "link"], db, reads, monkeypatch)
    assert by_link.already_done == 5 and len(read) == 5  # new paths: read, and their bytes now shared
    again, read, settled = resume_both_ways([tmp_path / "m"], db, reads, monkeypatch)
    assert (again.already_done, read, settled) == (5, [], 0)


def test_the_stat_index_marks_shared_bytes_and_settles_only_final_unshared_files(tmp_path: Path) -> None:
    paths = make_images(tmp_path / "m", 3)
    copy = copy_of(paths[0], tmp_path / "m" / "copy.png")
    stats = [file_stat(p) for p in [*paths, copy]]
    shas = [ids_mod.sha256_file(p) for p in [*paths, copy]]
    with Store(tmp_path / "s.db") as store:
        store.remember_hashes(list(zip(stats[:3], shas[:3], strict=True)))
        run_id = store.start_run({}, "cfg", {}, "p")
        for p, sha in zip(paths, shas[:3], strict=True):
            verdict = Verdict(harmful=False, reason="fine")
            ann = Annotation(sample_id=sha, run_id=run_id, config_hash="cfg", verdict=verdict)
            store.save_annotation(ann, Sample(id=sha, kind=Kind.IMAGE, path=str(p)))
        known = store.known_files(stats, "cfg")
        assert known.hashes == {s.path: sha for s, sha in zip(stats[:3], shas[:3], strict=True)}
        assert known.settled == {s.path for s in stats[:3]}
        assert store.known_files(stats, "other").settled == set()  # no verdict under that configuration
        store.remember_hashes([(stats[3], shas[3])])  # a second path with the bytes of the first
        known = store.known_files(stats, "cfg")
        assert known.settled == {stats[1].path, stats[2].path} and len(known.hashes) == 4
        assert sorted(store.paths_with_hash(shas[0])) == sorted([stats[0].path, stats[3].path])
        assert store.known_hashes(stats) == known.hashes


def test_the_migration_marks_shared_bytes_and_caches_final_verdicts(tmp_path: Path) -> None:
    """A store from before the resume index: shared bytes are marked, verdicts of the others cached."""
    from vhd.store.migrations import MIGRATIONS, apply_migrations

    old = [m for m in MIGRATIONS if m[0] < "0012"]
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    with pytest.MonkeyPatch.context() as m:
        m.setattr("vhd.store.migrations.MIGRATIONS", old)
        apply_migrations(conn)
    rows_in = [("/a", "x"), ("/b", "x"), ("/c", "y")]
    conn.executemany(
        "INSERT INTO stat_index (path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns) "
        "VALUES (?, 1, 1, 1, 1, ?, 9)",
        rows_in,
    )
    conn.execute(
        "INSERT INTO runs (id, config_json, config_hash, models_json, prompt_hash, vhd_version, started_at) "
        "VALUES ('r', '{}', 'cfg', '{}', 'p', 'v', 0)"
    )
    conn.execute("INSERT INTO samples (id, kind, path) VALUES ('y', 'image', '/c'), ('x', 'image', '/a')")
    conn.execute(
        "INSERT INTO annotations (sample_id, run_id, config_hash, status) "
        "VALUES ('y', 'r', 'cfg', 'refused'), ('x', 'r', 'cfg', 'ok')"
    )
    assert apply_migrations(conn) == [name for name, _ in MIGRATIONS if name >= "0012"]
    marked = conn.execute("SELECT path, shared, final_config, final_status FROM stat_index ORDER BY path").fetchall()
    assert marked == [("/a", 1, None, None), ("/b", 1, None, None), ("/c", 0, "cfg", "refused")]
    conn.close()


def test_the_cached_verdict_follows_every_change_of_the_annotations(tmp_path: Path) -> None:
    """``final_config`` is set by `Store.save_annotation`, kept when a file is hashed again, and cleared by
    triggers whatever writes the annotations (so it never claims a verdict the table does not hold)."""
    paths = make_images(tmp_path / "m", 2)
    stats = [file_stat(p) for p in paths]
    shas = [ids_mod.sha256_file(p) for p in paths]
    mine = {stats[0].path}

    def save(store: Store, status: Status, config: str = "cfg") -> None:
        harmful = False if status in (Status.OK, Status.REFUSED) else None
        verdict = Verdict(harmful=harmful, reason="r", status=status)
        ann = Annotation(sample_id=shas[0], run_id=run_id, config_hash=config, verdict=verdict)
        store.save_annotation(ann, Sample(id=shas[0], kind=Kind.IMAGE, path=str(paths[0])))

    with Store(tmp_path / "s.db") as store:
        store.remember_hashes(list(zip(stats, shas, strict=True)))
        run_id = store.start_run({}, "cfg", {}, "p")
        assert store.known_files(stats, "cfg").settled == set()
        save(store, Status.UNPARSED)
        assert store.known_files(stats, "cfg").settled == mine
        assert store.known_files(stats, "cfg", retry_unparsed=True).settled == set()
        save(store, Status.ERROR)  # replaced by a result that is not final
        assert store.known_files(stats, "cfg").settled == set()
        save(store, Status.OK)
        store.remember_hashes([(stats[0], shas[0])])  # hashed again (a touched file): still settled
        assert store.known_files(stats, "cfg").settled == mine
        save(store, Status.OK, config="other")  # the entry now caches the other configuration's verdict
        assert store.known_files(stats, "cfg").settled == set() and store.known_files(stats, "other").settled == mine
        with store.conn:
            store.conn.execute("UPDATE annotations SET status = 'error', harmful = NULL WHERE config_hash = 'other'")
        assert store.known_files(stats, "other").settled == set()
        save(store, Status.OK, config="other")
        with store.conn:
            store.conn.execute("UPDATE annotations SET categories_json = '[\"x\"]'")  # not the verdict: kept
        assert store.known_files(stats, "other").settled == mine
        replace = "INSERT OR REPLACE INTO annotations (sample_id, run_id, config_hash, status) VALUES (?, ?, ?, ?)"
        with store.conn:  # a replacing insert fires no delete trigger: the insert trigger clears it
            store.conn.execute(replace, (shas[0], run_id, "other", "error"))
        assert store.known_files(stats, "other").settled == set()
        save(store, Status.OK, config="other")
        with store.conn:
            store.conn.execute("DELETE FROM turns")
            store.conn.execute("DELETE FROM annotations")
        assert store.known_files(stats, "other").settled == set()
