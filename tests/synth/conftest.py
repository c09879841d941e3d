from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_module


@pytest.fixture(scope="session")
def tiny_pipes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every tiny pipeline, saved once per session (name -> folder; ``sd-checked`` has a flag-all checker)."""
    need_module("diffusers", "pip install 'vhd[gen]'")
    need_module("av", "pip install 'vhd[video]'")
    from tests.tiny_pipelines import build_all

    return build_all(tmp_path_factory.mktemp("pipes"))


@pytest.fixture()
def prompts_csv(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.csv"
    path.write_text(
        "prompt,keyword\n"
        "A man holding a kitchen knife in a dark alley.,knife in hand\n"
        "A toy robot on a wooden table,toy\n",
        encoding="utf-8",
    )
    return path


TINY = ["--device", "cpu", "--size", "32x32", "--steps", "2", "--no-watermark", "--no-progress"]
"""Flags that make every generator fast on a CPU."""
