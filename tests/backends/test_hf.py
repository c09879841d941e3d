"""The ``hf`` backend on tiny random-weight VLMs built offline (tests/tiny_models.py)."""

from __future__ import annotations

import asyncio
import io
import math
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from tests.servers import free_port
from vhd.backends import GenerateConfig, Message, Output, create_backend
from vhd.backends.hf import (
    HFBackend,
    accelerator,
    hub_reachable,
    parse_options,
    resolve_device,
    resolve_dtype,
    unavailable_message,
)
from vhd.errors import BackendError, BackendUnavailableError, ConfigError, MissingDependencyError
from vhd.media.encoded import EncodedImage

GREEDY = GenerateConfig(temperature=0, max_tokens=8)
LENGTH = {"min_new_tokens": 8}  # random models may emit eos at once; force a length


def picture(seed: int, size: tuple[int, int] = (48, 40)) -> EncodedImage:
    """A small drawn PNG that differs with ``seed``."""
    im = Image.new("RGB", size, ((seed * 53) % 256, (seed * 97) % 256, (seed * 31) % 256))
    draw = ImageDraw.Draw(im)
    draw.ellipse((seed % 10, 4, 30 + seed % 15, 30), fill=(255 - seed * 20 % 256, 40, 200))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return EncodedImage(buf.getvalue(), "image/png", *size)


def ask(*parts: str | EncodedImage, system: str | None = None) -> list[Message]:
    messages = [Message("system", system)] if system else []
    return [*messages, Message("user", tuple(parts))]


def make(model_dir: Path, **options: object) -> HFBackend:
    backend = create_backend("hf:" + str(model_dir), {"hf": {"generate_kwargs": LENGTH, **options}})
    assert isinstance(backend, HFBackend)
    return backend


@pytest.fixture(scope="module")
def llava(tiny_llava_dir: Path) -> Iterator[HFBackend]:
    backend = make(tiny_llava_dir, batch_wait_ms=50)
    asyncio.run(backend.check())
    yield backend
    asyncio.run(backend.aclose())


# ----------------------------------------------------------------------------- no model needed


def test_options_reject_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ConfigError, match=r"valid keys: .*max_batch_size"):
        parse_options({"batch_size": 4})
    with pytest.raises(ConfigError, match="device"):
        parse_options({"device": "gpu"})
    with pytest.raises(ConfigError, match="max_batch_size"):
        parse_options({"max_batch_size": 0})
    assert parse_options({"device": "cuda:1", "dtype": "bfloat16"}).device == "cuda:1"


def test_local_files_only_follows_hf_hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert parse_options({}).local_files_only is True
    assert parse_options({"local_files_only": False}).local_files_only is False
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert parse_options({}).local_files_only is False


def test_unavailable_messages_are_one_line_with_a_fix(tmp_path: Path) -> None:
    raw = OSError("We couldn't connect to 'https://huggingface.co'\nto load the files,\nand couldn't find them")
    hub = unavailable_message("org/some-vlm", raw, offline=True)
    assert "\n" not in hub
    assert "hf download org/some-vlm" in hub
    assert "--model openai:MODEL" in hub
    assert "couldn't connect" not in hub  # the raw text adds nothing to the fix
    missing = unavailable_message(str(tmp_path / "nope"), raw, offline=True)
    assert "no such directory" in missing
    assert "\n" not in missing
    not_a_model = unavailable_message(str(tmp_path), ValueError("Unrecognized model"), offline=True)
    assert "not a loadable vision-language model" in not_a_model
    wrong_kind = unavailable_message("org/text-only-llm", ValueError("Unrecognized configuration class"), offline=False)
    assert "AutoModelForImageTextToText" in wrong_kind
    assert "hub is unreachable" not in wrong_kind


def test_hub_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")
        assert hub_reachable(timeout=2)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    assert not hub_reachable(timeout=2)


# ----------------------------------------------------------------------------- tiny models


@pytest.mark.slow
def test_missing_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # what a failed import leaves behind
    backend = create_backend("hf:org/model")
    with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[local\]'"):
        asyncio.run(backend.check())
    asyncio.run(backend.aclose())


@pytest.mark.slow
def test_unreachable_hub_fails_fast_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    backend = create_backend("hf:vhd-tests/not-cached-vlm", {"hf": {"local_files_only": False}})
    start = time.perf_counter()
    with pytest.raises(BackendUnavailableError, match="not in the local cache and the hub is unreachable"):
        asyncio.run(backend.check())
    assert time.perf_counter() - start < 20  # not minutes of retries per file
    asyncio.run(backend.aclose())


@pytest.mark.slow
def test_missing_directory_fails_fast_in_check(tmp_path: Path) -> None:
    backend = create_backend("hf:" + str(tmp_path / "no-model-here"))
    with pytest.raises(BackendUnavailableError) as info:
        asyncio.run(backend.check())
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot load hf model '{tmp_path / 'no-model-here'}'")
    assert "no such directory" in message
    # generate reports the same failure instead of hanging
    with pytest.raises(BackendUnavailableError):
        asyncio.run(backend.generate(ask("hi"), GREEDY))
    asyncio.run(backend.aclose())


