"""Each sample's images preprocessed once (`vhd.backends.hf_preprocess`), counted on the tiny Idefics3."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from tests.backends.test_hf import GREEDY, ask, make, picture
from vhd.backends.hf_preprocess import PreprocessCache
from vhd.cli.main import main


@pytest.fixture
def image_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Images the real Idefics3 image processor is given, one entry per call."""
    from transformers.models.idefics3 import Idefics3ImageProcessorPil

    seen: list[int] = []
    real = Idefics3ImageProcessorPil.__call__

    def counting(self: Any, images: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(sum(len(g) if isinstance(g, list) else 1 for g in images))
        return real(self, images, *args, **kwargs)

    monkeypatch.setattr(Idefics3ImageProcessorPil, "__call__", counting)
    return seen


def _annotate(tmp_path: Path, model: Path, cache_mb: int, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    media = tmp_path / f"media{cache_mb}"
    media.mkdir()
    for i in range(4):
        Image.new("RGB", (40 + i, 30), (60 * i, 90, 200 - 40 * i)).save(media / f"{i}.png")
    cfg = tmp_path / f"c{cache_mb}.toml"
    cfg.write_text(
        f"[debate]\ndebater_max_tokens = 6\njudge_max_tokens = 3\n"
        f"[backends.hf]\nbatch_wait_ms = 20\npreprocess_cache_mb = {cache_mb}\n"
        "generate_kwargs = { min_new_tokens = 3 }\n"
    )
    store = tmp_path / f"s{cache_mb}.db"
    argv = ["annotate", str(media), "--model", f"hf:{model}", "--store", str(store), "--config", str(cfg)]
    main([*argv, "--no-progress", "--json"])
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary


def test_each_sample_image_goes_through_the_image_processor_once(
    tmp_path: Path, tiny_idefics3_dir: Path, image_passes: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    s = _annotate(tmp_path, tiny_idefics3_dir, 1024, capsys)
    assert s["usage"]["calls"] == 4 * 5
    assert sum(image_passes) == 4  # one pass per sample image, not one per call (20)
    (stats,) = s["local"].values()
    assert (stats["image_processor"], stats["torchvision"]) == ("Idefics3ImageProcessorPil", False)
    assert (stats["image_passes"], stats["images_reused"], stats["calls"]) == (4, 16, 20)
    assert stats["preprocess_s"] > 0 and stats["generate_s"] > 0 and stats["max_batch_size"] == 8
    # the random model never ends its answer: every judge reply stops at its cap, so is `truncated`
    assert s["truncated"] == 4 and s["harmful"] == s["refused"] == 0
    image_passes.clear()
    s = _annotate(tmp_path, tiny_idefics3_dir, 0, capsys)  # no cache: every call preprocesses again
    assert sum(image_passes) == 20 and s["usage"]["calls"] == 20
    (stats,) = s["local"].values()
    assert stats["image_passes"] is None and stats["preprocess_s"] > 0 and stats["calls"] == 20


def test_the_cache_changes_no_answer_in_mixed_batches(tiny_idefics3_dir: Path) -> None:
    conversations = [
        ask(picture(1), "One."),
        ask(picture(2), picture(3), "Two."),
        ask("None."),
        ask(picture(1), "Again."),
    ]

    def answers(**options: object) -> list[str]:
        backend = make(tiny_idefics3_dir, batch_wait_ms=50, **options)

        async def together() -> list[str]:
            first = await asyncio.gather(*(backend.generate(c, GREEDY) for c in conversations[:2]))
            rest = await asyncio.gather(*(backend.generate(c, GREEDY) for c in conversations))  # half cached
            return [o.text for o in [*first, *rest]]

        try:
            return asyncio.run(together())
        finally:
            asyncio.run(backend.aclose())

    cached = answers()
    assert cached == answers(preprocess_cache_mb=0)
    assert all(cached)


def test_the_cache_is_bounded_in_bytes() -> None:
    cache = PreprocessCache(max_bytes=3000)
    for i in range(5):
        cache.put((f"k{i}",), {"pixel_values": torch.zeros(250)})  # 1000 bytes each
    assert cache.held_bytes == 3000 and cache.get(("k0",)) is None and cache.get(("k4",)) is not None
    cache.get(("k2",))  # used: kept over k3
    cache.put(("k5",), {"pixel_values": torch.zeros(250)})
    assert cache.get(("k2",)) is not None and cache.get(("k3",)) is None
    cache.put(("big",), {"pixel_values": torch.zeros(1000)})  # larger than the bound: not kept
    assert cache.get(("big",)) is None and cache.held_bytes == 3000


def test_the_summary_line_splits_preprocessing_and_generation() -> None:
    from vhd.annotate.summary import RunSummary
    from vhd.cli.annotate import _fmt_summary

    local = {
        "preprocess_s": 1.0,
        "generate_s": 3.0,
        "image_processor": "Idefics3ImageProcessorPil",
        "torchvision": False,
    }
    counts = {"calls": 20, "batches": 6, "max_batch_size": 8}
    s = RunSummary("r", "s.db", local={"hf:m": {**local, **counts, "image_passes": 4, "images_reused": 16}})
    (line,) = [x for x in _fmt_summary(s) if x.startswith("hf:m")]
    assert line == (
        "hf:m: 1.0 s preprocessing (25%), 3.0 s generating; Idefics3ImageProcessorPil image processor (Pillow), "
        "4 image pass(es), 16 reused; 20 call(s) in 6 batch(es) of up to 8"
    )
    s.local["hf:m"].update(image_passes=None, images_reused=None)
    assert "pass" not in next(x for x in _fmt_summary(s) if x.startswith("hf:m"))
