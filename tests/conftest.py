"""Session-scoped tiny-model fixtures shared by every room (each built once per test session)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.servers.transformers_serve import Served

# A developer's own settings never reach the tests: no user config file, no VHD_* defaults.
os.environ["VHD_NO_USER_CONFIG"] = "1"
for _name in ("VHD_STORE", "VHD_CONFIG", "VHD_CONCURRENCY"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def tiny_llava_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight LLaVA saved with ``save_pretrained`` (loads with AutoProcessor)."""
    from tests.tiny_models import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny_llava"))


@pytest.fixture(scope="session")
def tiny_instructblip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight InstructBLIP (no chat template; text initializer range 0.2 for training tests)."""
    from tests.tiny_models import build_tiny_instructblip

    return build_tiny_instructblip(tmp_path_factory.mktemp("tiny_instructblip"))


@pytest.fixture(scope="session")
def tiny_llava_tunable_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny LLaVA whose text model has initializer range 0.2 (its loss moves visibly in training tests)."""
    from tests.tiny_models import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny_llava_tunable"), text_init=0.2)


@pytest.fixture(scope="session")
def tiny_idefics3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Idefics3 saved with ``save_pretrained``."""
    from tests.tiny_models import build_tiny_idefics3

    return build_tiny_idefics3(tmp_path_factory.mktemp("tiny_idefics3"))


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight CLIP (projection size 16) with a Pillow image processor."""
    from tests.tiny_models import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture(scope="session")
def tiny_shieldgemma2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight ShieldGemma 2 (Gemma 3 + SigLIP) with its processor and policies."""
    from tests.tiny_models import build_tiny_shieldgemma2

    return build_tiny_shieldgemma2(tmp_path_factory.mktemp("tiny_shieldgemma2"))


@pytest.fixture(scope="session")
def served_llava(tiny_llava_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``transformers serve`` process serving the tiny LLaVA for the whole session."""
    from tests.servers.transformers_serve import serve

    with serve(tiny_llava_dir, tmp_path_factory.mktemp("hf_home")) as served:
        yield served


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file the id step of `vhd annotate` reads (the stat index decides which)."""
    import vhd.media.ids as ids_mod

    seen: list[str] = []
    real = ids_mod.sha256_file

    def counting(path: str | os.PathLike[str]) -> str:
        seen.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(ids_mod, "sha256_file", counting)
    return seen


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    """Secrets a test's backends remembered (`vhd.redaction.remember_secret`) do not reach the next test."""
    yield
    from vhd.redaction import forget_secrets

    forget_secrets()
