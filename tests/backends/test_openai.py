"""The openai backend against a real loopback Chat Completions server (no mocks)."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from tests.backends.test_openai_payload import make_image
from tests.servers import free_port
from tests.servers.chat_server import ChatServer, Failure
from vhd.backends import create_backend
from vhd.backends.base import GenerateConfig, Message, Output
from vhd.backends.openai import OpenAIBackend
from vhd.errors import BackendError, BackendUnavailableError, ConfigError

pytestmark = pytest.mark.usefixtures("openai_env")

T = TypeVar("T")
KEY = "sk-test-Zq81uXw0RealLookingKey77"
FAST = {"backoff_base": 0.005, "backoff_max": 1.0}
MSGS = [Message("system", "Answer yes or no."), Message("user", "Is this harmful?")]


def backend(srv: ChatServer, **options: Any) -> OpenAIBackend:
    return OpenAIBackend("test-model", {"base_url": srv.base_url, **FAST, **options})


def run(b: OpenAIBackend, body: Callable[[OpenAIBackend], Awaitable[T]]) -> T:
    async def main() -> T:
        try:
            return await body(b)
        finally:
            await b.aclose()

    return asyncio.run(main())


def generate(b: OpenAIBackend, config: GenerateConfig | None = None, messages: list[Message] = MSGS) -> Output:
    return run(b, lambda x: x.generate(messages, config or GenerateConfig()))


# -- happy path ------------------------------------------------------------------------------


def test_round_trip_payload_and_output(chat_server: ChatServer, openai_env: pytest.MonkeyPatch) -> None:
    openai_env.setenv("OPENAI_API_KEY", KEY)
    chat_server.reply = "Yes, a weapon is shown."
    chat_server.top_logprobs = {"Yes": -0.01, "No": -4.6, "yes": -6.0, "Maybe": -9.0}
    img = make_image()
    msgs = [Message("system", "Judge."), Message("user", ("Frame 1:", img, "Harmful?"))]
    cfg = GenerateConfig(temperature=0.0, max_tokens=20, logprobs=True, top_logprobs=3, seed=5)
    out = generate(backend(chat_server, image_detail="high"), cfg, msgs)

    assert out.text == "Yes, a weapon is shown."
    assert out.first_token_logprobs == {"Yes": -0.01, "No": -4.6, "yes": -6.0}  # top 3 asked
    assert out.prompt_tokens > 85 and out.completion_tokens == 5 and out.finish_reason == "stop"
    assert out.latency_s > 0 and out.extra["attempts"] == 1 and out.model == "test-model"

    (req,) = chat_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert chat_server.bytes_received == len(req.body)
    body = req.json
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == ("test-model", 0.0, 20, 5)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 3)
    assert req.images == [{"url": img.data_url, "detail": "high"}]
    assert body["messages"][1]["content"][0] == {"type": "text", "text": "Frame 1:"}


def test_local_server_without_key_gets_placeholder(chat_server: ChatServer) -> None:
    generate(backend(chat_server))
    assert chat_server.requests[0].headers["authorization"] == "Bearer sk-no-key-required"


def test_base_url_from_environment(chat_server: ChatServer, openai_env: pytest.MonkeyPatch) -> None:
    openai_env.setenv("OPENAI_BASE_URL", chat_server.base_url)
    out = generate(OpenAIBackend("env-model", FAST))
    assert out.text and chat_server.requests[0].json["model"] == "env-model"


def test_registry_builds_it_with_colons_in_model(chat_server: ChatServer) -> None:
    b = create_backend("openai:llama3.2-vision:11b", {"openai": {"base_url": chat_server.base_url}})
    assert isinstance(b, OpenAIBackend) and b.model == "llama3.2-vision:11b"
    run(b, lambda x: x.generate(MSGS, GenerateConfig()))
    assert chat_server.requests[0].json["model"] == "llama3.2-vision:11b"


def test_registry_rejects_unknown_option() -> None:
    with pytest.raises(ConfigError, match=r"valid: .*base_url"):
        create_backend("openai:m", {"openai": {"bas_url": "http://127.0.0.1:1/v1"}})


def test_azure_routes_to_deployment(chat_server: ChatServer, openai_env: pytest.MonkeyPatch) -> None:
    openai_env.setenv("AZURE_OPENAI_API_KEY", KEY)
    b = OpenAIBackend("my-deploy", {"azure": True, "base_url": chat_server.root_url, "api_version": "2024-10-21"})
    assert generate(b).text
    req = chat_server.requests[0]
    assert req.path == "/openai/deployments/my-deploy/chat/completions?api-version=2024-10-21"
    assert req.headers["api-key"] == KEY


def test_azure_needs_api_version(chat_server: ChatServer) -> None:
    with pytest.raises(ConfigError, match="api_version"):
        OpenAIBackend("d", {"azure": True, "base_url": chat_server.root_url})


def test_client_survives_a_new_event_loop_and_aclose(chat_server: ChatServer) -> None:
    b = backend(chat_server)
    for _ in range(2):  # each asyncio.run is a new loop; aclose in between
        assert generate(b).text
    assert len(chat_server.requests) == 2


def test_new_event_loop_without_aclose_closes_sockets_cleanly(
    chat_server: ChatServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(repr(u.exc_value)))
    b = backend(chat_server)
    with warnings.catch_warnings():
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(3):  # asyncio.run closes the old loop's client at shutdown
            assert asyncio.run(b.generate(MSGS, GenerateConfig())).text
            gc.collect()
    assert len(chat_server.requests) == 3
    assert unraisable == []  # no unclosed socket or transport
    assert not [r for r in caplog.records if r.name == "asyncio"]  # no failed close on a dead loop


def test_identity_has_endpoint_but_no_secret(chat_server: ChatServer, openai_env: pytest.MonkeyPatch) -> None:
    openai_env.setenv("OPENAI_API_KEY", KEY)
    b = backend(chat_server, extra_body={"top_k": 5}, image_detail="low")
    ident = b.identity()
    assert ident == {
        "spec": "openai:test-model",
        "host": f"127.0.0.1:{chat_server.port}",
        "image_detail": "low",
        "extra_body": {"top_k": 5},
    }
    assert KEY not in repr(ident) and KEY not in repr(b)
    generate(b)  # a live client must not leak it either
    assert KEY not in repr(b)


# -- retries ---------------------------------------------------------------------------------


def test_retry_after_seconds_is_honoured(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.rate_limit(retry_after=0.4))
    start = time.perf_counter()
    out = generate(backend(chat_server, backoff_base=0.0))
    elapsed = time.perf_counter() - start
    assert elapsed >= 0.4 and out.latency_s >= 0.4
    assert out.extra["attempts"] == 2 and len(chat_server.requests) == 2
    gap = chat_server.requests[1].received_at - chat_server.requests[0].received_at
    assert gap >= 0.4


def test_retry_after_ms_is_honoured(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.rate_limit(retry_after_ms=300))
    out = generate(backend(chat_server, backoff_base=0.0))
    assert out.extra["attempts"] == 2
    assert chat_server.requests[1].received_at - chat_server.requests[0].received_at >= 0.3


def test_retry_after_capped_by_backoff_max(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.rate_limit(retry_after=30))
    start = time.perf_counter()
    generate(backend(chat_server, backoff_max=0.05))
    assert time.perf_counter() - start < 5


def test_transient_failures_are_retried(chat_server: ChatServer) -> None:
    chat_server.fail_next(["500", "503", "malformed", "empty", "disconnect", Failure.http(408, "timeout")])
    out = generate(backend(chat_server))
    assert out.text == "No, nothing harmful is shown."
    assert out.extra["attempts"] == 7 and len(chat_server.requests) == 7


def test_timeout_is_retried(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.hang(1.5))
    start = time.perf_counter()
    out = generate(backend(chat_server, timeout=0.3))
    assert out.extra["attempts"] == 2 and time.perf_counter() - start < 1.4


def test_retries_exhausted(chat_server: ChatServer) -> None:
    chat_server.fail_next(["500"] * 5)
    with pytest.raises(BackendError) as err:
        generate(backend(chat_server, max_retries=2))
    assert err.value.retryable is True
    assert "HTTP 500" in str(err.value) and "gave up after 3 attempt(s)" in str(err.value)
    assert len(chat_server.requests) == 3


def test_zero_retries(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.rate_limit(retry_after=0))
    with pytest.raises(BackendError, match="HTTP 429"):
        generate(backend(chat_server, max_retries=0))
    assert len(chat_server.requests) == 1


def test_unreachable_endpoint_during_generate_is_retryable() -> None:
    b = OpenAIBackend("m", {"base_url": f"http://127.0.0.1:{free_port()}/v1", "max_retries": 1, **FAST})
    with pytest.raises(BackendError, match="connection failed") as err:
        generate(b)
    assert err.value.retryable


# -- refusals and permanent errors -----------------------------------------------------------


@pytest.mark.parametrize("failure", ["content_policy", "azure_content_filter"])
def test_content_policy_rejection_is_a_refusal(chat_server: ChatServer, failure: str) -> None:
    chat_server.fail_next(failure)
    out = generate(backend(chat_server))
    assert out.refused and out.text == "" and out.finish_reason == "content_filter"
    assert "HTTP 400" in out.extra["error"] and len(chat_server.requests) == 1


def test_content_filter_finish_is_a_refusal(chat_server: ChatServer) -> None:
    chat_server.fail_next("content_filter")
    out = generate(backend(chat_server))
    assert out.refused and out.text == "" and len(chat_server.requests) == 1


def test_bad_key_is_permanent_with_fix(openai_env: pytest.MonkeyPatch) -> None:
    openai_env.setenv("OPENAI_API_KEY", "sk-wrong-key-0000000")
    with ChatServer(api_key=KEY) as srv:
        with pytest.raises(BackendError) as err:
            generate(backend(srv))
        assert len(srv.requests) == 1
    msg = str(err.value)
    assert err.value.retryable is False and "HTTP 401" in msg and msg.endswith("set OPENAI_API_KEY to a valid key")
    assert "sk-wrong-key-0000000" not in msg


def test_unknown_model_is_permanent_with_fix(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.http(404, "The model `nope` does not exist.", "model_not_found"))
    with pytest.raises(BackendError) as err:
        generate(backend(chat_server))
    msg = str(err.value)
    assert err.value.retryable is False
    assert f"model 'test-model' not found at {chat_server.base_url}" in msg and "/models" in msg


def test_other_400_is_permanent(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.http(400, "max_tokens is too large", "invalid_value"))
    with pytest.raises(BackendError, match="max_tokens is too large") as err:
        generate(backend(chat_server))
    assert err.value.retryable is False and len(chat_server.requests) == 1


def test_quota_429_is_not_retried(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.http(429, "You exceeded your current quota.", "insufficient_quota"))
    with pytest.raises(BackendError, match="quota") as err:
        generate(backend(chat_server))
    assert err.value.retryable is False and len(chat_server.requests) == 1


# -- concurrency -----------------------------------------------------------------------------


def test_max_in_flight_is_respected(chat_server: ChatServer) -> None:
    chat_server.latency = 0.1
    b = backend(chat_server, max_in_flight=4)
    outs = run(b, lambda x: asyncio.gather(*(x.generate(MSGS, GenerateConfig()) for _ in range(16))))
    assert len(outs) == 16 and chat_server.peak_in_flight == 4
    assert max(o.extra["queue_s"] for o in outs) > 0.15  # the last ones waited for a slot
    assert all(o.latency_s < 0.1 + 0.5 for o in outs)  # queueing is not counted as latency


def test_instances_share_the_endpoint_limit(chat_server: ChatServer) -> None:
    chat_server.latency = 0.1
    a, b = backend(chat_server, max_in_flight=3), backend(chat_server, max_in_flight=3)

    async def main() -> list[Output]:
        try:
            return await asyncio.gather(*(x.generate(MSGS, GenerateConfig()) for x in (a, b) for _ in range(6)))
        finally:
            await a.aclose()
            await b.aclose()

    assert len(asyncio.run(main())) == 12
    assert chat_server.peak_in_flight == 3


def test_sixty_four_concurrent_requests(chat_server: ChatServer) -> None:
    chat_server.latency = 1.5  # long enough for 64 connections to open on a loaded machine
    b = backend(chat_server)
    outs = run(b, lambda x: asyncio.gather(*(x.generate(MSGS, GenerateConfig()) for _ in range(64))))
    assert len(outs) == 64 and chat_server.peak_in_flight == 64  # all in flight at once


# -- check() ---------------------------------------------------------------------------------


def test_check_missing_key_for_openai_fails_fast() -> None:
    b = OpenAIBackend("gpt-4o")
    with pytest.raises(BackendUnavailableError) as err:
        run(b, lambda x: x.check())
    assert str(err.value) == (
        "OPENAI_API_KEY is not set: export it, or point [backends.openai] base_url at a local server"
    )
    with pytest.raises(BackendUnavailableError):  # generate fails the same way, before any I/O
        generate(b)


def test_check_missing_named_key_fails_fast(chat_server: ChatServer) -> None:
    b = backend(chat_server, api_key_env="TOGETHER_API_KEY")
    with pytest.raises(BackendUnavailableError, match="TOGETHER_API_KEY is not set"):
        run(b, lambda x: x.check())
    assert chat_server.log == []


def test_check_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    start = time.perf_counter()
    with pytest.raises(BackendUnavailableError) as err:
        run(OpenAIBackend("m", {"base_url": url}), lambda x: x.check())
    assert str(err.value) == f"cannot reach {url}: is the server running?"
    assert time.perf_counter() - start < 3


def test_check_accepts_any_http_answer() -> None:
    with ChatServer(models_status=500) as srv:  # transformers serve without $HF_HOME/hub
        run(backend(srv), lambda x: x.check())
        assert srv.log == [("GET", "/v1/models", 500)]
    with ChatServer() as srv:
        run(backend(srv), lambda x: x.check())


def test_check_rejected_key(openai_env: pytest.MonkeyPatch) -> None:
    openai_env.setenv("OPENAI_API_KEY", "sk-wrong-key-0000000")
    with ChatServer(api_key=KEY) as srv, pytest.raises(BackendUnavailableError, match=r"HTTP 401.*OPENAI_API_KEY"):
        run(backend(srv), lambda x: x.check())


# -- secrets ---------------------------------------------------------------------------------


def test_secrets_never_reach_errors_or_logs(
    chat_server: ChatServer, openai_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    openai_env.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    echo = f"got headers {{'Authorization': 'Bearer {KEY}'}} and key {KEY}"
    chat_server.fail_next([Failure.server_error(500, echo)] * 3)
    with pytest.raises(BackendError) as retry_err:
        generate(backend(chat_server, max_retries=2))
    chat_server.fail_next(Failure.http(400, echo, "invalid_value"))
    with pytest.raises(BackendError) as bad_err:
        generate(backend(chat_server))
    chat_server.fail_next(Failure.http(400, f"content policy; {echo}", "content_policy_violation"))
    refused = generate(backend(chat_server))

    texts = [str(retry_err.value), str(bad_err.value), repr(refused), caplog.text]
    assert "HTTP 500" in texts[0] and "HTTP 400" in texts[1] and refused.refused
    for text in texts:
        assert KEY not in text and "Zq81uXw0" not in text
    for err in (retry_err.value, bad_err.value):  # no SDK exception (holding headers) attached
        assert err.__cause__ is None and err.__context__ is None


# -- the direct HTTP path ------------------------------------------------------------------------

_NO_SDK = """
import asyncio, sys
from vhd.backends.base import GenerateConfig, Message
from vhd.backends.openai import OpenAIBackend

