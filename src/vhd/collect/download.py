"""Download one URL safely: redirects checked hop by hop, content sniffed, size capped mid-stream.

The body is streamed into a temporary file in the output folder's ``.partial/`` directory while
being hashed; the caller renames it into place or deletes it. On any failure (including
cancellation) the temporary file is removed before the exception leaves this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import httpx

from vhd.collect.blocklist import Digests
from vhd.collect.fetch_settings import FetchFailure, FetchSettings, format_size
from vhd.collect.netguard import blocked_reason, resolve_failed
from vhd.collect.sniff import SNIFF_BYTES, MediaType, describe, sniff
from vhd.collect.urls import check_url
from vhd.errors import VhdError
from vhd.records import Kind, UrlRow

RETRY_STATUSES: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth another attempt."""

_OK_STATUSES: Final = frozenset({200, 203})
_MAX_RETRY_AFTER: Final = 60.0


@dataclass
class Downloaded:
    """A complete download waiting in a temporary file.

    Attributes:
        tmp: The temporary file (inside ``.partial/``); the caller moves or deletes it.
        media: The sniffed container.
        size: Bytes written.
        digests: Content hashes.
        final_url: The URL after redirects.
        http_status: The final response's status.
        content_type: The declared ``Content-Type``, informational.
        attempts: Requests made, retries included.
    """

    tmp: Path
    media: MediaType
    size: int
    digests: Digests
    final_url: str
    http_status: int
    content_type: str | None
    attempts: int = 1


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, min(float(value.strip()), _MAX_RETRY_AFTER))
    except ValueError:
        return None


def _limit(kind: Kind | None, settings: FetchSettings) -> tuple[int, Kind]:
    """The byte limit for content of ``kind`` and the kind whose limit it is.

    Before the content is sniffed (no kind on the list row) the larger of the two limits applies,
    and it is named as the limit of the kind it belongs to.
    """
    if kind is None:
        kind = Kind.VIDEO if settings.max_video_bytes >= settings.max_image_bytes else Kind.IMAGE
    return (settings.max_image_bytes if kind is Kind.IMAGE else settings.max_video_bytes), kind


def _too_large(size: int, limit: tuple[int, Kind], declared: bool, url: str) -> FetchFailure:
    what = limit[1].value
    how = "declares" if declared else "sent more than"
    reason = f"server {how} {format_size(size)}, over the {what} limit of {format_size(limit[0])}"
    return FetchFailure("rejected", "too-large", f"{reason} (raise --max-{what}-size)", final_url=url)


