"""A store annotated twice (two configurations) for the command tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store annotated twice with the scripted backend: 2 rounds, then 1 round."""
    tmp = tmp_path_factory.mktemp("runs")
    make_images(tmp / "media", 12)
    store = tmp / "s.db"
    vhd.annotate([tmp / "media"], model="scripted:demo", store=store, progress=False)
    vhd.annotate([tmp / "media"], model="scripted:demo", store=store, rounds=1, progress=False)
    return store
