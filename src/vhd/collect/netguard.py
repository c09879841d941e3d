"""Keep a fetch of untrusted URLs on the public internet (server-side request forgery guard).

A URL list comes from anywhere: a row (or a redirect) pointing at ``http://169.254.169.254/`` (a
cloud metadata service), ``http://localhost:8080/admin`` or a host on the local network would let
whoever wrote the list reach machines only the fetching computer can reach. So by default every
address a host name resolves to is checked, every time a connection is opened (the first request
and every redirect alike), and the connection is made to the checked address itself, so a DNS
answer cannot change between the check and the connection. Loopback, private, link-local,
shared (carrier-grade NAT), multicast, reserved and unspecified addresses are refused, including
IPv4 addresses embedded in IPv6 ones (mapped, 6to4, NAT64, Teredo). ``allow_private`` turns the
guard off; ``allow_networks`` lets chosen networks through (an internal mirror, a test server).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import httpcore
import httpx

from vhd.collect.addresses import AddressGuard
from vhd.collect.fetch_settings import FetchSettings


class BlockedAddressError(httpcore.ConnectError):
    """A host resolved to an address the guard refuses (no connection was attempted)."""


class ResolveError(httpcore.ConnectError):
    """A host name could not be resolved."""


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that resolves host names itself and checks every address.

    The connection is opened to a checked address (never to the name), trying the addresses
    in resolver order. TLS still verifies the certificate against the host name, which httpcore
    passes separately.

    Args:
        guard: The address policy.
        inner: The backend that opens sockets (httpcore's default when None).
    """

    def __init__(self, guard: AddressGuard, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.guard = guard
        self._inner = inner or httpcore.AnyIOBackend()

    async def _resolve(self, host: str, port: int, timeout: float | None) -> list[str]:
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            return [host]
        except ValueError:
            pass
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP), timeout
            )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout} s") from exc
        except (socket.gaierror, UnicodeError) as exc:
            raise ResolveError(f"cannot resolve host {host} ({exc})") from exc
        addresses: list[str] = []
        for info in infos:
            address = str(info[4][0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise ResolveError(f"host {host} has no address")
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host``, refuse it if any address is not allowed, then connect."""
        addresses = await self._resolve(host, port, timeout)
        for address in addresses:
            problem = self.guard.problem(address)
            if problem is not None:
                shown = f"{host} is" if host == address else f"{host} resolves to {address}, which is"
                raise BlockedAddressError(
                    f"{shown} a {problem} address; refused (pass --allow-private or --allow-network to fetch from it)"
                )
        for address in addresses[:-1]:
            with contextlib.suppress(httpcore.ConnectError, httpcore.ConnectTimeout):
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
        return await self._inner.connect_tcp(
            addresses[-1], port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Unix sockets are never used for URLs."""
        raise BlockedAddressError("unix sockets are not fetched")

    async def sleep(self, seconds: float) -> None:
        """Sleep (delegated to the inner backend)."""
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's HTTP/1.1 transport whose connection pool opens sockets through `GuardedBackend`.

    httpx offers no public hook for the network backend, so the pool the parent builds is
    replaced by an identical one with the guarded backend (the test suite checks that the
    guard is in the path).

    Args:
        guard: The address policy.
        limits: Connection-pool limits.
        verify: TLS verification (True, False, a CA bundle path, or an SSL context to share).
    """

    def __init__(self, guard: AddressGuard, *, limits: httpx.Limits, verify: Any = True) -> None:
        ssl_context = (
            verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify, trust_env=False)
        )
        super().__init__(verify=ssl_context, limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=GuardedBackend(guard),
        )


SHARD_CONNECTIONS = 8
"""Connections per client in `guarded_clients`: httpcore's pool does work quadratic in its size
for every request, so many small pools serve high concurrency faster than one large pool."""


def guarded_clients(
    guard: AddressGuard,
    settings: FetchSettings,
    concurrency: int,
    response_hooks: Sequence[Callable[[httpx.Response], Awaitable[None]]] = (),
) -> list[httpx.AsyncClient]:
    """Build unopened httpx clients for a fetch, sharing one TLS context.

    They are guarded, follow no redirects, ignore proxy settings from the environment and ask for
    ``Accept-Encoding: identity`` (sizes are checked on the bytes stored).

    Args:
        guard: The address policy.
        settings: Timeouts, TLS verification and the User-Agent.
        concurrency: Requests that will be in flight at once; one client per `SHARD_CONNECTIONS`.
        response_hooks: httpx ``response`` event hooks (run on every response, before httpx
            builds the next request of a redirect).

    Returns:
        At least one client; use each as an async context manager.
    """
    shards = max(1, -(-concurrency // SHARD_CONNECTIONS))
    per_shard = max(1, -(-concurrency // shards))
    limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
    headers = {
        "User-Agent": settings.user_agent,
        "Accept-Encoding": "identity",
        "Accept": "image/*, video/*;q=0.9, */*;q=0.1",
    }
    ssl_context = httpx.create_ssl_context(settings.verify_tls, trust_env=False)
    return [
        httpx.AsyncClient(
            transport=GuardedTransport(guard, limits=limits, verify=ssl_context),
            headers=headers,
            timeout=httpx.Timeout(settings.timeout, pool=None),
            follow_redirects=False,
            trust_env=False,
            event_hooks={"response": list(response_hooks)},
        )
        for _ in range(shards)
    ]


def blocked_reason(exc: BaseException) -> str | None:
    """Return the guard's message when ``exc`` (or what caused it) is a refused address."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BlockedAddressError):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def resolve_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failed name resolution."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ResolveError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
