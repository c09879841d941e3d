"""`vhd annotate` at scale, by counts (never by timing): the stat index, and memory that stays flat.

- a resumed run does not read files whose ``stat`` is unchanged; a touched file is read again;
  ``rehash`` reads them all;
- the media items alive at any time are bounded by the claim batch, not the number of inputs;
- skip reasons kept in memory are bounded (all go to the store); the scripted backend's call log
  is bounded.
"""

from __future__ import annotations

import gc
import os
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
import vhd.backends.scripted as scripted_mod
from vhd.annotate import feeder as feeder_mod
from vhd.annotate.options import RunOptions
from vhd.annotate.summary import RunSummary
from vhd.errors import MediaError
from vhd.records import Kind, MediaItem
from vhd.store.sqlite import Store


def make_images(folder: Path, n: int, *, start: int = 0, past: bool = True) -> list[Path]:
    """``n`` byte-distinct tiny PNGs ``img_<i>.png`` from ``start``; ``past`` dates them a minute back.

    A minute back is older than the racy window of the stat index.
    """
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(start, start + n):
        p = folder / f"img_{i:04d}.png"
        Image.new("RGB", (8, 8), (i % 256, (i // 256) % 256, 7)).save(p)
        if past:
            then = time.time() - 60
            os.utime(p, (then, then))
        paths.append(p)
    return paths


def run(folder: Path, db: Path, **kw: Any) -> RunSummary:
    return vhd.annotate([folder], model="scripted:demo", store=db, rounds=1, **kw)


def test_resume_reads_only_changed_files(tmp_path: Path, reads: list[str]) -> None:
    paths = make_images(tmp_path / "m", 5)
    db = tmp_path / "s.db"
    first = run(tmp_path / "m", db)
    assert first.annotated == 5 and len(reads) == 5

    reads.clear()
    again = run(tmp_path / "m", db)
    assert again.already_done == 5 and again.annotated == 0 and reads == []  # nothing read

    Image.new("RGB", (8, 8), (1, 2, 250)).save(paths[2])  # new content, new mtime
    reads.clear()
    touched = run(tmp_path / "m", db)
    assert reads == [str(paths[2])] and touched.annotated == 1 and touched.already_done == 4

    reads.clear()
    forced = run(tmp_path / "m", db, options=RunOptions(rehash=True))
    assert sorted(reads) == sorted(map(str, paths)) and forced.already_done == 5


def test_same_stat_new_bytes_is_caught_within_the_racy_window(tmp_path: Path, reads: list[str]) -> None:
    """A file written just before it was hashed is not trusted: the same size and mtime could hide new bytes."""
    (path,) = make_images(tmp_path / "m", 1, past=False)
    db = tmp_path / "s.db"
    run(tmp_path / "m", db)
    reads.clear()
    run(tmp_path / "m", db)
    assert reads == [str(path)]  # still within 2 s of its last write: read again


def test_stat_index_api_counts_reads(tmp_path: Path, reads: list[str]) -> None:
    from vhd.media.ids import sample_ids

    paths = make_images(tmp_path / "m", 3)
    items = [MediaItem(path=p, kind=Kind.IMAGE) for p in paths]
    with Store(tmp_path / "s.db", create=True) as store:
        first = sample_ids(items, store)
        assert len(reads) == 3
        reads.clear()
        assert sample_ids(items, store) == first and reads == []
        os.utime(paths[0], (time.time() - 30, time.time() - 30))  # mtime changed: read again
        assert sample_ids(items, store) == first and reads == [str(paths[0])]
        reads.clear()
        assert sample_ids(items, store, rehash=True) == first and len(reads) == 3
        paths[1].unlink()
        gone = sample_ids(items, store)
        assert isinstance(gone[1], MediaError) and gone[0] == first[0]


def test_media_items_alive_are_bounded_by_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_images(tmp_path / "m", 120)
    peak = 0
    made: list[weakref.ref[MediaItem]] = []  # every MediaItem made from now on (unhashable: no WeakSet)
    real_init, real_save = MediaItem.__init__, Store.save_annotation

    def tracked(self: MediaItem, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    def counting(self: Store, *args: Any, **kwargs: Any) -> None:
        nonlocal peak
        gc.collect(0)  # what only a young-generation cycle keeps is not alive
        peak = max(peak, sum(1 for ref in made if ref() is not None))
        real_save(self, *args, **kwargs)

    monkeypatch.setattr(MediaItem, "__init__", tracked)
    monkeypatch.setattr(Store, "save_annotation", counting)
    monkeypatch.setattr(feeder_mod, "LOOKUP_BATCH", 16)
    summary = vhd.annotate([tmp_path / "m"], model="scripted:demo", store=tmp_path / "s.db", rounds=1, concurrency=2)
    assert summary.annotated == 120
    # lookup batch 16, claim batch 8 at concurrency 2: one lookup batch pending, two claim batches queued,
    # two in flight (and a few held by locals between steps)
    assert 0 < peak <= 16 + 2 * 8 + 2 + 4, peak
    assert len(made) >= 120  # every sample's item was counted


def test_skip_reasons_in_memory_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feeder_mod, "SKIP_REASONS_KEPT", 3)
    folder = tmp_path / "m"
    make_images(folder, 2)
    for i in range(10):
        (folder / f"note_{i}.txt").write_text("not media")
    db = tmp_path / "s.db"
    summary = vhd.annotate([folder], model="scripted:demo", store=db, rounds=1)
    assert summary.skipped == 10 and len(summary.skip_reasons) == 3 and summary.annotated == 2
    with Store(db) as store:
        assert len(store.skips(summary.run_id)) == 10  # every reason is in the store


def test_scripted_call_log_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from vhd.backends.base import GenerateConfig, Message

    monkeypatch.setattr(scripted_mod, "KEPT_CALLS", 4)
    backend = scripted_mod.ScriptedBackend("demo")
    for i in range(30):
        asyncio.run(backend.generate([Message("user", f"call {i}")], GenerateConfig(tag="judge")))
    assert 4 <= len(backend.calls) <= 8 and backend.calls[-1][1][0].content == "call 29"
