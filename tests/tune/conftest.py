"""Fixtures for tuning tests: a bright-vs-dark image set (bright = "harmful"), drawn by code."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from vhd.records import Kind, LabelledSample, Source


def draw_set(folder: Path, n: int, seed: int) -> list[LabelledSample]:
    """``n`` noisy images, alternating bright (labelled harmful) and dark (unharmful)."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    items = []
    for k in range(n):
        bright = k % 2 == 0
        arr = np.clip(rng.normal(200 if bright else 50, 25, (40, 48, 3)), 0, 255).astype("uint8")
        path = folder / f"im{seed}_{k}.png"
        Image.fromarray(arr).save(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        source = Source.REAL if k % 4 < 2 else Source.SYNTHETIC
        items.append(LabelledSample(id=digest, path=path, kind=Kind.IMAGE, harmful=bright, source=source))
    return items


def write_labels(name: str, items: list[LabelledSample]) -> Path:
    """A labels CSV named ``name`` beside the images (their folder), paths relative to it."""
    folder = Path(items[0].path).parent
    lines = ["path,harmful"] + [f"{Path(i.path).name},{'yes' if i.harmful else 'no'}" for i in items]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def bright_dark(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[LabelledSample], list[LabelledSample]]:
    """(16 training images, 12 held-out images) of the bright-vs-dark task."""
    root = tmp_path_factory.mktemp("bright_dark")
    return draw_set(root / "train", 16, seed=1), draw_set(root / "test", 12, seed=2)
