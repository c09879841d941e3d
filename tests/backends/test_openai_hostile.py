"""The openai backend against hostile endpoints: silence, trickles, endless, huge and deep replies.

Each endpoint here is a real loopback server (`tests.servers.chat_server.Failure`). A call must
end within ``timeout * (max_retries + 1)`` plus a little, or at the byte cap, with a
`BackendError` that says why; in a run, only that sample fails and the others are stored.
The per-test timeouts make the code before these limits fail by timeout rather than hang.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import vhd
from tests.annotate.test_api import judge_reply, make_images
from tests.servers.chat_server import ChatServer, Failure
from vhd.backends.base import Backend, GenerateConfig, Message, Output, ask
from vhd.backends.openai import OpenAIBackend
from vhd.backends.openai_payload import parse_response
from vhd.errors import BackendError, BackendUnavailableError
from vhd.netread import ReplyTooLarge
from vhd.records import Status
from vhd.store.sqlite import Store

pytestmark = pytest.mark.usefixtures("openai_env")

MSGS = [Message("system", "Answer yes or no."), Message("user", "Is this harmful?")]
FAST = {"backoff_base": 0.01, "backoff_max": 0.05}


def call(srv: ChatServer, **options: Any) -> tuple[Output | BackendError, float]:
    """One generate call; its result (or error) and the seconds it took."""
    backend = OpenAIBackend("test-model", {"base_url": srv.base_url, **FAST, **options})

    async def main() -> Output | BackendError:
        try:
            return await backend.generate(MSGS, GenerateConfig())
        except BackendError as exc:
            return exc
        finally:
            await backend.aclose()

    start = time.monotonic()
    result = asyncio.run(main())
    return result, time.monotonic() - start


@pytest.mark.timeout(30)
def test_configured_timeout_ends_a_call_whose_endpoint_goes_silent_after_headers(chat_server: ChatServer) -> None:
    chat_server.fail_next([Failure.stall_after_headers(40), Failure.stall_after_headers(40)])
    result, took = call(chat_server, timeout=1, max_retries=1)
    assert isinstance(result, BackendError) and result.retryable
    assert "timed out after 1 s" in str(result) and "gave up after 2 attempt(s)" in str(result)
    assert took < 1 * 2 + 3  # timeout * (retries + 1) + slack
    assert chat_server.chat_requests == 2


@pytest.mark.timeout(30)
@pytest.mark.parametrize("in_headers", [False, True], ids=["body", "headers"])
def test_a_reply_trickled_byte_by_byte_is_cut_off_at_the_deadline(chat_server: ChatServer, in_headers: bool) -> None:
    slow = Failure.trickle(every=0.5, seconds=40, in_headers=in_headers)  # each read within the read timeout
    chat_server.fail_next([slow, slow])
    result, took = call(chat_server, timeout=1.5, max_retries=1)
    assert isinstance(result, BackendError) and "timed out after 1.5 s" in str(result)
    assert took < 1.5 * 2 + 3


@pytest.mark.timeout(30)
def test_an_endless_chunked_reply_stops_at_the_byte_cap_and_is_not_retried(chat_server: ChatServer) -> None:
    chat_server.fail_next([Failure.endless(limit=256 << 20)])
    result, _ = call(chat_server, max_reply_bytes=1 << 20, max_retries=3)
    assert isinstance(result, BackendError)
    assert "went past the cap of 1 MiB" in str(result) and "max_reply_bytes" in str(result)
    assert chat_server.chat_requests == 1  # asking again would bring the same flood


@pytest.mark.timeout(30)
def test_a_reply_announced_over_the_cap_is_refused_before_its_body_is_read(chat_server: ChatServer) -> None:
    chat_server.fail_next([Failure.huge(200 << 20)])
    result, took = call(chat_server)
    assert isinstance(result, BackendError) and "is 200 MiB, over the cap of 32 MiB" in str(result)
    assert took < 5


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("depth", "said"), [(100_000, "nested 100000 levels deep"), (200_000, "200000 lists")])
def test_a_deeply_nested_reply_is_the_calls_error_not_a_recursion_error(
    chat_server: ChatServer, depth: int, said: str
) -> None:
    chat_server.fail_next([Failure.deep(depth)])
    result, _ = call(chat_server, max_retries=0)
    assert isinstance(result, BackendError) and said in str(result)


def test_a_reply_of_a_million_small_choices_is_refused_without_building_them() -> None:
    n = 300_000  # 8 MiB on the wire, under the byte cap; 600,000 objects once decoded
    body = Failure.many_choices(n).body
    tracemalloc.start()
    try:
        with pytest.raises(ReplyTooLarge, match="lists and objects"):
            parse_response(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(body)  # decoding them would take over 100 MB


def test_a_field_of_the_wrong_type_is_a_malformed_reply_not_a_crash() -> None:
    body = b'{"choices":[{"message":{"content":"No"}}],"usage":{"prompt_tokens":"many"}}'
    with pytest.raises(BackendError, match=r"malformed response.*ValueError"):
        parse_response(body)


def test_the_client_asks_for_an_uncompressed_reply_and_sends_the_configured_timeout(chat_server: ChatServer) -> None:
    result, _ = call(chat_server, timeout=7)
    assert isinstance(result, Output)
    assert chat_server.requests[0].headers["accept-encoding"] == "identity"
    assert chat_server.requests[0].headers.get("x-stainless-timeout") in (None, "7", "7.0")


# -- in a run: only the hostile sample fails -------------------------------------------------


def _annotate(tmp_path: Path, srv: ChatServer, *failures: Failure) -> list[tuple[str, str | None]]:
    make_images(tmp_path / "m", 3)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[backends.openai]\nbase_url = "{srv.base_url}"\nbackoff_base = 0.01\n'
        "timeout = 1\nmax_retries = 1\nmax_reply_bytes = 1048576\n"
    )
    srv.fail_next(list(failures))
    vhd.annotate([tmp_path / "m"], model="openai:m", store=tmp_path / "r.db", config=cfg, concurrency=1)
    with Store(tmp_path / "r.db") as db:
        return sorted((a.verdict.status.value, a.error) for _, a in db.iter_annotations())


@pytest.mark.timeout(60)
def test_a_run_goes_on_past_an_endpoint_that_stalls(tmp_path: Path) -> None:
    with ChatServer(reply=judge_reply) as srv:
        rows = _annotate(tmp_path, srv, Failure.stall_after_headers(30), Failure.trickle(every=0.4, seconds=30))
    assert [status for status, _ in rows] == ["error", "ok", "ok"]
    assert "timed out after 1 s" in str(rows[0][1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (Failure.deep(200_000), "200000 lists and objects"),
        (Failure.endless(limit=64 << 20), "went past the cap of 1 MiB"),
        (Failure.many_choices(1_000_000), "over the cap of 1 MiB"),
    ],
    ids=["deep", "endless", "million-choices"],
)
def test_a_run_stores_the_other_samples_when_one_reply_is_a_bomb(tmp_path: Path, failure: Failure, said: str) -> None:
    with ChatServer(reply=judge_reply) as srv:
        rows = _annotate(tmp_path, srv, failure)
    assert [status for status, _ in rows] == [Status.ERROR.value, "ok", "ok"]
    assert said in str(rows[0][1])


class _Raises(Backend):
    name = "raises"

    def __init__(self, exc: BaseException) -> None:
        super().__init__("m")
        self.exc = exc

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        raise self.exc


def test_anything_a_backend_raises_for_a_call_is_that_calls_error_but_run_faults_pass() -> None:
    got = asyncio.run(ask(_Raises(RecursionError("maximum recursion depth exceeded")), MSGS, GenerateConfig()))
    assert isinstance(got, BackendError) and not got.retryable
    assert str(got) == "raises:m: unexpected error (RecursionError: maximum recursion depth exceeded)"
    for fault in (MemoryError(), BackendUnavailableError("no key: export it")):
        with pytest.raises(type(fault)):
            asyncio.run(ask(_Raises(fault), MSGS, GenerateConfig()))
