"""The review app's writes (POST): label, segments and spans, undo, adjudicate, take down, settings, login.

Every form carries the browser's CSRF value (`vhd.serve.web.read_form`); every write goes through
a store method in one transaction, so two tabs (or two people) labelling at once never lose each
other's labels. After a label the browser goes on to the next sample of the same gallery view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

from vhd.errors import VhdError
from vhd.labels.files import CATEGORIES
from vhd.serve.pages import live_sample, next_sample, severity_scale
from vhd.serve.security import TOKEN_COOKIE, cookie_header, login_cookie, same
from vhd.serve.settings import check_reviewer
from vhd.serve.thumbs import DEFAULT_LEVEL, LEVELS
from vhd.serve.web import (
    COLOUR_COOKIE,
    LEVEL_COOKIE,
    REVEAL_COOKIE,
    REVEAL_SECONDS,
    REVIEWER_COOKIE,
    SHA256,
    FormError,
    filter_query,
    one,
    parse_filter,
    read_form,
    render,
    reviewer,
    safe_back,
    state,
)
from vhd.store.reviews import BATCH_MAX

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from vhd.store.review_spans import ReviewSpanRow

YEAR = 365 * 24 * 3600


def _redirect(url: str, *cookies: tuple[bytes, bytes]) -> Response:
    from starlette.responses import RedirectResponse

    response = RedirectResponse(url, status_code=303)
    for key, value in cookies:
        response.raw_headers.append((key, value))
    return response


def _refuse(request: Request, exc: FormError | VhdError) -> Response:
    status = exc.status if isinstance(exc, FormError) else 400
    return render(request, "message.html", status=status, title="Not done", message=str(exc))


async def label(request: Request) -> Response:
    """``POST /sample/<id>/label``: record a review (``harmful=yes|no``, categories, note, severity; ``adjudicate=1``).

    ``severity`` (with yes) must be a level of the scale of the policy whose run made the verdict shown.
    """
    st = state(request)
    sample_id = request.path_params["sample_id"]
    try:
        form = await read_form(request)
        if live_sample(request, sample_id) is None:
            raise FormError("no such sample in this store (removed?): go back to the gallery", 404)
        decision = one(form, "harmful")
        if decision not in ("yes", "no"):
            raise FormError("choose harmful (yes) or not harmful (no)")
        known = {name for _, name in CATEGORIES}
        categories = [c for c in form.get("categories", []) if c in known]
        severity = one(form, "severity").strip() or None
        if severity is not None and decision == "yes":  # a level of the shown verdict's policy scale
            shown = st.store.get_annotation(sample_id, parse_filter(request)[0].config_hash)
            scale = severity_scale(st.store, shown.run_id if shown else None)
            if severity not in scale:
                raise FormError(f"severity {severity!r} is not on the policy's scale ({', '.join(scale) or 'none'})")
        st.store.add_review(
            st.settings.set_name,
            sample_id,
            reviewer(request),
            harmful=decision == "yes",
            categories=categories,
            note=one(form, "note").strip()[:2000],
            adjudication=one(form, "adjudicate") == "1",
            reviews_per_sample=st.settings.reviews_per_sample,
            severity=severity if decision == "yes" else None,
        )
    except (FormError, VhdError) as exc:
        return _refuse(request, exc)
    flt, sort, _, _ = parse_filter(request)
    query = filter_query(flt, sort, request.query_params.get("config"))
    following = next_sample(request, flt, sort, sample_id)
    suffix = f"?{query}" if query else ""
    return _redirect(f"/sample/{following}{suffix}" if following else f"/{suffix}")


async def label_bulk(request: Request) -> Response:
    """``POST /label``: the same review of many samples at once (a bulk label from the gallery), then back.

    ``scope=selected`` (the default) labels the samples in ``ids``; ``scope=view`` every sample of the
    gallery view in the query string (its filters), up to `BATCH_MAX`. The reviews form one batch:
    one undo takes them all back.
    """
    st = state(request)
    try:
        form = await read_form(request)
        decision = one(form, "harmful")
        if decision not in ("yes", "no"):
            raise FormError("choose harmful (yes) or not harmful (no)")
        if one(form, "scope") == "view":
            flt, sort, _, _ = parse_filter(request)
            ids = [row.sample_id for row in st.store.gallery_page(flt, sort=sort, limit=BATCH_MAX + 1)]
            if len(ids) > BATCH_MAX:
                raise FormError(f"this view holds more than {BATCH_MAX} samples: narrow the filters first")
        else:
            ids = [i for i in form.get("ids", []) if SHA256.fullmatch(i)]
        if not ids:
            raise FormError("select one sample or more first (click a card's box, or x on a card)")
        known = {name for _, name in CATEGORIES}
        _, skipped = st.store.add_reviews(
            st.settings.set_name,
            ids,
            reviewer(request),
            harmful=decision == "yes",
            categories=[c for c in form.get("categories", []) if c in known],
            reviews_per_sample=st.settings.reviews_per_sample,
        )
    except (FormError, VhdError) as exc:
        return _refuse(request, exc)
    if skipped:
        lines = "; ".join(f"{sid[:12]} {why}" for sid, why in skipped[:10])
        message = f"{len(ids) - len(skipped)} labelled; {len(skipped)} skipped: {lines}"
        return render(request, "message.html", title="Partly done", message=message)
    return _redirect(safe_back(one(form, "back", "/")))


async def undo(request: Request) -> Response:
    """``POST /undo``: undo this reviewer's newest review (or ``review_id``), then show that sample again.

    A bulk label is undone whole and goes back to the page the undo was sent from.
    """
    st = state(request)
    try:
        form = await read_form(request)
        raw = one(form, "review_id")
        review_id = int(raw) if raw.isdigit() else None
    except FormError as exc:
        return _refuse(request, exc)
    who = reviewer(request)
    batch = st.store.last_batch(st.settings.set_name, who)
    undone = st.store.undo_review(
        st.settings.set_name, who, review_id, reviews_per_sample=st.settings.reviews_per_sample
    )
    back = safe_back(one(form, "back", "/"))
    if undone is None or (len(batch) > 1 and batch[0].id == undone.id):
        return _redirect(back)
    # the view the reviewer was in, on the undone sample (a reveal is never carried over)
    query = urlencode([(k, v) for k, v in parse_qsl(urlsplit(back).query) if k not in ("reveal", "after")])
    return _redirect(f"/sample/{undone.sample_id}" + (f"?{query}" if query else ""))


async def remove(request: Request) -> Response:
    """``POST /sample/<id>/remove``: take a sample down (`vhd remove` semantics) after confirmation."""
    from vhd.curate.remove import remove_samples

    st = state(request)
    sample_id = request.path_params["sample_id"]
    try:
        form = await read_form(request)
        if one(form, "confirm") != "yes":
            raise FormError("tick the confirmation to take the sample down")
        if live_sample(request, sample_id) is None:
            raise FormError("no such sample in this store (already removed?)", 404)
    except FormError as exc:
        return _refuse(request, exc)
    reason = one(form, "reason").strip()[:500] or "takedown from the review app"
    remove_samples(st.store, [sample_id], reason=reason, requested_by=reviewer(request))
    st.previews.forget(sample_id)  # no copy of a taken-down sample's media stays in the preview cache
    st.total_at = -1e9  # count again
    return render(request, "message.html", title="Taken down", message=f"sample {sample_id[:12]} was removed: {reason}")


async def save_settings(request: Request) -> Response:
    """``POST /settings``: reviewer name, preview level, colour and reveal time, kept in this browser's cookies."""
    try:
        form = await read_form(request)
        name = check_reviewer(one(form, "reviewer") or state(request).settings.reviewer)
    except (FormError, VhdError) as exc:
        return _refuse(request, exc)
    raw_level, raw_seconds = one(form, "level"), one(form, "reveal_s", "0")
    level = int(raw_level) if raw_level.isdigit() and int(raw_level) in LEVELS else DEFAULT_LEVEL
    seconds = int(raw_seconds) if raw_seconds.isdigit() and int(raw_seconds) in REVEAL_SECONDS else 0
    return _redirect(
        "/settings?saved=1",
        cookie_header(REVIEWER_COOKIE, name, max_age=YEAR),
        cookie_header(LEVEL_COOKIE, str(level), max_age=YEAR),
        cookie_header(COLOUR_COOKIE, "1" if one(form, "colour") == "1" else "0", max_age=YEAR),
        cookie_header(REVEAL_COOKIE, str(seconds), max_age=YEAR),
    )


