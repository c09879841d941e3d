"""The one API shape: model settings as keyword overrides, run settings as `RunOptions`, one path or many."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.annotate.options import RunOptions
from vhd.store.sqlite import Store


def test_a_single_path_is_one_input_not_its_characters(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 2)
    for one in (str(tmp_path / "m"), tmp_path / "m"):
        summary = vhd.annotate(one, model="scripted:demo", store=tmp_path / "a.db")
        assert summary.found == 2 and summary.skipped == 0, one


def test_run_settings_go_in_run_options_and_the_summary_names_the_configuration(tmp_path: Path) -> None:
    images = make_images(tmp_path / "m", 3)
    dry = vhd.annotate(images, model="scripted:demo", store=tmp_path / "a.db", options=RunOptions(dry_run=True))
    assert dry.dry_run and dry.estimate is not None and dry.estimate["samples"] == 3 and dry.run_id is None
    done = vhd.annotate(images, model="scripted:demo", store=tmp_path / "a.db", rounds=1)
    assert done.annotated == 3 and done.config_hash and done.config_hash != dry.config_hash  # rounds: another hash
    with Store(tmp_path / "a.db") as db:
        (run,) = db.runs()
        assert run.config_hash == done.config_hash
        found = db.annotations_for([s.id for s, _ in db.iter_annotations()] + ["0" * 64], done.config_hash)
        assert len(found) == 3 and all(a.config_hash == done.config_hash for a in found.values())
        assert db.annotations_for([], done.config_hash) == {}


def test_the_0_1_keywords_still_work_with_a_warning(tmp_path: Path) -> None:
    images = make_images(tmp_path / "m", 2)
    with pytest.warns(DeprecationWarning, match=r"annotate\(dry_run=\.\.\.\): pass options=RunOptions\(dry_run"):
        old = vhd.annotate(images, model="scripted:demo", store=tmp_path / "a.db", dry_run=True)  # type: ignore[call-arg]
    new = vhd.annotate(images, model="scripted:demo", store=tmp_path / "a.db", options=RunOptions(dry_run=True))
    assert old.estimate == new.estimate and old.config_hash == new.config_hash
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match="not both"):
            vhd.annotate(images, store=tmp_path / "a.db", options=RunOptions(), dry_run=True)  # type: ignore[call-arg]


def test_a_misspelt_setting_is_a_type_error_naming_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"modle.*the model settings are model, affirmative"):
        vhd.annotate(tmp_path, store=tmp_path / "a.db", modle="scripted:demo")  # type: ignore[call-arg]
    assert not (tmp_path / "a.db").exists()


def test_options_replace_keeps_the_rest() -> None:
    base = RunOptions(max_cost=2.0, command="vhd annotate x")
    assert base.replace(dry_run=True) == RunOptions(max_cost=2.0, command="vhd annotate x", dry_run=True)


def test_the_workflows_that_annotate_take_the_same_shape() -> None:
    import inspect

    from vhd.align.smid import align_ratings
    from vhd.compare.injection import injection
    from vhd.compare.runner import compare
    from vhd.icl.search import search_icl

    for fn in (vhd.annotate, vhd.annotate_async, search_icl, align_ratings, compare, injection):
        params = inspect.signature(fn).parameters
        assert {"store", "config", "progress"} <= set(params), fn.__name__
        assert "options" in params or fn in (compare, injection), fn.__name__  # those two set no run option
        var = [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
        assert [p.annotation for p in var] in (["Unpack[ConfigOverrides]"], ["Unpack[ModelOverrides]"]), fn.__name__
        assert not {"model", "judge", "max_cost", "command", "dry_run"} & set(params), fn.__name__


def test_search_icl_refuses_an_icl_override(tmp_path: Path) -> None:
    from vhd.errors import ConfigError
    from vhd.icl.search import search_icl

    with pytest.raises(ConfigError, match="chooses the judge's in-context examples itself"):
        search_icl(tmp_path / "labels.csv", out=tmp_path / "o", icl=tmp_path / "ex.csv", model="scripted:demo")
