"""The vllm-engine backend: its pure parts on plain values here; the engine itself on a GPU only."""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

from tests.backends.test_openai_payload import make_image
from tests.optional import need, need_module
from vhd.backends import create_backend
from vhd.backends.base import GenerateConfig, Message
from vhd.backends.registry import BACKENDS
from vhd.backends.vllm_engine import (
    VLLMEngineBackend,
    chat_messages,
    engine_kwargs,
    first_token_table,
    parse_options,
    sampling_kwargs,
    to_output,
)
from vhd.debate.score import yes_probability
from vhd.errors import BackendError, ConfigError, MissingDependencyError


def test_engine_arguments_turn_prefix_caching_on_and_let_the_user_add_more() -> None:
    opts = parse_options({"max_images": 6, "max_model_len": 8192, "engine_kwargs": {"enforce_eager": True}})
    kwargs = engine_kwargs("Qwen/Qwen2.5-VL-7B-Instruct", opts)
    assert kwargs["model"] == "Qwen/Qwen2.5-VL-7B-Instruct" and kwargs["enable_prefix_caching"] is True
    assert kwargs["limit_mm_per_prompt"] == {"image": 6} and kwargs["max_model_len"] == 8192
    assert kwargs["enforce_eager"] is True and "seed" not in kwargs and "revision" not in kwargs


def test_bad_options_fail_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"unknown option.*base_url.*valid: batch_wait_ms"):
        parse_options({"base_url": "http://x"})
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        parse_options({"gpu_memory_utilization": 1.5})


def test_messages_use_the_openai_chat_format_with_data_urls() -> None:
    img = make_image()
    conv = chat_messages(
        [
            Message("system", "Judge."),
            Message("user", ("The image:", img, "")),
            Message("assistant", "No, a kitchen."),
            Message("user", ("Frame 1:", img, "Harmful?")),
        ]
    )
    assert conv[0] == {"role": "system", "content": "Judge."}
    assert conv[1] == {
        "role": "user",
        "content": [{"type": "text", "text": "The image:"}, {"type": "image_url", "image_url": {"url": img.data_url}}],
    }
    assert conv[2] == {"role": "assistant", "content": "No, a kitchen."}
    assert [p["type"] for p in conv[3]["content"]] == ["text", "image_url", "text"]
    with pytest.raises(BackendError, match="only allowed in user messages"):
        chat_messages([Message("assistant", ("x", img))])


def test_sampling_follows_the_role_and_asks_logprobs_for_the_score() -> None:
    opts = parse_options({"sampling": {"top_k": 20}})
    judge = GenerateConfig(temperature=0.5, max_tokens=100, seed=7, logprobs=True, top_logprobs=10, stop=("\n\n",))
    assert sampling_kwargs(judge, opts) == {
        "n": 1,
        "temperature": 0.5,
        "max_tokens": 100,
        "seed": 7,
        "stop": ["\n\n"],
        "logprobs": 10,
        "top_k": 20,
    }
    assert "logprobs" not in sampling_kwargs(GenerateConfig(max_tokens=500), opts)


def test_outputs_carry_text_usage_and_the_first_token_table() -> None:
    first = {101: ("Yes", -0.2), 102: ("No", -1.9), 103: (" yes", -4.0), 104: (None, -5.0), 105: ("Yes", -6.0)}
    assert first_token_table(first) == {"Yes": -0.2, "No": -1.9, " yes": -4.0}
    out = to_output(
        "Yes, violence.", prompt_tokens=812, completion_tokens=4, finish_reason="stop", first_position=first, model="m"
    )
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.finish_reason) == ("Yes, violence.", 812, 4, "stop")
    score = yes_probability(out.first_token_logprobs)
    assert score is not None and score > 0.5
    plain = to_output(
        "No.", prompt_tokens=1, completion_tokens=1, finish_reason="length", first_position=None, model="m"
    )
    assert plain.first_token_logprobs is None


def test_registered_with_its_extra_and_built_without_vllm() -> None:
    assert "vllm-engine" in BACKENDS.names()
    backend = create_backend("vllm-engine:Qwen/Qwen2.5-VL-7B-Instruct", {"vllm-engine": {"dtype": "bfloat16"}})
    assert isinstance(backend, VLLMEngineBackend) and backend.supports_logprobs
    assert backend.identity()["spec"] == "vllm-engine:Qwen/Qwen2.5-VL-7B-Instruct"
    assert backend.identity()["dtype"] == "bfloat16"


def test_an_alias_named_vllm_engine_cannot_point_elsewhere() -> None:
    with pytest.raises(ConfigError, match="shadows the registered backend 'vllm-engine'"):
        create_backend("vllm-engine:m", {"vllm-engine": {"type": "openai", "base_url": "http://gpu:8000/v1"}})


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed: the engine would start")
def test_without_vllm_check_names_the_extra() -> None:
    backend = VLLMEngineBackend("some/model")

    async def main() -> None:
        try:
            await backend.check()
        finally:
            await backend.aclose()

    with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[vllm\]'"):
        asyncio.run(main())


@pytest.mark.gpu
@pytest.mark.slow
def test_engine_answers_a_batch_with_images_and_logprobs() -> None:
    """On a CUDA machine with vLLM and a local VLM folder in $VHD_VLLM_TEST_MODEL."""
    need_module("vllm", "pip install 'vhd[vllm]' on a CUDA machine")
    model = os.environ.get("VHD_VLLM_TEST_MODEL", "")
    need(bool(model) and os.path.isdir(model), "set VHD_VLLM_TEST_MODEL to a local vision-language model folder")
    backend = VLLMEngineBackend(model, {"max_model_len": 4096, "gpu_memory_utilization": 0.5})
    img = make_image()
    messages = [Message("system", "Answer yes or no."), Message("user", ("The image:", img, "Is it harmful?"))]
    judge = GenerateConfig(temperature=0.0, max_tokens=8, logprobs=True, top_logprobs=5, tag="judge")

    async def main() -> list[object]:
        try:
            await backend.check()
            return list(await asyncio.gather(*(backend.generate(messages, judge) for _ in range(8))))
        finally:
            await backend.aclose()

    outs = asyncio.run(main())
    texts = {o.text for o in outs}  # type: ignore[attr-defined]
    assert len(texts) == 1  # greedy and batched: the same answer eight times
    first = outs[0]
    assert first.prompt_tokens > 10 and first.completion_tokens >= 1  # type: ignore[attr-defined]
    assert first.first_token_logprobs  # type: ignore[attr-defined]
