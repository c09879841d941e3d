"""The ``hf`` backend on a tiny random InstructBLIP: no chat template, one image per prompt, prompt not echoed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.test_hf import GREEDY, ask, make, picture
from vhd.backends.hf import HFBackend, load_model
from vhd.backends.hf_batch import PLAIN_TEMPLATE, single_image
from vhd.errors import BackendError


@pytest.fixture(scope="module")
def instructblip(tiny_instructblip_dir: Path) -> Iterator[HFBackend]:
    backend = make(tiny_instructblip_dir, batch_wait_ms=50)
    asyncio.run(backend.check())
    yield backend
    asyncio.run(backend.aclose())


def test_the_shared_loader_gives_instructblip_the_plain_prompt(tiny_instructblip_dir: Path) -> None:
    loaded = load_model(str(tiny_instructblip_dir), {"device": "cpu"})
    assert single_image(loaded.processor)
    assert loaded.processor.chat_template == PLAIN_TEMPLATE
    text = loaded.processor.apply_chat_template(
        [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Is it harmful?"}]},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == "Be brief.\nIs it harmful?"


def test_generates_for_one_image_without_echoing_the_prompt(instructblip: HFBackend) -> None:
    async def go() -> list[object]:
        calls = [instructblip.generate(ask(picture(k), "Is the given image harmful?"), GREEDY) for k in range(3)]
        return list(await asyncio.gather(*calls))

    outs = asyncio.run(go())
    for out in outs:
        assert out.completion_tokens == 8  # min_new_tokens from the fixture: the new tokens only
        assert "Is the given image harmful" not in out.text
        assert out.first_token_logprobs is None
    assert max(o.extra["batch_size"] for o in outs) >= 2  # batched together


def test_two_images_in_one_prompt_fail_with_the_fix(instructblip: HFBackend) -> None:
    with pytest.raises(BackendError, match="exactly one image per prompt"):
        asyncio.run(instructblip.generate(ask(picture(1), picture(2), "Frames?"), GREEDY))
