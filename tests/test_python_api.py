"""The Python API: documented names reachable from `import vhd`, real signatures, event loops, stores."""

from __future__ import annotations

import asyncio
import inspect
import json
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.aio import run_sync
from vhd.errors import ConfigError
from vhd.store.sqlite import Store


def test_documented_names_work_after_a_bare_import_vhd() -> None:
    """README's entry points (`vhd.export.export`, ...) need no import of their room first."""
    code = (
        "import vhd, json\n"
        "names = [vhd.export.export, vhd.store.Store, vhd.categorize.categorize, vhd.bench.benchmark,\n"
        "         vhd.labels.import_labels, vhd.records.Sample, vhd.export.export_hf, vhd.annotate, vhd.aannotate,\n"
        "         vhd.annotate_async, vhd.compare.compare, vhd.icl.search_icl, vhd.align.align_ratings,\n"
        "         vhd.progress.bar, vhd.errors.ConfigError, vhd.config.AnnotateConfig]\n"
        "print(json.dumps([n.__name__ for n in names]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == [
        "export", "Store", "categorize", "benchmark", "import_labels", "Sample", "export_hf", "annotate",
        "annotate_async", "annotate_async", "compare", "search_icl", "align_ratings", "bar", "ConfigError",
        "AnnotateConfig",
    ]  # fmt: skip
    assert {"store", "aannotate", "annotate_async", "progress", "errors", "labels"} <= set(dir(vhd))


def test_annotate_is_a_real_function_with_its_signature_and_docstring() -> None:
    import vhd.annotate.loop  # binds the room on `vhd`, which must not replace the function

    assert inspect.isfunction(vhd.annotate) and inspect.iscoroutinefunction(vhd.aannotate)
    params = inspect.signature(vhd.annotate).parameters
    assert list(params) == ["inputs", "store", "config", "options", "progress", "on_event", "overrides"]
    assert params["overrides"].kind is inspect.Parameter.VAR_KEYWORD
    assert params["overrides"].annotation == "Unpack[ConfigOverrides]"  # model settings; run settings: options
    assert inspect.signature(vhd.aannotate).parameters.keys() == params.keys()
    assert "Annotate images, videos, frame folders" in pydoc.render_doc(vhd.annotate)
    from vhd.annotate import RunSummary, loop  # the room stays importable by name

    assert RunSummary.__name__ == "RunSummary" and loop.__name__ == "vhd.annotate.loop"


def test_sync_annotate_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """A notebook cell runs inside an event loop: `vhd.annotate` must not call asyncio.run there."""
    images = make_images(tmp_path / "m", 2)

    async def cell() -> int:
        return vhd.annotate(images, model="scripted:demo", store=tmp_path / "a.db").annotated

    assert asyncio.run(cell()) == 2


def test_aannotate_is_awaited_on_the_callers_loop(tmp_path: Path) -> None:
    images = make_images(tmp_path / "m", 3)

    async def service() -> int:
        summary = await vhd.aannotate(images, model="scripted:demo", store=tmp_path / "a.db")
        return summary.annotated

    assert asyncio.run(service()) == 3
    with Store(tmp_path / "a.db") as db:
        assert sum(1 for _ in db.iter_annotations()) == 3


def test_run_sync_inside_a_loop_returns_values_and_raises_errors() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    async def fails() -> None:
        raise ConfigError("bad value: fix it")

    async def cell() -> int:
        with pytest.raises(ConfigError, match="bad value"):
            run_sync(fails())
        return run_sync(value())

    assert run_sync(value()) == 7 and asyncio.run(cell()) == 7


def test_a_path_or_a_store_wherever_a_store_is_taken(tmp_path: Path) -> None:
    from vhd.annotate.runs import list_runs
    from vhd.export import export

    db_path = tmp_path / "a.db"
    with Store(db_path) as db:
        summary = vhd.annotate(make_images(tmp_path / "m", 2), model="scripted:demo", store=db)
    assert summary.annotated == 2
    by_path = export(db_path, "jsonl", tmp_path / "p.jsonl")
    with Store(db_path) as db:
        by_store = export(db, "jsonl", tmp_path / "s.jsonl")
        assert len(list_runs(db)) == len(list_runs(db_path)) == 1
        assert db.get_sample(next(db.iter_annotations())[0].id) is not None  # still open: the caller owns it
    assert by_path.written == by_store.written == 2
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "s.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="no store at"):
        export(tmp_path / "missing.db", "jsonl", tmp_path / "x.jsonl")
    assert not (tmp_path / "missing.db").exists()


def test_an_exported_function_keeps_its_name_over_a_submodule_of_the_same_name() -> None:
    """`vhd.collect.fetch` is the function even after `vhd/collect/fetch.py` is imported (so are the others)."""
    code = (
        "import vhd, inspect\nimport vhd.collect.fetch, vhd.export.base, vhd.compare.runner\n"
        "from vhd.export import ExportFormat\n"
        "print(all(map(inspect.isfunction, [vhd.export.export, vhd.collect.fetch, vhd.compare.compare])))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True"]


def test_curation_calls_take_a_path_too(tmp_path: Path) -> None:
    """ingest (which creates the store), split and remove, given the store's path instead of a `Store`."""
    from vhd.curate.ingest import ingest
    from vhd.curate.remove import remove_samples
    from vhd.curate.split import split_store

    db = tmp_path / "c.db"
    images = make_images(tmp_path / "m", 4)
    assert ingest(tmp_path / "m", db).count("added") == 4
    assert len(split_store(db, test=0.5, seed=1).assignments) == 4
    removed = remove_samples(db, [str(images[0])], reason="takedown request")
    assert len(removed.removed) == 1
    with pytest.raises(ConfigError, match="no store at"):
        split_store(tmp_path / "missing.db")


def test_reading_calls_take_an_open_store_too(tmp_path: Path) -> None:
    """The bench's store source and the review queue, given an open `Store` instead of its path."""
    from vhd.bench.store_source import load_bench_set_from_store
    from vhd.compare.review_queue import build_queue

    db_path = tmp_path / "r.db"
    vhd.annotate(make_images(tmp_path / "m", 3), model="scripted:demo", store=db_path)
    with Store(db_path) as db:
        assert len(load_bench_set_from_store(db).items) == len(load_bench_set_from_store(db_path).items) == 3
        queue = build_queue(db, top=2)
    assert queue.store == str(db_path)


def test_label_studio_calls_take_an_open_store_too(tmp_path: Path) -> None:
    """Label Studio's task builder, exporter and importer, given an open `Store` instead of its path."""
    import json

    from vhd.labels.labelstudio.convert import HARMFUL, build_tasks, export_labelstudio, import_labelstudio

    db_path = tmp_path / "ls.db"
    vhd.annotate(make_images(tmp_path / "m", 2), model="scripted:demo", store=db_path)
    with Store(db_path) as db:
        assert build_tasks(store=db) == build_tasks(store=db_path)
        files = export_labelstudio(tmp_path / "tasks.json", store=db)
        tasks = json.loads(Path(files.files[0]).read_text())
        for task in tasks:  # a person answered every task "harmful"
            task["annotations"] = [{"result": [{"from_name": "harmful", "to_name": "media", "type": "choices",
                                                 "value": {"choices": [HARMFUL]}}]}]  # fmt: skip
        (tmp_path / "done.json").write_text(json.dumps(tasks))
        got = import_labelstudio(tmp_path / "done.json", store=db, name="people")
        assert (
            got.samples == 2 and got.harmful == 2 and db.get_sample(next(db.iter_annotations())[0].id) is not None
        )  # still open