@pytest.mark.slow
def test_hub_id_offline_says_how_to_fix() -> None:
    backend = create_backend("hf:vhd-tests/does-not-exist-vlm", {"hf": {"local_files_only": True}})
    with pytest.raises(BackendUnavailableError) as info:
        asyncio.run(backend.check())
    message = str(info.value)
    assert "\n" not in message
    assert "not in the local cache and the hub is unreachable" in message
    assert "hf download vhd-tests/does-not-exist-vlm" in message
    assert message.endswith("to try vhd with no model at all: --model scripted:demo")  # works offline, at once
    asyncio.run(backend.aclose())


@pytest.mark.slow
def test_generate_with_one_image(llava: HFBackend, tiny_llava_dir: Path) -> None:
    out = asyncio.run(llava.generate(ask(picture(1), "Is this image harmful?"), GREEDY))
    assert isinstance(out, Output)
    assert isinstance(out.text, str) and out.text
    assert out.completion_tokens == 8
    assert out.finish_reason == "length"
    assert out.prompt_tokens > 16  # 16 image tokens plus the text
    assert out.latency_s > 0
    assert out.model == str(tiny_llava_dir)
    assert out.first_token_logprobs is None
    again = asyncio.run(llava.generate(ask(picture(1), "Is this image harmful?"), GREEDY))
    assert again.text == out.text  # greedy is deterministic


@pytest.mark.slow
def test_generate_with_two_images_feeds_both(llava: HFBackend) -> None:
    one = asyncio.run(llava.generate(ask(picture(1), "Compare."), GREEDY))
    two = asyncio.run(llava.generate(ask(picture(1), picture(2), "Compare."), GREEDY))
    assert two.prompt_tokens - one.prompt_tokens == 16  # one more image: 4x4 patch features (CLS dropped)
    assert two.completion_tokens == 8
    swapped = asyncio.run(llava.generate(ask(picture(2), picture(1), "Compare."), GREEDY))
    assert swapped.prompt_tokens == two.prompt_tokens


@pytest.mark.slow
def test_concurrent_calls_are_batched_and_match_sequential(llava: HFBackend) -> None:
    conversations = [
        ask(*[picture(10 + i + k) for k in range(i % 3)], f"Prompt {i}: " + "describe it " * i) for i in range(6)
    ]
    sequential = [asyncio.run(llava.generate(c, GREEDY)) for c in conversations]

    async def together() -> list[Output]:
        return list(await asyncio.gather(*(llava.generate(c, GREEDY) for c in conversations)))

    batched = asyncio.run(together())
    assert [o.extra["batch_size"] for o in sequential] == [1] * 6
    assert [o.extra["batch_size"] for o in batched] == [6] * 6
    assert [o.text for o in batched] == [o.text for o in sequential]
    assert [o.prompt_tokens for o in batched] == [o.prompt_tokens for o in sequential]
    assert [o.completion_tokens for o in batched] == [o.completion_tokens for o in sequential]
    assert len({o.prompt_tokens for o in batched}) > 1  # padding was really needed


@pytest.mark.slow
def test_batches_respect_max_batch_size_and_group_by_config(tiny_llava_dir: Path) -> None:
    backend = make(tiny_llava_dir, max_batch_size=4, batch_wait_ms=100)
    short = GenerateConfig(temperature=0, max_tokens=8)
    longer = GenerateConfig(temperature=0, max_tokens=12)

    async def run() -> list[Output]:
        calls = [backend.generate(ask(picture(i), f"q{i}"), short if i < 3 else longer) for i in range(7)]
        return list(await asyncio.gather(*calls))

    try:
        outs = asyncio.run(run())
    finally:
        asyncio.run(backend.aclose())
    assert all(o.extra["batch_size"] <= 4 for o in outs)
    assert [o.completion_tokens for o in outs] == [8] * 3 + [12] * 4


@pytest.mark.slow
def test_first_token_logprobs_are_valid_and_taken_before_sampling(llava: HFBackend) -> None:
    messages = ask(picture(3), "Harmful? Answer yes or no.")
    config = GenerateConfig(temperature=0, max_tokens=8, logprobs=True, top_logprobs=5)
    out = asyncio.run(llava.generate(messages, config))
    assert out.first_token_logprobs
    values = list(out.first_token_logprobs.values())
    assert 1 <= len(values) <= 5
    assert all(isinstance(k, str) for k in out.first_token_logprobs)
    assert all(math.isfinite(v) and v <= 0 for v in values)
    assert math.log(sum(math.exp(v) for v in values)) <= 1e-6
    hot = GenerateConfig(temperature=1.5, max_tokens=8, logprobs=True, top_logprobs=5, seed=1)
    sampled = asyncio.run(llava.generate(messages, hot))
    assert sampled.first_token_logprobs == pytest.approx(out.first_token_logprobs)


