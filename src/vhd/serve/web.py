"""What every page of the review app shares: the app's state, rendering, forms, filters and preferences.

Templates are Jinja2 with autoescaping on: model replies, reasons, notes and file names are
untrusted text and reach the page escaped. Forms are read here (URL-encoded, size-limited) and
their CSRF field checked against the browser's cookie (`vhd.serve.security`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from vhd.fileio import printable
from vhd.labels.files import CATEGORIES
from vhd.serve.security import CSRF_KEY, RateLimit, same
from vhd.serve.settings import ServeSettings, check_reviewer
from vhd.serve.thumbs import DEFAULT_LEVEL, LEVELS, Look, PreviewCache
from vhd.store.gallery import DECISIONS, DISAGREEMENTS, REVIEW_STATES, SORTS, STATUSES, GalleryFilter
from vhd.store.sqlite import Store

if TYPE_CHECKING:
    from jinja2 import Environment
    from starlette.requests import Request
    from starlette.responses import Response

MAX_FORM_BYTES = 64 * 1024
SHA256 = re.compile(r"[0-9a-f]{64}")
REVIEWER_COOKIE = "vhd_reviewer"
LEVEL_COOKIE = "vhd_level"
COLOUR_COOKIE = "vhd_colour"
REVEAL_COOKIE = "vhd_reveal_s"
REVEAL_SECONDS = (0, 3, 5, 10, 30)
"""Choices of "reveal for N seconds" (0: until the page is left)."""
PAGE_SIZE = 48
TOTAL_TTL_S = 10.0
"""How long the count of samples to review is reused (a page render stays fast on large stores)."""
FILTER_KEYS = (
    "decision",
    "status",
    "category",
    "source",
    "keyword",
    "generator",
    "split",
    "decided_by",
    "score_min",
    "score_max",
    "disagreement",
    "review",
    "queue_only",
)


class FormError(Exception):
    """A form that cannot be used (too large, wrong CSRF field); answered with 400 or 403."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class State:
    """The running app: settings, the open store, templates and the preview cache.

    Attributes:
        settings: How the app runs.
        store: The open store (thread-safe).
        env: The Jinja2 environment (autoescaping on).
        previews: Previews, made once (on disk beside the store) under a decode memory budget.
        logins: The per-client limit of login attempts.
        secret: Key of the reveal links (`reveal_key`), new on every start.
        queue_size: Samples in the loaded review queue (0: no queue).
        queue_skipped: Rows of the queue file left out, with the reason.
        total: Samples to review, as last counted (at ``total_at``, `time.monotonic`).
        histograms: A configuration's histogram counts with the time they were read
            (`vhd.serve.labelling.histograms`).
        instructions: The instructions panel of each configuration ('' for the newest), made once.
    """

    settings: ServeSettings
    store: Store
    env: Environment
    previews: PreviewCache = field(default_factory=PreviewCache)
    logins: RateLimit = field(default_factory=RateLimit)
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    queue_size: int = 0
    queue_skipped: list[tuple[int, str]] = field(default_factory=list)
    total: int = 0
    total_at: float = -1e9
    histograms: dict[str, tuple[float, tuple[list[int], dict[str, int]]]] = field(default_factory=dict)
    instructions: dict[str, Any] = field(default_factory=dict)


def make_env() -> Environment:
    """The Jinja2 environment of the app's templates, autoescaping every template."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=visible,
    )
    env.filters["short"] = lambda s: str(s)[:12]
    return env


_UNSEEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (a newline aside) and bidirectional controls: what `visible` shows escaped."""


def visible(value: Any) -> Any:
    r"""Every value a template prints: control and bidirectional characters shown as ``\x1b``, ``\u202e``.

    An escape sequence or a right-to-left override in a model's reply (or a file name) would
    otherwise reorder or hide what the page shows, e.g. make "harmful" read as "lufmrah"; they are
    shown escaped, as the CLI shows them (`vhd.fileio.printable`). Newlines are kept. Markup made
    by the templates themselves is left alone.
    """
    from markupsafe import Markup

    if isinstance(value, str) and not isinstance(value, Markup) and _UNSEEN.search(value):
        return printable(value, multiline=True)
    return value


def state(request: Request) -> State:
    """The app's `State`."""
    st: State = request.app.state.vhd
    return st


def reviewer(request: Request) -> str:
    """The reviewer of this browser: its settings cookie, or the app's ``--reviewer``."""
    name = request.cookies.get(REVIEWER_COOKIE, "")
    try:
        return check_reviewer(name) if name else state(request).settings.reviewer
    except Exception:
        return state(request).settings.reviewer


def look(request: Request, *, clear: bool = False) -> Look:
    """This reviewer's preview settings (level, grayscale unless colour was chosen) from the browser's cookies."""
    raw = request.cookies.get(LEVEL_COOKIE, "")
    level = int(raw) if raw.isdigit() and int(raw) in LEVELS else DEFAULT_LEVEL
    return Look(level=level, gray=request.cookies.get(COLOUR_COOKIE) != "1", clear=clear)


def reveal_seconds(request: Request) -> int:
    """How long this reviewer's reveals last, in seconds (0: until the page is left)."""
    raw = request.cookies.get(REVEAL_COOKIE, "0")
    return int(raw) if raw.isdigit() and int(raw) in REVEAL_SECONDS else 0


def reveal_key(request: Request, sample_id: str) -> str:
    """The ``clear`` value that unlocks one sample's clear image for this browser.

    An HMAC of the browser's CSRF cookie and the sample id under a secret of this app run: only a
    page revealed by a click carries it, and it opens that sample only, in that browser only.
    """
    csrf = str(request.scope.get(CSRF_KEY, ""))
    return hmac.new(state(request).secret, f"{csrf}:{sample_id}".encode(), hashlib.sha256).hexdigest()[:32]


