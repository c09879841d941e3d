"""Session-scoped tiny-model fixtures shared by every room (each built once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_llava_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight LLaVA saved with ``save_pretrained`` (loads with AutoProcessor)."""
    from tests.tiny_models import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny_llava"))


@pytest.fixture(scope="session")
def tiny_idefics3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Idefics3 saved with ``save_pretrained``."""
    from tests.tiny_models import build_tiny_idefics3

    return build_tiny_idefics3(tmp_path_factory.mktemp("tiny_idefics3"))