async def main():
    b = OpenAIBackend("m", {"base_url": sys.argv[1]})
    try:
        await b.check()
        out = await b.generate([Message("user", "Harmful?")], GenerateConfig())
    finally:
        await b.aclose()
    return out.text

text = asyncio.run(main())
print(text, "openai" in sys.modules)
"""


def test_chat_calls_never_import_the_sdk(chat_server: ChatServer) -> None:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-c", _NO_SDK, chat_server.base_url], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["No,", "nothing", "harmful", "is", "shown.", "False"]  # answered, SDK not loaded
    assert [method for method, _, _ in chat_server.log] == ["GET", "POST"]


def test_organization_and_project_are_sent_as_the_sdk_sends_them(
    chat_server: ChatServer, openai_env: pytest.MonkeyPatch
) -> None:
    openai_env.setenv("OPENAI_ORG_ID", "org-7")
    openai_env.setenv("OPENAI_PROJECT_ID", "proj-9")
    generate(backend(chat_server))
    headers = chat_server.requests[0].headers
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-7", "proj-9")
    assert (headers["accept"], headers["content-type"]) == ("application/json", "application/json")


def test_a_base_url_with_a_query_keeps_it_after_the_path(chat_server: ChatServer) -> None:
    b = OpenAIBackend("m", {"base_url": chat_server.base_url + "/?tenant=t1", **FAST})
    assert generate(b).text
    assert chat_server.requests[0].path == "/v1/chat/completions?tenant=t1"


def test_an_error_body_that_is_not_json_is_reported_as_text(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure(status=400, body=b"upstream said: bad image"))
    with pytest.raises(BackendError, match=r"HTTP 400: upstream said: bad image\)$") as err:
        generate(backend(chat_server))
    assert err.value.retryable is False


def test_the_batch_api_gets_an_sdk_client_closed_with_the_others(chat_server: ChatServer) -> None:
    b = backend(chat_server)

    async def main() -> tuple[object, object]:
        first = await b.sdk_client()
        again = await b.sdk_client()
        await b.aclose()
        return first, again

    first, again = asyncio.run(main())
    assert first is again and type(first).__name__ == "AsyncOpenAI"
    assert first.is_closed()  # type: ignore[attr-defined]