class _Sink:
    """Writes accepted bytes to a temporary file while hashing them."""

    def __init__(self, partial_dir: Path, algorithms: list[str]) -> None:
        self.path = partial_dir / f"{uuid.uuid4().hex}.part"
        self.hashers = {name: hashlib.new(name) for name in algorithms}
        self.size = 0
        self._fh: IO[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self._fh is None:
            self._fh = open(self.path, "xb")  # noqa: SIM115 - closed in close()/discard()
        self._fh.write(data)
        for h in self.hashers.values():
            h.update(data)
        self.size += len(data)

    def close(self) -> Digests:
        if self._fh is None:
            self._fh = open(self.path, "xb")  # noqa: SIM115
        self._fh.close()
        return Digests(**{name: h.hexdigest() for name, h in self.hashers.items()})

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self.path.unlink(missing_ok=True)


async def _read_body(
    response: httpx.Response, row: UrlRow, settings: FetchSettings, sink: _Sink, url: str
) -> MediaType:
    declared_text = response.headers.get("content-length")
    declared = int(declared_text) if declared_text and declared_text.strip().isdigit() else None
    limit = _limit(row.kind, settings)
    if declared is not None and declared > limit[0]:
        raise _too_large(declared, limit, True, url)
    head = b""
    media: MediaType | None = None
    async for chunk in response.aiter_bytes():
        if media is None:
            head += chunk
            if len(head) < SNIFF_BYTES:
                continue
            media = _accept(head, row, url)
            limit = _limit(media.kind, settings)
            if declared is not None and declared > limit[0]:
                raise _too_large(declared, limit, True, url)
            chunk, head = head, b""
        if sink.size + len(chunk) > limit[0]:
            raise _too_large(sink.size + len(chunk), limit, False, url)
        sink.write(chunk)
    if media is None:
        media = _accept(head, row, url)
        limit = _limit(media.kind, settings)
        if len(head) > limit[0]:
            raise _too_large(len(head), limit, False, url)
        sink.write(head)
    return media


def _accept(head: bytes, row: UrlRow, url: str) -> MediaType:
    media = sniff(head)
    if media is None:
        reason = f"content is {describe(head)}, not an image or video"
        raise FetchFailure("rejected", "not-media", reason, final_url=url)
    if row.kind is not None and media.kind is not row.kind:
        raise FetchFailure(
            "rejected",
            "kind-mismatch",
            f"the list says {row.kind.value} but the content is {media.kind.value} ({media.name})",
            final_url=url,
        )
    return media


def _bad_redirect(reason: str, url: str) -> FetchFailure:
    return FetchFailure("rejected", "bad-redirect", reason, final_url=url)


def _shown(location: str) -> str:
    text = location.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 80 else text[:77] + "..."


def redirect_target(response: httpx.Response) -> str:
    """Return where a redirect response points, or refuse the hop.

    The target must be a URL the client can request and `check_url` accepts: http or https, a
    host (dotted-decimal IPv4, valid IDNA), a port in range.

    Raises:
        FetchFailure: ``failed``/``bad-redirect`` without a ``Location``; ``rejected``/``bad-redirect``
            for any other target that cannot or must not be fetched.
    """
    url = str(response.url)
    location = response.headers.get("location", "").strip()
    if not location:
        raise FetchFailure(
            "failed", "bad-redirect", f"HTTP {response.status_code} without a Location header", final_url=url
        )
    try:
        ref = httpx.URL(location)
        scheme = ref.scheme.lower()
        if scheme and scheme not in ("http", "https"):
            raise _bad_redirect(f"redirect to a {scheme}: URL refused ({_shown(location)})", url)
        if scheme and not ref.host:
            raise _bad_redirect(f"redirect to a URL without a host refused ({_shown(location)})", url)
        target = response.url.join(ref)
        _ = target.host  # decoding the host checks its xn-- labels
    except (httpx.InvalidURL, ValueError) as exc:
        detail = " ".join(str(exc).split())
        raise _bad_redirect(f"redirect to an invalid URL ({detail}): {_shown(location)}", url) from exc
    problem = check_url(str(target))
    if problem is not None:
        raise _bad_redirect(f"redirect refused: {problem}", url)
    return str(target)


async def refuse_bad_redirects(response: httpx.Response) -> None:
    """Refuse a bad redirect before httpx builds the request for it (an httpx response hook).

    httpx builds the next request of every redirect (even when not following it) and raises
    `httpx.InvalidURL` or a misleading `httpx.RemoteProtocolError` on a target it cannot parse;
    this hook runs first and turns such a hop into a ``bad-redirect`` outcome.
    """
    if response.has_redirect_location:
        redirect_target(response)


async def _attempt(
    client: httpx.AsyncClient, row: UrlRow, settings: FetchSettings, partial_dir: Path, algorithms: list[str]
) -> Downloaded:
    url = row.url
    for hop in range(settings.max_redirects + 1):
        try:
            request = client.build_request("GET", url)
        except (httpx.InvalidURL, ValueError) as exc:
            detail = " ".join(str(exc).split())
            if hop == 0:
                raise FetchFailure("invalid", "bad-row", f"URL cannot be requested ({detail}); fix the row") from exc
            raise _bad_redirect(f"redirect to an invalid URL ({detail})", url) from exc
        try:
            response = await client.send(request, stream=True)
        except (httpx.InvalidURL, UnicodeError) as exc:
            # httpx building the next request of a redirect that `refuse_bad_redirects` let through.
            detail = " ".join(str(exc).split())
            raise _bad_redirect(f"redirect to an invalid URL ({detail})", url) from exc
        try:
            if response.is_redirect:
                url = redirect_target(response)
                continue
            status = response.status_code
            if status not in _OK_STATUSES:
                raise FetchFailure(
                    "failed",
                    f"http-{status}",
                    f"HTTP {status} {response.reason_phrase}".strip(),
                    retryable=status in RETRY_STATUSES,
                    http_status=status,
                    retry_after=_retry_after(response.headers.get("retry-after")),
                    final_url=url,
                )
            sink = _Sink(partial_dir, algorithms)
            try:
                media = await _read_body(response, row, settings, sink, url)
                digests = sink.close()
            except BaseException:
                sink.discard()
                raise
            return Downloaded(sink.path, media, sink.size, digests, url, status, response.headers.get("content-type"))
        finally:
            await response.aclose()
    reason = f"more than {settings.max_redirects} redirects (raise --max-redirects)"
    raise FetchFailure("failed", "too-many-redirects", reason, final_url=url)


def _network_failure(exc: Exception, url: str) -> FetchFailure:
    blocked = blocked_reason(exc)
    if blocked is not None:
        return FetchFailure("rejected", "private-address", blocked, final_url=url)
    if resolve_failed(exc):
        return FetchFailure("failed", "dns", str(exc) or "cannot resolve the host", final_url=url)
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return FetchFailure("failed", "timeout", f"timed out ({text})", retryable=True, final_url=url)
    if isinstance(exc, httpx.RemoteProtocolError):
        return FetchFailure("failed", "truncated", f"connection broke off ({text})", retryable=True, final_url=url)
    if isinstance(exc, httpx.ConnectError):
        return FetchFailure("failed", "connect", f"cannot connect ({text})", retryable=True, final_url=url)
    if isinstance(exc, httpx.DecodingError):
        return FetchFailure("rejected", "bad-encoding", f"cannot decode the response ({text})", final_url=url)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return FetchFailure("rejected", "bad-url", text, final_url=url)
    return FetchFailure("failed", "network", f"{type(exc).__name__}: {text}", retryable=True, final_url=url)


async def download(
    client: httpx.AsyncClient,
    row: UrlRow,
    settings: FetchSettings,
    partial_dir: Path,
    algorithms: list[str],
) -> Downloaded:
    """Fetch one URL into a temporary file, with retries and backoff.

    Args:
        client: An httpx client that does not follow redirects itself.
        row: The URL and what the list says about it.
        settings: Limits, timeouts and retry policy.
        partial_dir: Where temporary files go (inside the output folder).
        algorithms: Hashes to compute (``sha256`` first; ``md5``/``sha1`` for block lists).

    Returns:
        The complete download (the caller owns the temporary file).

    Raises:
        FetchFailure: The last attempt failed; ``retryable`` says whether a later run may do better.
        VhdError: The temporary file cannot be written (disk full, permissions): the run stops.
    """
    problem = check_url(row.url)
    if problem is not None:
        raise FetchFailure("invalid", "bad-row", problem, final_url=row.url)
    attempt = 0
    while True:
        attempt += 1
        try:
            async with asyncio.timeout(settings.max_time):
                result = await _attempt(client, row, settings, partial_dir, algorithms)
            result.attempts = attempt
            return result
        except FetchFailure as exc:
            failure = exc
        except TimeoutError:
            reason = f"download took longer than {settings.max_time:g} s (raise --max-time)"
            failure = FetchFailure("failed", "timeout", reason, retryable=True)
        except OSError as exc:
            problem = exc.strerror or str(exc)
            raise VhdError(f"cannot write into {partial_dir.parent}: {problem}; free space or fix permissions") from exc
        except httpx.HTTPError as exc:
            failure = _network_failure(exc, row.url)
        failure.final_url = failure.final_url or row.url
        if not failure.retryable or attempt > settings.retries:
            failure.attempts = attempt
            raise failure
        delay = failure.retry_after if failure.retry_after is not None else settings.backoff * 2 ** (attempt - 1)
        await asyncio.sleep(delay * (1 + 0.25 * random.random()))
