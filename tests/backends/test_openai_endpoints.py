"""The openai backend over several real loopback endpoints: sharing, failing over, cool-down, stats."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port
from tests.servers.chat_server import ChatServer, Failure
from vhd.backends import create_backend
from vhd.backends.base import GenerateConfig, Message, Output
from vhd.backends.openai import OpenAIBackend
from vhd.config import load_config
from vhd.errors import BackendUnavailableError, ConfigError

pytestmark = pytest.mark.usefixtures("openai_env")

MSGS = [Message("system", "Answer yes or no."), Message("user", "Is this harmful?")]
FAST = {"backoff_base": 0.005, "backoff_max": 1.0}


@pytest.fixture
def two() -> Iterator[tuple[ChatServer, ChatServer]]:
    with ChatServer(latency=0.02) as a, ChatServer(latency=0.02) as b:
        yield a, b


def many(backend: OpenAIBackend, n: int, config: GenerateConfig | None = None) -> list[Output]:
    async def main() -> list[Output]:
        try:
            return list(await asyncio.gather(*(backend.generate(MSGS, config or GenerateConfig()) for _ in range(n))))
        finally:
            await backend.aclose()

    return asyncio.run(main())


def pool(*urls: str, **options: Any) -> OpenAIBackend:
    return OpenAIBackend("test-model", {"base_urls": list(urls), **FAST, **options})


def test_two_endpoints_share_the_load(two: tuple[ChatServer, ChatServer]) -> None:
    a, b = two
    backend = pool(a.base_url, b.base_url, max_in_flight=8)
    outs = many(backend, 40)
    assert all(o.text and o.extra["attempts"] == 1 for o in outs)
    assert a.chat_requests + b.chat_requests == 40
    assert a.chat_requests >= 12 and b.chat_requests >= 12  # least in flight keeps both busy
    assert a.peak_in_flight <= 8 and b.peak_in_flight <= 8
    stats = backend.endpoint_stats()
    counts = {url: s["requests"] for url, s in stats.items()}
    assert counts == {a.base_url: a.chat_requests, b.base_url: b.chat_requests}
    assert all(s["errors"] == 0 and s["mean_latency_s"] >= 0.02 and s["prompt_tokens"] > 0 for s in stats.values())
    assert {o.extra["endpoint"] for o in outs} == {a.base_url, b.base_url}


def test_a_failing_endpoint_is_routed_around_and_its_requests_retried_elsewhere(
    two: tuple[ChatServer, ChatServer],
) -> None:
    a, b = two
    b.fail_next(["500"] * 100)
    backend = pool(a.base_url, b.base_url, max_in_flight=4, cooldown=30.0)
    outs = many(backend, 24)
    assert all(o.text for o in outs)  # every request answered, by a
    assert all(o.extra["endpoint"] == a.base_url for o in outs)
    stats = backend.endpoint_stats()
    assert 1 <= b.chat_requests <= 4  # only what was in flight when it first failed
    assert stats[b.base_url]["errors"] == b.chat_requests and stats[b.base_url]["cooldowns"] >= 1
    assert stats[a.base_url]["requests"] == 24 and stats[a.base_url]["errors"] == 0
    assert sum(o.extra["attempts"] for o in outs) == 24 + b.chat_requests


@pytest.mark.parametrize("failure", ["429", "503", "disconnect"])
def test_each_kind_of_transient_failure_moves_the_request(two: tuple[ChatServer, ChatServer], failure: str) -> None:
    a, b = two
    a.fail_next([failure])  # a new pool starts with its first endpoint
    backend = pool(a.base_url, b.base_url, max_in_flight=1, cooldown=30.0)
    (out,) = many(backend, 1)
    assert out.text and out.extra["attempts"] == 2 and out.extra["endpoint"] == b.base_url  # retried on b at once
    assert (a.chat_requests, b.chat_requests) == (1, 1)
    assert out.latency_s < 1.0  # no backoff: there was somewhere else to go


def test_a_dead_endpoint_at_start_is_cooled_and_the_run_goes_on(chat_server: ChatServer, caplog: Any) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    backend = pool(chat_server.base_url, dead, cooldown=60.0)

    async def main() -> list[Output]:
        try:
            await backend.check()
            return [await backend.generate(MSGS, GenerateConfig()) for _ in range(5)]
        finally:
            await backend.aclose()

    with caplog.at_level(logging.WARNING, logger="vhd.backends.openai"):
        outs = asyncio.run(main())
    assert all(o.extra["attempts"] == 1 for o in outs) and chat_server.chat_requests == 5
    assert "cannot reach" in caplog.text and backend.endpoint_stats()[dead]["requests"] == 0


def test_check_fails_when_no_endpoint_answers() -> None:
    dead = [f"http://127.0.0.1:{free_port()}/v1" for _ in range(2)]
    backend = pool(*dead)

    async def main() -> None:
        try:
            await backend.check()
        finally:
            await backend.aclose()

    with pytest.raises(BackendUnavailableError, match=r"cannot reach .*: is the server running"):
        asyncio.run(main())


def test_a_cooled_endpoint_gets_requests_again_after_the_cool_down(two: tuple[ChatServer, ChatServer]) -> None:
    a, b = two
    b.fail_next(["503"])
    backend = pool(a.base_url, b.base_url, max_in_flight=1, cooldown=0.3)

    async def main() -> tuple[int, int]:
        try:
            await asyncio.gather(*(backend.generate(MSGS, GenerateConfig()) for _ in range(2)))
            during = b.chat_requests
            await asyncio.gather(*(backend.generate(MSGS, GenerateConfig()) for _ in range(4)))
            assert b.chat_requests == during  # still cooling: everything went to a
            await asyncio.sleep(0.35)
            await asyncio.gather(*(backend.generate(MSGS, GenerateConfig()) for _ in range(4)))
            return during, b.chat_requests
        finally:
            await backend.aclose()

    during, after = asyncio.run(main())
    assert during == 1 and after >= 2  # back in the rotation once the cool-down ended


def test_when_every_endpoint_is_cooling_the_request_waits_for_the_first_back(
    two: tuple[ChatServer, ChatServer],
) -> None:
    a, b = two
    a.fail_next([Failure.rate_limit(retry_after=0.2)])
    b.fail_next([Failure.rate_limit(retry_after=0.4)])
    backend = pool(a.base_url, b.base_url, max_in_flight=1, cooldown=0.01)
    start = time.monotonic()
    (out,) = many(backend, 1)
    took = time.monotonic() - start
    assert out.text and out.extra["attempts"] == 3
    assert 0.2 <= took < 0.4 + 0.3 and out.extra["endpoint"] == a.base_url  # a's Retry-After ended first


def test_a_list_of_tables_gives_each_endpoint_its_own_key(
    tmp_path: Path, openai_env: pytest.MonkeyPatch, caplog: Any
) -> None:
    with ChatServer(api_key="sk-first-KeyAAAA1111") as a, ChatServer(api_key="sk-second-KeyBBBB2222") as b:
        config = tmp_path / "vhd.toml"
        config.write_text(
            f"""
