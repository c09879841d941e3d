"""The HTTP client of the ``openai`` backend's chat calls: one aiohttp session per endpoint.

Chat calls are the hot path of ``vhd annotate`` (five or more a sample). On aiohttp (a C HTTP
parser, asyncio's own transports) a call costs about 0.8 ms of client CPU where httpx2 with its
connection pool cost about 1.8 (BENCHMARKS.md, ``benchmarks/http_client_cost.py``). The session is
set up to behave as the httpx client it replaces did, and no more trusting:

- **Proxies** come from ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` (either
  case), resolved once per endpoint, as httpx resolved them. Only ``http://`` and ``https://``
  proxies are spoken. Nothing else is read from the environment: aiohttp's ``trust_env`` would
  also read ``~/.netrc`` on every request (in a thread) and refuse any request that carries both a
  netrc login and the bearer key.
- **TLS** uses the context httpx builds (its CA bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``),
  so an ``https`` endpoint trusts exactly what it trusted before.
- **Redirects** are followed (a request fails at the 10th in a row); one to another origin loses the ``Authorization``
  header (aiohttp drops it, as httpx did). Cookies are ignored.
- **Replies** are read whole through `vhd.netread.read_capped`: never decompressed (the request
  asks for ``identity``; a compressed reply is refused), refused when announced over the byte
  cap, cut off at it otherwise. Header lines are capped by aiohttp (8,190 bytes, 128 headers).
  The caller wraps each request in ``asyncio.timeout`` (connect, headers and body, however slow);
  the session's own timeouts end a silent connection too.

Errors: a request that gets no reply raises `ConnectionFailed`; one that runs out of time,
`TimeoutError`; a reply over the limits, `vhd.netread.ReplyRefused`. A reply of any status is a
`Reply`.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vhd.errors import ConfigError
from vhd.netread import read_capped
from vhd.redaction import redact_url, remember_secrets_in

if TYPE_CHECKING:
    import aiohttp

__all__ = ["ConnectionFailed", "EndpointSession", "Reply", "env_proxy", "split_userinfo"]

MAX_REDIRECTS = 10
"""A request fails at the 10th redirect answer in a row (aiohttp's default; httpx allowed 20)."""


class ConnectionFailed(Exception):
    """A request that got no HTTP reply: refused, reset, a TLS failure, a bad redirect.

    Attributes:
        reason: The underlying error's class name (``ClientConnectorError``, ``SSLError``...).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Reply:
    """One HTTP reply, read whole.

    Attributes:
        status: The HTTP status.
        headers: Its headers (a case-insensitive mapping).
        body: Its body, within the byte cap.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes


def env_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (httpx's rules), or None.

    ``NO_PROXY`` wins; then the proxy for the URL's scheme, then ``ALL_PROXY``.

    Raises:
        ConfigError: A proxy of a scheme the client cannot speak (``socks5://``...), in one line.
    """
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()  # either case; lower case wins
    if parts.hostname and _bypassed(parts.hostname, proxies.get("no", "")):
        return None
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    if "://" not in proxy:  # "proxy:3128", as curl and httpx read it
        proxy = f"http://{proxy}"
    remember_secrets_in(proxy)  # user:password@ never reaches a message or a log
    scheme = urlsplit(proxy).scheme.lower()
    if scheme not in ("http", "https"):
        raise ConfigError(
            f"the proxy for {parts.hostname} is {redact_url(proxy)}: vhd's chat client speaks to http:// and "
            "https:// proxies only; set HTTPS_PROXY/HTTP_PROXY to one, or add the host to NO_PROXY"
        )
    return proxy


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without ``user:password@``, and the ``Authorization`` value httpx made of them.

    A base URL that carries a login (a gateway in front of a model server) is answered with
    HTTP Basic authentication in place of the bearer key, as the httpx client did.

    Returns:
        The URL without its login, and ``Basic ...`` (None when there is no login).
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    import base64
    from urllib.parse import unquote

    login = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    remember_secrets_in(url)
    host = parts.netloc.rsplit("@", 1)[1]
    token = base64.b64encode(login.encode()).decode()
    return parts._replace(netloc=host).geturl(), f"Basic {token}"


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` exempts ``host``: ``*``, the host itself, or a domain it is under.

    Entries may carry a scheme, a port, a leading ``.`` or ``*.`` (all ignored), as httpx reads them.
    """
    host = host.lower().rstrip(".")
    for entry in no_proxy.split(","):
        name = entry.strip().lower().split("://", 1)[-1].lstrip("*").lstrip(".")
        if name.startswith("["):  # [::1]:8000
            name = name[1:].split("]", 1)[0]
        elif name.count(":") == 1:  # host:port
            name = name.split(":", 1)[0]
        if entry.strip() == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


def _client_timeout(seconds: float) -> aiohttp.ClientTimeout:
    """A whole request within ``seconds``, connecting within at most 10 of them."""
    import aiohttp

    return aiohttp.ClientTimeout(total=seconds, sock_connect=min(seconds, 10.0))


class EndpointSession:
    """The connections to one endpoint, reused across its requests (keep-alive).

    Open it inside the event loop that will use it; close it with `aclose` in the same loop.

    Args:
        base_url: The endpoint's base URL (its proxy is looked up from it).
        headers: Sent with every request (the bearer key, content types, user agent).
        timeout: Seconds for a request from connecting to its last byte (connecting: at most 10).
        max_bytes: Largest reply body read.
        ssl_context: For ``https`` (None: Python's default context).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        timeout: float,
        max_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        import aiohttp

        self.max_bytes = max_bytes
        self.proxy = env_proxy(base_url)
        connector = aiohttp.TCPConnector(
            limit=0,  # the endpoint's max_in_flight bounds the requests (`vhd.backends.endpoints`)
            ssl=ssl_context if ssl_context is not None else True,
            ttl_dns_cache=60,
        )
        self.session: aiohttp.ClientSession = aiohttp.ClientSession(
            connector=connector,
            headers=dict(headers),
            timeout=_client_timeout(timeout),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=False,
        )
        self._errors: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError)

    async def request(self, method: str, url: Any, *, body: bytes | None = None, timeout: float | None = None) -> Reply:
        """Send one request and read its reply whole.

        Args:
            method: ``GET`` or ``POST``.
            url: Absolute URL (a ``yarl.URL`` prepared once is cheapest; a string works).
            body: The request body (JSON bytes), sent with its ``Content-Length``.
            timeout: This request's time limit, if shorter than the session's.

        Raises:
            ConnectionFailed: No reply.
            TimeoutError: Out of time.
            vhd.netread.ReplyRefused: A reply over the limits.
        """
        extra: dict[str, Any] = {} if timeout is None else {"timeout": _client_timeout(timeout)}
        try:
            async with self.session.request(
                method, url, data=body, proxy=self.proxy, max_redirects=MAX_REDIRECTS, **extra
            ) as response:
                try:
                    content = await read_capped(response.headers, response.content.iter_any(), self.max_bytes)
                except BaseException:
                    response.close()  # a half-read body: the connection is not reused
                    raise
                return Reply(response.status, response.headers, content)
        except TimeoutError:  # aiohttp's timeouts are TimeoutErrors (and ClientErrors): time, not connection
            raise
        except self._errors as exc:
            raise ConnectionFailed(type(exc).__name__) from None

    async def aclose(self) -> None:
        """Close every connection."""
        await self.session.close()
