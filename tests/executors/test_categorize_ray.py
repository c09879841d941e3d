"""`vhd categorize --method llm --executor ray`: the same categories as a local run, saved by the driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.categorize.conftest import fill_store
from tests.categorize.test_llm import script
from vhd.categorize import categorize
from vhd.errors import ConfigError
from vhd.execution import ExecutorOptions
from vhd.store import Store
from vhd.store.categories import load_categorizations

pytestmark = pytest.mark.slow


def stored(path: Path) -> list[tuple[Any, ...]]:
    with Store(path) as db:
        cats = load_categorizations(db, method="llm")
    return sorted(
        (aid, c.status, c.answer, [(a.code, a.confidence) for a in c.assignments])
        for aid, found in cats.items()
        for c in found
    )


def test_llm_categories_on_ray_match_local(ray_session: Any, tmp_path: Path) -> None:
    paths = [tmp_path / "local.db", tmp_path / "ray.db"]
    for path in paths:
        with Store(path) as db:
            fill_store(db)
    model = script(tmp_path)
    local = categorize(paths[0], method="llm", model=model)
    remote = categorize(
        paths[1], method="llm", model=model, executor="ray", executor_options=ExecutorOptions(workers=2, num_cpus=0.5)
    )
    assert local.to_dict() | {"elapsed_s": 0, "store": ""} == remote.to_dict() | {"elapsed_s": 0, "store": ""}
    assert remote.categorized > 0 and stored(paths[0]) == stored(paths[1])


def test_embed_stays_local(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="works with --method llm"):
        categorize(tmp_path / "x.db", method="embed", executor="ray")