def thumb_url(sample_id: str, frame: int, lk: Look, key: str = "") -> str:
    """The root-relative preview URL (``/thumb/<id>`` for the first frame with default settings).

    A clear look needs ``key`` (`reveal_key`).
    """
    query: dict[str, int] = {}
    if frame:
        query["frame"] = frame
    if lk.level != DEFAULT_LEVEL:
        query["level"] = lk.level
    if not lk.gray:
        query["colour"] = 1
    pairs: dict[str, int | str] = dict(query)
    if lk.clear:
        pairs["clear"] = key
    return f"/thumb/{sample_id}" + (f"?{urlencode(pairs)}" if pairs else "")


async def read_form(request: Request) -> dict[str, list[str]]:
    """Read a URL-encoded form and check its CSRF field.

    Raises:
        FormError: The body is too large, or the CSRF field is missing or wrong (403).
    """
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise FormError("form too large", 413)
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    sent = (form.get("csrf") or [""])[0]
    expected = str(request.scope.get(CSRF_KEY, ""))
    if not expected or not same(sent, expected):
        raise FormError("the form's security token is missing or stale: reload the page and try again", 403)
    return form


def one(form: dict[str, list[str]], key: str, default: str = "") -> str:
    """The first value of a form field."""
    return (form.get(key) or [default])[0]


def safe_back(target: str, default: str = "/") -> str:
    """A redirect target inside the app (a root-relative path), else ``default``."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target and "\n" not in target:
        return target
    return default


def parse_filter(request: Request) -> tuple[GalleryFilter, str, str | None, list[str]]:
    """The gallery's filters, sort and page cursor from the query string; bad values are ignored with a note.

    Returns:
        ``(filter, sort, after, notes)``.
    """
    st = state(request)
    q = request.query_params
    notes: list[str] = []
    flt = GalleryFilter(
        set_name=st.settings.set_name, reviewer=reviewer(request), reviews_per_sample=st.settings.reviews_per_sample
    )
    config = q.get("config", "").strip().lower()
    configs = st.store.gallery_configs()
    if config:  # else each sample shows its newest verdict, whichever configuration gave it
        matches = [c for c in configs if c.startswith(config)]
        if len(matches) == 1:
            flt.config_hash = matches[0]
        else:
            notes.append(f"ignored config={config[:20]!r}: {len(matches)} configurations match; pick one in the list")
    allowed: dict[str, tuple[str, ...]] = {
        "decision": DECISIONS,
        "status": STATUSES,
        "disagreement": DISAGREEMENTS,
        "review": REVIEW_STATES,
        "category": tuple(name for _, name in CATEGORIES),
    }
    for key in FILTER_KEYS:
        value = q.get(key, "").strip()
        if not value:
            continue
        if key in allowed and value not in allowed[key]:
            notes.append(f"ignored {key}={value[:40]!r}: use one of {', '.join(allowed[key])}")
        elif key in ("score_min", "score_max"):
            try:
                setattr(flt, key, float(value))
            except ValueError:
                notes.append(f"ignored {key}={value[:40]!r}: give a number between 0 and 1")
        elif key == "queue_only":
            flt.queue_only = value == "1"
        else:
            setattr(flt, key, value[:200])
    sort = q.get("sort", "queue" if st.queue_size else "ingest")
    if sort not in SORTS:
        notes.append(f"ignored sort={sort[:40]!r}: use one of {', '.join(SORTS)}")
        sort = "ingest"
    elif sort == "queue" and not st.queue_size:
        notes.append("no review queue is loaded (start with --queue FILE): showing ingest order")
        sort = "ingest"
    flt.latest = flt.config_hash is None  # filters and orders then read the verdict each card shows
    after = q.get("after")
    if after is not None and not SHA256.fullmatch(after):
        notes.append("ignored a malformed page cursor")
        after = None
    return flt, sort, after, notes


def filter_query(flt: GalleryFilter, sort: str, config: str | None = None) -> str:
    """The query string that reproduces a gallery view (empty for the default view)."""
    pairs: dict[str, Any] = {k: ("1" if v is True else v) for k, v in flt.active().items()}
    if config:
        pairs["config"] = config
    if sort != "ingest":
        pairs["sort"] = sort
    return urlencode(pairs)


def render(request: Request, template: str, status: int = 200, **values: Any) -> Response:
    """Render a template with the values every page needs (settings, CSRF field, reviewer, progress)."""
    from starlette.responses import HTMLResponse

    st = state(request)
    queue = st.queue_size > 0
    now = time.monotonic()
    if now - st.total_at > TOTAL_TTL_S:  # counting a million samples takes a while: once in a while
        st.total, st.total_at = st.store.review_total(queue=queue), now
    done, total = st.store.review_progress(st.settings.set_name, queue=queue, total=st.total)
    batch = st.store.last_batch(st.settings.set_name, reviewer(request))  # what the undo button takes back
    lk = look(request)
    page = st.env.get_template(template).render(
        settings=st.settings,
        level=lk.level,
        level_text=f"preview level {lk.level} of {max(LEVELS)}, {'grayscale' if lk.gray else 'colour'}",
        reveals_hour=st.store.reveal_count(reviewer(request), since=time.time() - 3600),
        csrf=str(request.scope.get(CSRF_KEY, "")),
        me=reviewer(request),
        progress=(done, total),
        last_review=batch[0] if batch else None,
        undo_count=len(batch),
        back=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        **values,
    )
    return HTMLResponse(page, status_code=status)
