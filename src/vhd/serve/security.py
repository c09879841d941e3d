"""The review app's guard: token, host check, cross-site-request protection and strict headers.

One ASGI middleware in front of every route:

- **Token.** When the app has a token (``--auth-token-env``), every request must carry it, as
  ``Authorization: Bearer TOKEN`` or through the ``vhd_token`` cookie the login page sets (an HMAC
  of the token); only the login page and the static files are open. Comparisons are constant-time.
- **Host.** Without a token (loopback only) a request must name a loopback host, so a web page
  elsewhere cannot reach the app through DNS rebinding.
- **Cross-site writes.** Every browser gets a random ``vhd_csrf`` cookie (``SameSite=Strict``);
  each form repeats it in a hidden field, checked by `vhd.serve.web.read_form`. A POST whose
  ``Origin`` is another site, or whose ``Sec-Fetch-Site`` says cross-site, is refused here.
- **Headers.** A strict Content-Security-Policy (scripts and styles only from the app's own
  static files, no inline code, no frames, forms only to the app), ``nosniff``, no referrer to other sites.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_COOKIE = "vhd_token"
CSRF_COOKIE = "vhd_csrf"
CSRF_KEY = "vhd.csrf"
"""Where the middleware leaves the browser's CSRF value in the ASGI scope for the handlers."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "media-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" would make form posts send Origin: null
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
OPEN_PATHS = ("/login", "/static/")


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header counts as none
        return {}
    return {k: m.value for k, m in jar.items()}


def host_name(host_header: str) -> str:
    """The host part of a ``Host`` header (IPv6 brackets kept)."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def same(a: str, b: str) -> bool:
    """Constant-time string equality."""
    return hmac.compare_digest(a.encode(), b.encode())


def login_cookie(token: str) -> str:
    """The value of the login cookie for a token (an HMAC of it: the token itself never sits in a cookie)."""
    return hmac.new(token.encode(), b"vhd serve login", hashlib.sha256).hexdigest()


def cookie_header(name: str, value: str, *, max_age: int | None = None) -> tuple[bytes, bytes]:
    """A ``Set-Cookie`` header: HttpOnly, SameSite=Strict, whole site."""
    extra = f"; Max-Age={max_age}" if max_age is not None else ""
    return b"set-cookie", f"{name}={value}; Path=/; HttpOnly; SameSite=Strict{extra}".encode()


class Guard:
    """The ASGI middleware described in the module docstring.

    Args:
        app: The application behind it.
        token: The access token, or None (then only loopback host names are accepted).
    """

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token

    async def _refuse(self, send: Send, status: int, text: str, location: str | None = None) -> None:
        headers = [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]
        if location:
            headers.append((b"location", location.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": text.encode()})

    def _authorised(self, headers: dict[str, str], cookies: dict[str, str]) -> bool:
        if self.token is None:
            return True
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and same(auth[7:].strip(), self.token):
            return True
        return same(cookies.get(TOKEN_COOKIE, ""), login_cookie(self.token))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then pass it on with the security headers added to the response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        cookies = _cookies(headers)
        path = str(scope.get("path", ""))
        if self.token is None and host_name(headers.get("host", "")) not in LOOPBACK_NAMES:
            await self._refuse(send, 421, "this review app answers only on 127.0.0.1 / localhost")
            return
        if not path.startswith(OPEN_PATHS) and not self._authorised(headers, cookies):
            if scope.get("method") == "GET" and "text/html" in headers.get("accept", ""):
                await self._refuse(send, 303, "log in first", location="/login")
            else:
                await self._refuse(send, 401, "missing or wrong token: log in at /login or send Authorization: Bearer")
            return
        if scope.get("method") not in ("GET", "HEAD"):
            origin = headers.get("origin")
            host = headers.get("host", "")
            fetch_site = headers.get("sec-fetch-site", "same-origin")
            cross = origin is not None and origin.split("://", 1)[-1] != host
            if cross or fetch_site not in ("same-origin", "none"):
                await self._refuse(send, 403, "cross-site request refused")
                return
        csrf = cookies.get(CSRF_COOKIE) or ""
        fresh = len(csrf) < 20
        if fresh:
            csrf = secrets.token_urlsafe(24)
        scope[CSRF_KEY] = csrf

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
                if fresh:
                    message["headers"].append(cookie_header(CSRF_COOKIE, csrf))
            await send(message)

        await self.app(scope, receive, send_with_headers)


class RateLimit:
    """A small per-client limit (a token bucket per address): ``burst`` tries at once, then one per ``every`` seconds.

    What stops a token from being guessed at speed through ``POST /login``. At most ``clients``
    addresses are remembered (the least recently seen are forgotten first), so the table stays small.

    Args:
        burst: Tries a client may make at once.
        every: Seconds until one more try is allowed.
        clients: Addresses remembered.
    """

    def __init__(self, burst: int = 5, every: float = 6.0, clients: int = 4096) -> None:
        self.burst = burst
        self.every = every
        self.clients = clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, client: str, now: float | None = None) -> float:
        """Take one try for ``client``: 0 when allowed, else the seconds to wait before the next."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, at = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) / self.every)
            allowed = tokens >= 1.0
            self._buckets[client] = (tokens - 1.0 if allowed else tokens, now)
            while len(self._buckets) > self.clients:
                self._buckets.popitem(last=False)
            return 0.0 if allowed else (1.0 - tokens) * self.every