async def login(request: Request) -> Response:
    """``POST /login``: check the token and keep it in an HttpOnly cookie (a few tries per client, then 429)."""
    st = state(request)
    token = st.settings.token
    wait = st.logins.wait(request.client.host if request.client else "")
    if wait:
        from starlette.responses import PlainTextResponse

        return PlainTextResponse(
            f"too many login attempts: wait {wait:.0f} s and try again",
            status_code=429,
            headers={"retry-after": str(max(1, round(wait)))},
        )
    try:
        form = await read_form(request)
    except FormError as exc:
        return _refuse(request, exc)
    if token is None:
        return _redirect("/")
    if not same(one(form, "token"), token):
        return render(request, "login.html", status=401, wrong=True, public=True)
    return _redirect("/", cookie_header(TOKEN_COOKIE, login_cookie(token)))


def _span_reply(request: Request, sample_id: str, form: dict[str, list[str]]) -> Response:
    """After a span write: the spans as JSON for the page's script, else back to the sample's page."""
    from starlette.responses import JSONResponse

    st = state(request)
    if "application/json" in request.headers.get("accept", ""):
        spans = st.store.review_spans(st.settings.set_name, sample_id)
        return JSONResponse({"spans": [span_json(r) for r in spans]}, headers={"cache-control": "no-store"})
    return _redirect(safe_back(one(form, "back"), f"/sample/{sample_id}"))


