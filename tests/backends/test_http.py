"""The openai backend's HTTP client (`vhd.backends.http`): proxies, redirects, TLS, netrc, limits.

Every exchange is with a real loopback server (`tests.servers.chat_server.ChatServer`), which also
serves as a forward proxy (it answers absolute-form request targets) and as an https endpoint.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from tests.servers.chat_server import ChatServer, Failure
from vhd.backends.base import GenerateConfig, Message, Output
from vhd.backends.http import ConnectionFailed, EndpointSession, env_proxy
from vhd.backends.openai import OpenAIBackend
from vhd.errors import BackendError, BackendUnavailableError, ConfigError
from vhd.netread import ReplyTooLarge

pytestmark = pytest.mark.usefixtures("openai_env")

KEY = "sk-test-Hq55wWx0AnotherRealLookingKey"
MSGS = [Message("system", "Answer yes or no."), Message("user", "Is this harmful?")]
PROXY_VARS = [v for name in ("http", "https", "all", "no") for v in (f"{name}_proxy", f"{name.upper()}_PROXY")]


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def generate(base_url: str, **options: Any) -> Output:
    backend = OpenAIBackend("test-model", {"base_url": base_url, "backoff_base": 0.01, "backoff_max": 0.05, **options})

    async def main() -> Output:
        try:
            return await backend.generate(MSGS, GenerateConfig())
        finally:
            await backend.aclose()

    return asyncio.run(main())


# -- proxies ---------------------------------------------------------------------------------


def test_the_proxy_comes_from_the_environment_as_httpx_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "proxy.example:8080")  # no scheme: http, as curl and httpx read it
    monkeypatch.setenv("NO_PROXY", "localhost, .internal,*.corp.example,10.0.0.5:8000")
    assert env_proxy("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert env_proxy("http://vllm.lab:8000/v1") == "http://proxy.example:8080"
    assert env_proxy("http://localhost:8000/v1") is None
    assert env_proxy("http://gpu1.internal:8000/v1") is None
    assert env_proxy("http://a.b.corp.example/v1") is None and env_proxy("http://corp.example/v1") is None
    assert env_proxy("http://10.0.0.5:8000/v1") is None
    assert env_proxy("http://notinternal:8000/v1") == "http://proxy.example:8080"  # a suffix, not a domain
    monkeypatch.setenv("NO_PROXY", "*")
    assert env_proxy("https://api.openai.com/v1") is None
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("ALL_PROXY", "http://all.example:1")
    assert env_proxy("http://vllm.lab:8000/v1") == "http://all.example:1"


def test_a_socks_proxy_is_a_one_line_error_that_never_shows_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://me:Pr0xyPassw0rd99@proxy.example:1080")
    with pytest.raises(ConfigError) as err:
        generate("http://vllm.lab:8000/v1")
    message = str(err.value)
    assert "http:// and https:// proxies only" in message and "NO_PROXY" in message and "\n" not in message
    assert "Pr0xyPassw0rd99" not in message


def test_a_chat_call_goes_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    with ChatServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.root_url)
        out = generate("http://model-host.invalid/v1")  # resolvable only by the proxy
    assert out.text
    assert proxy.requests[0].path == "http://model-host.invalid/v1/chat/completions"  # absolute form: proxied
    assert proxy.requests[0].headers["host"] == "model-host.invalid"


def test_no_proxy_sends_the_call_directly(chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert generate(chat_server.base_url).text
    assert chat_server.requests[0].path == "/v1/chat/completions"


# -- redirects, netrc ------------------------------------------------------------------------


def test_a_redirect_to_another_origin_loses_the_key_and_one_to_the_same_keeps_it(
    openai_env: pytest.MonkeyPatch,
) -> None:
    openai_env.setenv("OPENAI_API_KEY", KEY)
    with ChatServer() as a, ChatServer() as b:
        a.fail_next(
            [
                Failure(status=307, body=b"", headers={"Location": f"{a.base_url}/../v2/chat/completions"}),
                Failure(status=307, body=b"", headers={"Location": f"{b.base_url}/chat/completions"}),
            ]
        )
        assert generate(a.base_url).text  # same origin
        assert generate(a.base_url).text  # to b
    moved, _, again = a.requests
    assert a.requests[1].path == "/v2/chat/completions"
    assert a.requests[1].headers["authorization"] == f"Bearer {KEY}" and a.requests[1].body == moved.body
    assert "authorization" not in b.requests[0].headers  # the key stays with its origin
    assert b.requests[0].body == again.body  # 307: the same POST, body and all


def test_a_netrc_entry_for_the_host_changes_nothing(
    chat_server: ChatServer, tmp_path: Path, openai_env: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password elsewhere\n")
    netrc.chmod(0o600)
    openai_env.setenv("NETRC", str(netrc))
    openai_env.setenv("OPENAI_API_KEY", KEY)
    assert generate(chat_server.base_url).text
    assert chat_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_redirect_loop_ends_at_the_tenth_redirect_as_a_connection_failure(chat_server: ChatServer) -> None:
    hop = Failure(status=307, body=b"", headers={"Location": "/v1/chat/completions"})
    chat_server.fail_next([hop] * 12)
    with pytest.raises(BackendError, match=r"connection failed \(TooManyRedirects\).*after 1 attempt"):
        generate(chat_server.base_url, max_retries=0)
    assert chat_server.chat_requests == 10  # ten requests, each answered by a redirect


# -- TLS -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (certificate file, key file)."""
    need_module("cryptography", "pip install cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vhd test endpoint")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_file), str(key_file)