[[backends.gpus]]
type = "openai"
base_url = "{a.base_url}"
api_key_env = "KEY_A"
max_retries = 1
[[backends.gpus]]
type = "openai"
base_url = "{b.base_url}"
api_key_env = "KEY_B"
max_in_flight = 2
"""
        )
        openai_env.setenv("KEY_A", "sk-first-KeyAAAA1111")
        openai_env.setenv("KEY_B", "sk-second-KeyBBBB2222")
        backend = create_backend("gpus:test-model", load_config(config).backends)
        assert isinstance(backend, OpenAIBackend) and backend.spec == "gpus:test-model"
        with caplog.at_level(logging.DEBUG):
            outs = many(backend, 12)  # type: ignore[arg-type]
        assert all(o.text for o in outs)
        assert a.chat_requests > 0 and b.chat_requests > 0 and b.peak_in_flight <= 2
        assert all(r.headers["authorization"] == "Bearer sk-first-KeyAAAA1111" for r in a.requests)
        assert all(r.headers["authorization"] == "Bearer sk-second-KeyBBBB2222" for r in b.requests)
        shown = repr(backend) + str(backend.endpoint_stats()) + str(backend.identity()) + caplog.text
        assert "KeyAAAA" not in shown and "KeyBBBB" not in shown
        assert backend.identity()["hosts"] == sorted([f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"])


def test_identity_of_one_endpoint_is_unchanged_and_of_several_ignores_order() -> None:
    one = OpenAIBackend("m", {"base_url": "http://h1:8000/v1"}).identity()
    assert one["host"] == "h1:8000" and "hosts" not in one
    ab = OpenAIBackend("m", {"base_urls": ["http://h1:8000/v1", "http://h2:8000/v1"]}).identity()
    ba = OpenAIBackend("m", {"base_urls": ["http://h2:8000/v1", "http://h1:8000/v1"]}).identity()
    assert ab == ba and ab["hosts"] == ["h1:8000", "h2:8000"]


def test_an_alias_that_shadows_a_registered_backend_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"\[backends.hf\] type = 'openai' shadows the registered backend 'hf'"):
        create_backend("hf:some-model", {"hf": {"type": "openai", "base_url": "http://x/v1"}})
    with pytest.raises(ConfigError, match="shadows the registered backend 'scripted'"):
        create_backend("scripted:demo", {"scripted": [{"type": "openai", "base_url": "http://x/v1"}]})
    assert create_backend("openai:m", {"openai": {"type": "openai", "base_url": "http://x/v1"}}).spec == "openai:m"
    assert create_backend("vllm:m", {"vllm": {"type": "openai", "base_url": "http://x/v1"}}).spec == "vllm:m"


def test_a_list_of_tables_for_a_single_endpoint_backend_is_an_error() -> None:
    with pytest.raises(ConfigError, match="takes one table, not a list"):
        create_backend("demo2:demo", {"demo2": [{"type": "scripted"}, {"type": "scripted"}]})
    with pytest.raises(ConfigError, match="different types"):
        create_backend("mix:m", {"mix": [{"type": "openai"}, {"type": "scripted"}]})


def test_rpm_and_tpm_steer_requests_and_settle_to_reported_usage() -> None:
    with ChatServer(usage=(50, 5)) as a, ChatServer(usage=(50, 5)) as b:
        tables = [
            {"base_url": a.base_url, "rpm": 1, "tpm": 600, **FAST},  # one request a minute
            {"base_url": b.base_url},
        ]
        backend = OpenAIBackend("test-model", {"endpoints": tables})

        async def main() -> list[Output]:
            try:
                return [await backend.generate(MSGS, GenerateConfig(max_tokens=100)) for _ in range(5)]
            finally:
                await backend.aclose()

        outs = asyncio.run(main())
        assert (a.chat_requests, b.chat_requests) == (1, 4)  # a's minute is spent: the rest went to b
        assert all(o.extra["queue_s"] < 1 for o in outs)  # nobody waited for a's limit
        limiter = backend.pool.endpoints[0].state.limiter
        assert limiter.wait_for(0) > 50  # a's next request would wait most of a minute
        assert limiter.tokens is not None
        assert 600 - 55 <= limiter.tokens.level <= 600 - 55 + 5  # estimate replaced by the 55 reported
        assert backend.endpoint_stats()[a.base_url]["rate_wait_s"] == 0
