"""Native video input through a transformers video processor (``videos=``): a tiny random LLaVA-NeXT-Video.

transformers' video processors import torchvision, which the default test environment leaves
out (README: the test stack); this module runs where torchvision is installed (the GPU stack).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.backends.test_hf import GREEDY, LENGTH
from tests.media.conftest import make_video
from tests.optional import need_module
from vhd.backends.base import Message, check_video_input
from vhd.backends.hf import HFBackend
from vhd.backends.registry import create_backend
from vhd.media.clip import cut_clip
from vhd.media.encoded import EncodedVideo

pytest.importorskip("torchvision", reason="transformers' video processors need torchvision")

TOKENS_PER_FRAME = 4  # 32 px frames, 8 px patches, pooled 2 x 2


@pytest.fixture(scope="module")
def llava_next_video(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HFBackend]:
    need_module("torch", "pip install 'vhd[local]'")
    from tests.tiny_models import build_tiny_llava_next_video

    folder = build_tiny_llava_next_video(tmp_path_factory.mktemp("tiny_llava_next_video"))
    backend = create_backend(
        f"hf:{folder}", {"hf": {"generate_kwargs": LENGTH, "batch_wait_ms": 50, "video_input": "native"}}
    )
    assert isinstance(backend, HFBackend)
    asyncio.run(backend.check())
    yield backend
    asyncio.run(backend.aclose())


def test_the_clip_goes_to_the_video_processor(
    llava_next_video: HFBackend, tmp_path_factory: pytest.TempPathFactory
) -> None:
    check_video_input(llava_next_video)
    video = make_video(tmp_path_factory.mktemp("v") / "v.mp4", 40, fps=10)
    clips: list[EncodedVideo] = [cut_clip(video, 0.0, n / 2, fps=2) for n in (2, 4, 4)]

    async def go() -> list[object]:
        calls = [llava_next_video.generate([Message("user", (c, "Is this video harmful?"))], GREEDY) for c in clips]
        return list(await asyncio.gather(*calls))

    two, four, again = asyncio.run(go())
    assert four.prompt_tokens - two.prompt_tokens == TOKENS_PER_FRAME * 2  # type: ignore[attr-defined]
    assert four.extra["batch_size"] == 2 and again.text == four.text  # type: ignore[attr-defined]
