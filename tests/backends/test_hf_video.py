"""Native video input on the ``hf`` backend: a tiny random InstructBLIP-Video takes the clip's frames as its video.

transformers' own video processors (LLaVA-NeXT-Video, LLaVA-OneVision, Qwen2-VL) import
torchvision, which the test environment leaves out; InstructBLIP-Video runs through vhd's
`VideoBlipProcessor` without it, so its video path is the one exercised here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.backends.test_hf import GREEDY, LENGTH, picture
from tests.media.conftest import make_video
from tests.optional import need_module
from vhd.backends.base import Message, check_video_input
from vhd.backends.hf import HFBackend
from vhd.backends.registry import create_backend
from vhd.errors import BackendError
from vhd.media.clip import cut_clip
from vhd.media.encoded import EncodedVideo

QUERY_TOKENS = 4  # the tiny model's Q-Former queries per frame


@pytest.fixture(scope="module")
def video_blip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HFBackend]:
    need_module("torch", "pip install 'vhd[local]'")
    need_module("av", "pip install 'vhd[video]'")
    from tests.tiny_models import build_tiny_instructblip_video

    folder = build_tiny_instructblip_video(tmp_path_factory.mktemp("tiny_ib_video"))
    backend = create_backend(
        f"hf:{folder}", {"hf": {"generate_kwargs": LENGTH, "batch_wait_ms": 50, "video_input": "native"}}
    )
    assert isinstance(backend, HFBackend) and backend.video_input == "native"
    asyncio.run(backend.check())
    yield backend
    asyncio.run(backend.aclose())


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[int, EncodedVideo]:
    video = make_video(tmp_path_factory.mktemp("v") / "v.mp4", 40, fps=10)
    return {n: cut_clip(video, 0.0, n / 2, fps=2) for n in (2, 4)}  # 2 and 4 frames


def _ask(*parts: str | EncodedVideo) -> list[Message]:
    return [Message("user", (*parts, "Is this video harmful?"))]


def test_the_clip_is_the_models_video_input(video_blip: HFBackend, clips: dict[int, EncodedVideo]) -> None:
    check_video_input(video_blip)  # its processor takes a video

    async def go() -> list[object]:
        return list(await asyncio.gather(*(video_blip.generate(_ask(clips[n]), GREEDY) for n in (2, 4, 4))))

    two, four, again = asyncio.run(go())
    assert [clips[2].frames, clips[4].frames] == [2, 4]
    # every frame of the clip reached the model: its query tokens stand in the prompt once per frame
    assert four.prompt_tokens - two.prompt_tokens == QUERY_TOKENS * 2  # type: ignore[attr-defined]
    assert four.completion_tokens == 8 and again.text == four.text  # type: ignore[attr-defined]
    assert four.extra["batch_size"] == 2 and two.extra["batch_size"] == 1  # type: ignore[attr-defined]


def test_a_clip_beside_images_is_refused_with_the_fix(video_blip: HFBackend, clips: dict[int, EncodedVideo]) -> None:
    with pytest.raises(BackendError, match=r"one video per prompt.*--video-input frames"):
        asyncio.run(video_blip.generate([Message("user", (picture(1), clips[2], "Harmful?"))], GREEDY))
