"""The ``openai`` backend against a real ``transformers serve`` process serving a tiny LLaVA.

The server runs offline (``HF_HUB_OFFLINE=1``, a private ``HF_HOME``) on 127.0.0.1, so this is
the whole path a user with a local OpenAI-compatible endpoint takes: SDK, HTTP, base64 images,
the server's chat template and generation.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.backends.test_hf import ask, picture
from tests.servers.transformers_serve import Served
from vhd.backends import Backend, GenerateConfig, Output, create_backend

GREEDY = GenerateConfig(temperature=0, max_tokens=8)


def _client(served: Served) -> Backend:
    return create_backend("openai:" + served.model, {"openai": {"base_url": served.base_url, "max_retries": 0}})


@pytest.mark.slow
def test_image_message_gets_text_and_usage(served_llava: Served, openai_env: pytest.MonkeyPatch) -> None:
    backend = _client(served_llava)

    async def run() -> Output:
        await backend.check()
        try:
            return await backend.generate(ask(picture(1), "Is this image harmful?", system="Be brief."), GREEDY)
        finally:
            await backend.aclose()

    out = asyncio.run(run())
    assert out.text
    assert out.prompt_tokens > 16  # the image alone expands to 16 tokens
    assert 0 < out.completion_tokens <= 8
    assert out.finish_reason in {"stop", "length"}
    assert out.latency_s > 0


@pytest.mark.slow
def test_served_answers_match_the_local_hf_backend(served_llava: Served, openai_env: pytest.MonkeyPatch) -> None:
    conversations = [
        ask(picture(2), "Is this image harmful?"),
        ask(picture(3), picture(4), "Compare them.", system="Be brief."),
        ask("No image here."),
    ]
    remote = _client(served_llava)
    local = create_backend("hf:" + served_llava.model)

    async def run() -> tuple[list[Output], list[Output]]:
        try:
            served = list(await asyncio.gather(*(remote.generate(c, GREEDY) for c in conversations)))
            direct = [await local.generate(c, GREEDY) for c in conversations]
        finally:
            await remote.aclose()
            await local.aclose()
        return served, direct

    served, direct = asyncio.run(run())
    assert [o.text for o in served] == [o.text for o in direct]
    assert [o.prompt_tokens for o in served] == [o.prompt_tokens for o in direct]
    assert [o.completion_tokens for o in served] == [o.completion_tokens for o in direct]