def test_an_https_endpoint_is_verified_against_the_ca_bundle_and_ssl_cert_file(
    certificate: tuple[str, str], openai_env: pytest.MonkeyPatch
) -> None:
    with ChatServer(tls=certificate) as srv:
        with pytest.raises(BackendError, match=r"connection failed \(ClientConnectorCertificateError\)"):
            generate(srv.base_url, max_retries=0)  # self-signed: not trusted by default
        assert srv.requests == []
        openai_env.setenv("SSL_CERT_FILE", certificate[0])  # trusted as httpx trusted it
        assert generate(srv.base_url).text
    assert srv.requests[0].path == "/v1/chat/completions"


def test_check_of_an_untrusted_https_endpoint_says_it_cannot_reach_it(certificate: tuple[str, str]) -> None:
    with ChatServer(tls=certificate) as srv:
        backend = OpenAIBackend("m", {"base_url": srv.base_url})

        async def main() -> None:
            try:
                await backend.check()
            finally:
                await backend.aclose()

        with pytest.raises(BackendUnavailableError, match="cannot reach"):
            asyncio.run(main())


# -- the session on its own ------------------------------------------------------------------


def test_the_session_reads_within_its_cap_and_reports_no_reply_as_connection_failed(chat_server: ChatServer) -> None:
    chat_server.fail_next([Failure.huge(5 << 20, announce=False), Failure(disconnect=True)])

    async def main() -> tuple[BaseException, BaseException, int]:
        session = EndpointSession(chat_server.root_url, headers={}, timeout=5.0, max_bytes=1 << 20)
        try:
            errors = []
            for _ in range(2):
                try:
                    await session.request("POST", f"{chat_server.base_url}/chat/completions", body=b"{}")
                except (ReplyTooLarge, ConnectionFailed) as exc:
                    errors.append(exc)
            reply = await session.request("GET", f"{chat_server.base_url}/models")
            return errors[0], errors[1], reply.status
        finally:
            await session.aclose()

    too_large, failed, status = asyncio.run(main())
    assert isinstance(too_large, ReplyTooLarge) and "went past the cap of 1 MiB" in str(too_large)
    assert isinstance(failed, ConnectionFailed) and failed.reason == "ServerDisconnectedError"
    assert status == 200  # the session goes on after both


def test_a_compressed_reply_is_refused_unread_and_not_asked_again(chat_server: ChatServer) -> None:
    import gzip

    bomb = gzip.compress(b"{" + b" " * (64 << 20) + b"}")  # 64 KiB on the wire, 64 MiB inflated
    chat_server.fail_next(Failure(status=200, body=bomb, headers={"Content-Encoding": "gzip"}))
    with pytest.raises(BackendError, match=r"compressed reply \(Content-Encoding: gzip\)"):
        generate(chat_server.base_url, max_retries=3)
    assert chat_server.chat_requests == 1
    assert chat_server.requests[0].headers["accept-encoding"] == "identity"


OK_BODY = b'{"choices":[{"message":{"content":"No"}}]}'


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (64 << 10) + b"\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(500)) + b"Content-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
        b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64),  # TLS where HTTP was expected
    ],
    ids=["64k-header-line", "500-headers", "length-and-chunked", "negative-length", "two-lengths", "bad-status", "tls"],
)
def test_a_malformed_answer_is_a_failed_connection_and_the_next_call_works(
    chat_server: ChatServer, answer: bytes
) -> None:
    chat_server.fail_next(Failure.raw(answer))
    backend = OpenAIBackend("test-model", {"base_url": chat_server.base_url, "max_retries": 0})

    async def twice() -> tuple[BaseException | Output, Output]:
        try:
            try:
                first: BaseException | Output = await backend.generate(MSGS, GenerateConfig())
            except BackendError as exc:
                first = exc
            return first, await backend.generate(MSGS, GenerateConfig())  # the same session goes on
        finally:
            await backend.aclose()

    first, second = asyncio.run(twice())
    assert isinstance(first, BackendError) and first.retryable and "\n" not in str(first)
    assert re.search(r"connection failed \(\w+\).*gave up after 1 attempt", str(first))
    assert second.text


def test_a_body_read_until_the_connection_closes_is_read_whole(chat_server: ChatServer) -> None:
    chat_server.fail_next(Failure.raw(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + OK_BODY))
    assert generate(chat_server.base_url).text == "No"


def test_a_login_in_the_base_url_is_sent_as_basic_auth_as_httpx_sent_it(
    chat_server: ChatServer, openai_env: pytest.MonkeyPatch
) -> None:
    import base64

    openai_env.setenv("OPENAI_API_KEY", KEY)
    assert generate(f"http://gate%40way:pa%3Ass@127.0.0.1:{chat_server.port}/v1").text
    request = chat_server.requests[0]
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"gate@way:pa:ss").decode()
    assert request.path == "/v1/chat/completions"