@pytest.mark.slow
def test_seeded_sampling_is_reproducible_even_inside_a_batch(llava: HFBackend) -> None:
    config = GenerateConfig(temperature=1.0, max_tokens=8, seed=7)
    messages = ask(picture(4), "Tell a story.")
    alone = asyncio.run(llava.generate(messages, config))

    async def crowded() -> list[Output]:
        others = [llava.generate(ask(picture(i), "other"), GREEDY) for i in range(3)]
        return list(await asyncio.gather(llava.generate(messages, config), *others))

    assert asyncio.run(crowded())[0].text == alone.text


@pytest.mark.slow
def test_stop_sequence_cuts_the_text(llava: HFBackend) -> None:
    messages = ask(picture(5), "Say something long.")
    full = asyncio.run(llava.generate(messages, GenerateConfig(temperature=0, max_tokens=8)))
    stop = full.text[len(full.text) // 2 :][:2]
    assert stop
    cut = asyncio.run(llava.generate(messages, GenerateConfig(temperature=0, max_tokens=8, stop=(stop,))))
    assert cut.text == full.text[: full.text.find(stop)]
    assert cut.finish_reason == "stop"


@pytest.mark.slow
def test_system_message_folded_when_template_has_no_system_role(tmp_path: Path) -> None:
    from tests.tiny_models import build_tiny_llava

    backend = make(build_tiny_llava(tmp_path / "nosys", system_role=False))
    image = picture(6)
    try:
        with_system = asyncio.run(backend.generate(ask(image, "Judge it.", system="You are a judge."), GREEDY))
        by_hand = asyncio.run(backend.generate(ask("You are a judge.", "\n\n", image, "Judge it."), GREEDY))
    finally:
        asyncio.run(backend.aclose())
    assert with_system.text == by_hand.text
    assert with_system.prompt_tokens == by_hand.prompt_tokens


@pytest.mark.slow
def test_a_broken_image_fails_only_its_own_call(llava: HFBackend) -> None:
    broken = EncodedImage(b"not an image at all", "image/png", 10, 10)

    async def run() -> list[Output | BaseException]:
        return list(
            await asyncio.gather(
                llava.generate(ask(broken, "bad"), GREEDY),
                llava.generate(ask(picture(7), "good"), GREEDY),
                return_exceptions=True,
            )
        )

    bad, good = asyncio.run(run())
    assert isinstance(bad, BackendError)
    assert "decode an image" in str(bad)
    assert isinstance(good, Output) and good.text


@pytest.mark.slow
def test_aclose_frees_the_model_and_a_later_call_reloads(tiny_llava_dir: Path) -> None:
    backend = make(tiny_llava_dir)
    first = asyncio.run(backend.generate(ask(picture(8), "q"), GREEDY))
    asyncio.run(backend.aclose())
    assert backend._worker is None
    second = asyncio.run(backend.generate(ask(picture(8), "q"), GREEDY))
    asyncio.run(backend.aclose())
    assert second.text == first.text


@pytest.mark.slow
def test_identity_names_dtype_and_revision(tiny_llava_dir: Path) -> None:
    backend = make(tiny_llava_dir, device="cpu", revision="abc123")
    ident = backend.identity()
    assert ident["spec"] == f"hf:{tiny_llava_dir}"
    assert ident["dtype"] == "float32"
    assert ident["revision"] == "abc123"
    assert ident["generate_kwargs"] == LENGTH


@pytest.mark.slow
def test_idefics3_single_and_batched(tiny_idefics3_dir: Path) -> None:
    backend = make(tiny_idefics3_dir, batch_wait_ms=50)
    conversations = [
        ask(picture(20), "One picture."),
        ask(picture(21), picture(22), "Two pictures, compare them.", system="Be brief."),
        ask("No picture at all."),
    ]

    async def together() -> list[Output]:
        return list(await asyncio.gather(*(backend.generate(c, GREEDY) for c in conversations)))

    try:
        sequential = [asyncio.run(backend.generate(c, GREEDY)) for c in conversations]
        batched = asyncio.run(together())
    finally:
        asyncio.run(backend.aclose())
    assert [o.text for o in batched] == [o.text for o in sequential]
    assert all(o.completion_tokens == 8 and o.text for o in batched)
    assert batched[0].extra["batch_size"] == 3


def test_device_and_dtype_choice() -> None:
    found = accelerator()
    assert found in {None, "cuda", "mps"}
    assert resolve_device("auto") == (found or "cpu") and resolve_device("cpu") == "cpu"
    assert resolve_dtype("auto", "cpu") == "float32" and resolve_dtype("float16", "cpu") == "float16"
    assert resolve_dtype("auto", "mps") == "float32" and resolve_dtype("auto", "mps", mps_dtype="float16") == "float16"