def span_json(row: ReviewSpanRow) -> dict[str, object]:
    """One reviewer span as the page's script reads it."""
    return {
        "id": row.id,
        "start_s": row.start_s,
        "end_s": row.end_s,
        "harmful": row.harmful,
        "segment_idx": row.segment_idx,
        "reviewer": row.reviewer,
    }


def _line(text: str, status: int = 400) -> Response:
    """A refusal as one line of plain text (what the page's script shows in its status line)."""
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(text.splitlines()[0] if text else "refused", status_code=status)


def _seconds(form: dict[str, list[str]], key: str) -> float:
    raw = one(form, key).strip()
    try:
        return float(raw)
    except ValueError:
        raise FormError(f"{key} must be a time in seconds (e.g. 12.5), not {raw!r}") from None


async def _span_change(request: Request, change: Callable[[Request, str, dict[str, list[str]]], None]) -> Response:
    """Read the form, make one span change to the sample in the path, and reply (`_span_reply`).

    A refusal (a bad form, a store that cannot write) is one line of plain text for the page's
    status line, never a server error.
    """
    sample_id = request.path_params["sample_id"]
    try:
        form = await read_form(request)
        change(request, sample_id, form)
    except FormError as exc:
        return _line(str(exc), exc.status)
    except VhdError as exc:
        return _line(str(exc))
    return _span_reply(request, sample_id, form)


def _live(request: Request, sample_id: str) -> None:
    if live_sample(request, sample_id) is None:
        raise FormError("no such sample in this store (removed?): go back to the gallery", 404)


def _review_segment(request: Request, sample_id: str, form: dict[str, list[str]]) -> None:
    st = state(request)
    _live(request, sample_id)
    decision = one(form, "harmful")
    if decision not in ("yes", "no"):
        raise FormError("choose harmful (yes) or not harmful (no) for the segment")
    shown = st.store.get_annotation(sample_id, parse_filter(request)[0].config_hash)
    segments = sorted(shown.verdict.segments, key=lambda s: float(s.start_s)) if shown else []
    raw = one(form, "idx")
    if not segments:
        raise FormError("this sample's verdict has no segments: mark a span with [ and ] instead")
    if not raw.isdigit() or int(raw) >= len(segments):
        raise FormError(f"segment {raw!r} is not one of the {len(segments)} segments shown: reload the page")
    seg = segments[int(raw)]
    st.store.add_review_span(
        st.settings.set_name,
        sample_id,
        reviewer(request),
        float(seg.start_s),
        float(seg.end_s),
        harmful=decision == "yes",
        segment_idx=int(raw),
        config_hash=shown.config_hash if shown else None,
    )


def _add_span(request: Request, sample_id: str, form: dict[str, list[str]]) -> None:
    st = state(request)
    _live(request, sample_id)
    start, end = _seconds(form, "start_s"), _seconds(form, "end_s")
    st.store.add_review_span(st.settings.set_name, sample_id, reviewer(request), start, end)


def _remove_span(request: Request, sample_id: str, form: dict[str, list[str]]) -> None:
    st = state(request)
    raw = one(form, "span_id")
    if not raw.isdigit() or not st.store.remove_review_span(st.settings.set_name, sample_id, int(raw)):
        raise FormError(f"no span {raw!r} on this sample (removed already?): reload the page", 404)


async def segment_review(request: Request) -> Response:
    """``POST /sample/<id>/segment``: confirm or correct one segment (``idx``) of the verdict shown: ``harmful=yes|no``.

    The segment is the ``idx``-th in time order of the annotation the page shows (its ``config``).
    """
    return await _span_change(request, _review_segment)


async def add_span(request: Request) -> Response:
    """``POST /sample/<id>/span``: mark a harmful span of a video (``start_s``, ``end_s`` in seconds)."""
    return await _span_change(request, _add_span)


async def remove_span(request: Request) -> Response:
    """``POST /sample/<id>/span/remove``: remove a span (``span_id``) of a video, marked or a segment's decision."""
    return await _span_change(request, _remove_span)
