"""Settings, failures and result records of `vhd fetch` (no I/O here)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from vhd.errors import ConfigError
from vhd.version import version

MIB: Final = 1 << 20
GIB: Final = 1 << 30

STATUSES: Final = ("ok", "failed", "rejected", "blocked", "invalid", "duplicate")
"""Outcome statuses: fetched; link dead or unreachable; content refused; on the block list;
malformed row; repeated row."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS: Final = {"": 1, "k": 1 << 10, "m": MIB, "g": GIB, "t": 1 << 40}


def parse_size(text: str | int) -> int:
    """Parse a byte size such as ``50MB``, ``2G``, ``512k`` or ``1048576``.

    Units are binary (``1MB`` = 1 MiB = 1,048,576 bytes), like vhd's image file limit.

    Raises:
        ConfigError: The text is not a size, or is zero.
    """
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(text)
        if not m:
            raise ConfigError(f"{text!r} is not a size; write e.g. 50MB, 2GB or 800000")
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value < 1:
        raise ConfigError(f"a size limit must be at least 1 byte, got {text!r}")
    return value


def format_size(n: int) -> str:
    """Format a byte count for messages (``50.0 MiB``)."""
    if n >= GIB:
        return f"{n / GIB:.1f} GiB"
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"


@dataclass(frozen=True)
class FetchSettings:
    """How `vhd fetch` downloads.

    Attributes:
        concurrency: Downloads in flight at once.
        per_host: Downloads in flight at once to one host.
        timeout: Seconds allowed to connect, and between two reads of a response.
        max_time: Seconds allowed for one whole download attempt.
        retries: Further attempts after a timeout, a dropped connection, HTTP 408/425/429 or 5xx.
        backoff: Seconds before the first retry; doubled for each further one (a server's
            ``Retry-After`` is honoured up to 60 s).
        max_image_bytes: Larger images are abandoned mid-stream.
        max_video_bytes: Larger videos are abandoned mid-stream.
        max_redirects: Redirects followed per URL.
        allow_private: Fetch from loopback, private and link-local addresses too.
        allow_networks: Networks (CIDR) allowed although not public.
        recheck: Fetch again URLs an earlier run already fetched (the link-liveness check).
        user_agent: The ``User-Agent`` header.
        verify_tls: Verify HTTPS certificates.
    """

    concurrency: int = 32
    per_host: int = 4
    timeout: float = 30.0
    max_time: float = 900.0
    retries: int = 3
    backoff: float = 0.5
    max_image_bytes: int = 50 * MIB
    max_video_bytes: int = 2 * GIB
    max_redirects: int = 5
    allow_private: bool = False
    allow_networks: tuple[str, ...] = ()
    recheck: bool = False
    user_agent: str = f"vhd/{version()} (dataset fetcher)"
    verify_tls: bool = True

    def __post_init__(self) -> None:
        checks = [
            (self.concurrency >= 1, f"concurrency must be at least 1, got {self.concurrency}"),
            (self.per_host >= 1, f"per-host must be at least 1, got {self.per_host}"),
            (self.timeout > 0, f"timeout must be positive, got {self.timeout}"),
            (self.max_time > 0, f"max-time must be positive, got {self.max_time}"),
            (self.retries >= 0, f"retries must be 0 or more, got {self.retries}"),
            (self.backoff >= 0, f"backoff must be 0 or more, got {self.backoff}"),
            (self.max_image_bytes >= 1, "the image size limit must be at least 1 byte"),
            (self.max_video_bytes >= 1, "the video size limit must be at least 1 byte"),
            (self.max_redirects >= 0, f"max-redirects must be 0 or more, got {self.max_redirects}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        from vhd.collect.addresses import parse_networks

        try:
            parse_networks(self.allow_networks)
        except ValueError as exc:
            raise ConfigError(f"--allow-network: {exc}") from exc


class FetchFailure(Exception):
    """One download did not produce an acceptable file.

    Attributes:
        status: ``failed`` (the link) or ``rejected`` (the content or the target).
        error: Short code (see `FetchOutcome.error`).
        reason: One line for people.
        retryable: Whether another attempt may succeed.
        http_status: Last HTTP status, if any.
        retry_after: Seconds the server asked to wait, if it did.
        final_url: The URL being fetched when it failed.
        attempts: Requests made, retries included (set by `download`).
    """

    def __init__(
        self,
        status: str,
        error: str,
        reason: str,
        *,
        retryable: bool = False,
        http_status: int | None = None,
        retry_after: float | None = None,
        final_url: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.error = error
        self.reason = reason
        self.retryable = retryable
        self.http_status = http_status
        self.retry_after = retry_after
        self.final_url = final_url
        self.attempts = 1


@dataclass
class FetchOutcome:
    """What happened to one row of a URL list (one line of the fetch log and of the report).

    Attributes:
        url: The URL as listed.
        line: Its line in the list (0 when unknown, e.g. a URL only in an earlier run's log).
        status: ``ok``, ``failed`` (dead or unreachable link), ``rejected`` (content refused),
            ``blocked`` (on the block list, quarantined), ``invalid`` (malformed row) or
            ``duplicate`` (URL listed twice).
        error: Short code of what went wrong (``http-404``, ``timeout``, ``dns``, ``connect``,
            ``truncated``, ``private-address``, ``bad-redirect``, ``too-many-redirects``,
            ``too-large``, ``not-media``, ``kind-mismatch``, ``hash-mismatch``,
            ``invalid-media``, ``blocklist``, ``bad-row``, ``unexpected``...); empty when ok.
        reason: One line for people; empty when ok.
        retryable: Whether running again may succeed (timeouts, dropped connections, 429, 5xx).
        http_status: The last HTTP status received, if any.
        attempts: Requests made in this run.
        kind: ``image`` or ``video`` (sniffed from the content).
        format: Container sniffed from the content (``jpeg``, ``mp4``...).
        bytes: Size of the content.
        sha256: Content hash (the sample id; the file is ``<sha256><ext>`` in the output folder).
        path: The file, relative to the output folder (the quarantine file when blocked).
        final_url: Where the content came from after redirects.
        content_type: The ``Content-Type`` the server declared (informational only).
        keyword: From the list.
        source: From the list (``real``/``synthetic``).
        id: From the list.
        meta: Other columns of the list.
        previous_sha256: With ``recheck``, the hash an earlier run got, when it differs.
        fetched_at: Unix time of the outcome.
        this_run: Whether this run produced it (False: kept from an earlier run's log).
    """

    url: str
    line: int = 0
    status: str = "ok"
    error: str = ""
    reason: str = ""
    retryable: bool = False
    http_status: int | None = None
    attempts: int = 0
    kind: str | None = None
    format: str | None = None
    bytes: int | None = None
    sha256: str | None = None
    path: str | None = None
    final_url: str | None = None
    content_type: str | None = None
    keyword: str | None = None
    source: str | None = None
    id: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    previous_sha256: str | None = None
    fetched_at: float = 0.0
    this_run: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (the fetch log's record)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FetchOutcome:
        """Build an outcome from `to_dict` output, ignoring unknown keys."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)


REPORT_COLUMNS: Final = (
    "line",
    "url",
    "status",
    "error",
    "reason",
    "retryable",
    "http_status",
    "attempts",
    "kind",
    "format",
    "bytes",
    "sha256",
    "path",
    "final_url",
    "keyword",
    "source",
    "previous_sha256",
    "fetched_at",
    "this_run",
)
"""Columns of the CSV report, in order."""


@dataclass
class FetchReport:
    """Result of a fetch: one outcome per row of the URL list, in list order.

    Attributes:
        out: The output folder.
        outcomes: Every row's outcome (rows fetched by an earlier run carry ``this_run=False``).
        elapsed_s: Wall time of this run.
        report_path: Where the report was written.
        manifest_path: ``OUT/manifest.csv``.
    """

    out: Path
    outcomes: list[FetchOutcome] = field(default_factory=list)
    elapsed_s: float = 0.0
    report_path: Path | None = None
    manifest_path: Path | None = None

    def counts(self) -> dict[str, int]:
        """Outcomes per status (every status present, zero included)."""
        found = Counter(o.status for o in self.outcomes)
        return {status: found.get(status, 0) for status in STATUSES}

    @property
    def fetched(self) -> list[FetchOutcome]:
        """Files fetched by this run."""
        return [o for o in self.outcomes if o.status == "ok" and o.this_run]

    @property
    def retryable(self) -> int:
        """Failures that another run may fix (timeouts, dropped connections, 429, 5xx)."""
        return sum(1 for o in self.outcomes if o.status == "failed" and o.retryable)

    def exit_code(self, *, strict: bool = False) -> int:
        """Return the command's exit status.

        0 when every row reached a final outcome; 1 when retryable failures remain (or, with
        ``strict``, when any row is not ok).
        """
        if strict and any(o.status != "ok" for o in self.outcomes):
            return 1
        return 1 if self.retryable else 0

    def describe(self) -> list[str]:
        """Lines of a summary for people."""
        c = self.counts()
        new = self.fetched
        size = sum(o.bytes or 0 for o in new)
        rate = len(new) / self.elapsed_s if self.elapsed_s > 0 else 0.0
        lines = [
            f"fetched {len(new)} file(s) ({format_size(size)}) in {self.elapsed_s:.1f} s ({rate:.1f} files/s); "
            f"{c['ok'] - len(new)} fetched earlier",
            f"{c['failed']} failed ({self.retryable} retryable), {c['rejected']} rejected, {c['blocked']} blocked, "
            f"{c['invalid']} invalid row(s), {c['duplicate']} duplicate row(s)",
        ]
        errors = Counter(o.error for o in self.outcomes if o.status != "ok")
        if errors:
            lines.append("by reason: " + ", ".join(f"{code} {n}" for code, n in errors.most_common()))
        if self.retryable:
            lines.append("retryable failures are fetched again when you run the same command again")
        if self.report_path is not None:
            lines.append(f"report: {self.report_path}; manifest: {self.manifest_path}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (counts and paths; outcomes are in the report file)."""
        return {
            "out": str(self.out),
            "counts": self.counts(),
            "fetched_this_run": len(self.fetched),
            "retryable": self.retryable,
            "elapsed_s": round(self.elapsed_s, 3),
            "report": str(self.report_path) if self.report_path else None,
            "manifest": str(self.manifest_path) if self.manifest_path else None,
        }
