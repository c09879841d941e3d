"""`vhd categorize` reads the annotations to do a page at a time: counts by SQL, no list of every one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.categorize.conftest import SPECS, Spec, fill_store, make_annotation
from tests.categorize.test_llm import script
from vhd.backends.registry import create_backend
from vhd.categorize import todo as todo_module
from vhd.categorize.llm import categorize_with_llm
from vhd.categorize.todo import Todo
from vhd.store import Store
from vhd.store import categories as cstore
from vhd.taxonomy import load_taxonomy


def _cat(ann_id: int, status: str) -> cstore.Categorization:
    return cstore.Categorization(
        annotation_id=ann_id, method="m", taxonomy="t", taxonomy_version="1", taxonomy_digest="d",
        model="x", status=status, created_at=time.time(),
    )  # fmt: skip


def test_todo_streams_what_the_list_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(todo_module, "BATCH", 2)  # pages of two: the paging is exercised
    with Store(tmp_path / "s.db") as store:
        run = fill_store(store)
        many = [Spec(f"extra{k}", f"bloody violent scene {k}") for k in range(5)]
        for spec in many:
            store.save_annotation(*reversed(make_annotation(spec, run)))
        other = store.start_run({}, "cfg2", {"judge": "scripted:j"}, "p")
        sample, second = make_annotation(SPECS[0], other, "cfg2")  # a second annotation: only the latest counts
        store.save_annotation(second, sample)
        every = cstore.harmful_annotations(store)
        todo = Todo(store, done=("m", "t", "1"))
        assert not isinstance(todo, list) and len(todo) == todo.harmful == len(every) == 11
        assert [h.annotation_id for h in todo] == [h.annotation_id for h in every]
        ids = [h.annotation_id for h in every]
        cstore.save_categorizations(store, [_cat(ids[0], "ok"), _cat(ids[3], "unparsed"), _cat(ids[4], "error")])
        todo = Todo(store, done=("m", "t", "1"))
        assert (todo.already_done, len(todo)) == (2, 9)
        assert [h.annotation_id for h in todo] == [i for i in ids if i not in (ids[0], ids[3])]
        retry = Todo(store, done=("m", "t", "1"), retry_unparsed=True)
        assert (retry.already_done, [h.annotation_id for h in retry]) == (1, ids[1:])
        limited = Todo(store, done=("m", "t", "1"), limit=4)
        assert len(limited) == 4 and [h.annotation_id for h in limited] == [ids[1], ids[2], ids[4], ids[5]]
        assert [len(b) for b in limited.batches(3)] == [3, 1]
        redo = Todo(store, done=None)
        assert redo.already_done == 0 and len(list(redo)) == 11
        by_config = cstore.harmful_annotations(store, config_hash="cfg1")
        assert cstore.count_harmful(store, config_hash="cfg1") == len(by_config) == 11
        assert cstore.count_harmful(store, config_hash="cfg2") == 1


def test_llm_draws_items_as_workers_free_up(store: Store, tmp_path: Path) -> None:
    """A generator of items is read as the work goes, never all at once up front."""
    items = cstore.harmful_annotations(store) * 4
    drawn = 0
    saved: list[int] = []

    def gen() -> Iterator[cstore.HarmfulAnnotation]:
        nonlocal drawn
        for item in items:
            drawn += 1
            yield item

    def save(cat: cstore.Categorization) -> None:
        saved.append(drawn - len(saved))

    backend = create_backend(script(tmp_path))
    asyncio.run(categorize_with_llm(gen(), backend, load_taxonomy(), save=save, concurrency=2))
    assert len(saved) == len(items) == 24
    assert max(saved) <= 3  # two in work, the next one drawn
