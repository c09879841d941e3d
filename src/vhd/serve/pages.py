"""The review app's pages (GET): gallery, sample, previews, agreement, settings, login, export.

Media are found by sample id only: a preview URL is ``/thumb/<64 hex characters>`` with small
integer options, looked up in the store; nothing in a URL reaches the filesystem.
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from vhd.annotate.cascade import DEBATE, run_stage_models, stage_model
from vhd.errors import MediaError, VhdError
from vhd.fileio import escape_cell
from vhd.labels.files import CATEGORIES
from vhd.media.credentials import credentials_summary
from vhd.records import Sample, credentials_trust
from vhd.serve.agreement import fleiss_kappa
from vhd.serve.labelling import category_keys, histograms, instructions, segment_strip
from vhd.serve.security import same
from vhd.serve.thumbs import LEVELS, Look, media_path
from vhd.serve.web import (
    PAGE_SIZE,
    REVEAL_SECONDS,
    SHA256,
    filter_query,
    look,
    parse_filter,
    render,
    reveal_key,
    reveal_seconds,
    reviewer,
    state,
    thumb_url,
)
from vhd.store.curation import removed_at
from vhd.store.gallery import DECISIONS, DISAGREEMENTS, NEWEST, REVIEW_STATES, SORTS, STATUSES, GalleryFilter
from vhd.store.provenance import sample_provenance
from vhd.store.reviews import BATCH_MAX

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from vhd.store.sqlite import Store

EXPORT_COLUMNS = ("id", "path", "kind", "harmful", "categories", "reason", "reviewer")
"""Columns of the exported labels CSV (what `vhd label` reads; ``reviewer`` is kept as metadata)."""


def _not_found(request: Request, what: str) -> Response:
    return render(request, "message.html", status=404, title="Not found", message=what)


def live_sample(request: Request, sample_id: str) -> Sample | None:
    """The sample with this id when it is in the store and not removed (None for anything else)."""
    store = state(request).store
    if not SHA256.fullmatch(sample_id) or removed_at(store, sample_id) is not None:
        return None
    return store.get_sample(sample_id)


PROVENANCE_FIELDS = (
    "prompt",
    "full_prompt",
    "negative_prompt",
    "prompt_id",
    "keyword",
    "generator",
    "model",
    "model_revision",
    "seed",
    "steps",
    "guidance",
    "width",
    "height",
    "frames",
    "fps",
    "scheduler",
)
"""Provenance fields shown first on a synthetic sample's page, in this order; the others follow by name."""


def provenance_items(data: dict[str, Any]) -> list[tuple[str, str]]:
    """A generated sample's provenance record as ``(field, text)`` pairs to show (nested values as JSON)."""
    order = {name: k for k, name in enumerate(PROVENANCE_FIELDS)}
    keys = sorted(data, key=lambda name: (order.get(name, len(order)), name))
    out = []
    for key in keys:
        value = data[key]
        if value is None or value == "":
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
        out.append((str(key), text))
    return out


def _frames(kind: str, used: int = 0) -> int:
    """Previews of a sample: 1 for an image, a video's frames (5, or fewer when annotation used fewer)."""
    return 1 if kind != "video" else min(5, used) if used else 5


async def gallery(request: Request) -> Response:
    """``/``: the gallery, filtered and keyset-paged."""
    st = state(request)
    flt, sort, after, notes = parse_filter(request)
    configs = st.store.gallery_configs()
    shown = flt.view()  # the verdicts the cards show, and every filter, order and count reads
    rows = st.store.gallery_page(flt, sort=sort, after=after, limit=PAGE_SIZE)
    if sort == "score" and not rows and after is None:  # not an empty gallery: the samples in ingest order
        notes.append(f"no sample of this view has a score under {verdicts_shown(shown)}: ingest order")
        sort = "ingest"
        rows = st.store.gallery_page(flt, sort=sort, limit=PAGE_SIZE)
    query = filter_query(flt, sort, request.query_params.get("config"))
    lk = look(request)
    cards = [
        {
            "row": row,
            "href": f"/sample/{row.sample_id}" + (f"?{query}" if query else ""),
            "thumbs": [thumb_url(row.sample_id, k, lk) for k in range(_frames(row.kind, row.frames))],
        }
        for row in rows
    ]
    next_url = None
    if len(rows) == PAGE_SIZE:
        next_url = "/?" + "&".join(p for p in (query, f"after={rows[-1].sample_id}") if p)
    return render(
        request,
        "gallery.html",
        cards=cards,
        flt=flt,
        sort=sort,
        notes=notes,
        next_url=next_url,
        choices=st.store.gallery_choices(),
        stages=st.store.gallery_stages(shown),
        configs=configs,
        categories=[name for _, name in CATEGORIES],
        options={
            "decision": DECISIONS,
            "status": STATUSES,
            "disagreement": DISAGREEMENTS,
            "review": REVIEW_STATES,
            "sort": tuple(s for s in SORTS if s != "queue" or st.queue_size),
        },
        query=query,
        queue_size=st.queue_size,
        shown=shown if configs else None,
        shown_text=verdicts_shown(shown, len(configs)),
        request_config=flt.config_hash if request.query_params.get("config") else "",
        bulk_max=BATCH_MAX,
        keys=category_keys(),
        guide=_guide(request, flt.config_hash),
    )


async def histograms_page(request: Request) -> Response:
    """``/histograms``: counts of P(harmful) and of the categories under the view's configuration.

    A page of its own (not part of the gallery): the counts read the configuration's whole index.
    """
    st = state(request)
    flt, sort, _, notes = parse_filter(request)
    shown = flt.view()
    bars = histograms(st.histograms, st.store, shown, sort)
    if bars is None:
        return _not_found(request, "nothing is annotated in this store yet: no histograms")
    query = filter_query(flt, sort, request.query_params.get("config"))
    return render(
        request,
        "histograms.html",
        histograms=bars,
        shown_text=verdicts_shown(shown, len(st.store.gallery_configs())),
        notes=notes,
        gallery_url="/" + (f"?{query}" if query else ""),
    )


def verdicts_shown(view: str | None, configs: int = 0) -> str:
    """What the cards' verdicts are, in words: one configuration, or each sample's newest verdict.

    Args:
        view: `GalleryFilter.view` of the page (`NEWEST`, a configuration hash, or None).
        configs: How many configurations the store has annotated under (said with the newest).
    """
    if view is None:
        return "no configuration"
    if view == NEWEST:
        many = f" (of {configs} configurations)" if configs > 1 else ""
        return f"each sample's newest verdict{many}"
    return f"configuration {view[:12]}"


def _guide(request: Request, config_hash: str | None) -> Any:
    """The instructions of a configuration, made once per app run."""
    st = state(request)
    key = config_hash or ""
    if key not in st.instructions:
        st.instructions[key] = instructions(st.store.runs(), config_hash)
    return st.instructions[key]


async def instructions_page(request: Request) -> Response:
    """``/instructions``: the policy and category definitions the annotator was given (``i`` on any page)."""
    flt, _, _, notes = parse_filter(request)
    return render(request, "instructions.html", guide=_guide(request, flt.config_hash), guide_page=True, notes=notes)


def next_sample(request: Request, flt: GalleryFilter, sort: str, sample_id: str) -> str | None:
    """The sample after this one in the gallery's order, under the same filters."""
    rows = state(request).store.gallery_page(flt, sort=sort, after=sample_id, limit=1)
    return rows[0].sample_id if rows else None


def severity_scale(store: Store, run_id: str | None) -> list[str]:
    """The severity levels of the policy a run used (mildest first); empty without a run, a policy or a scale."""
    from vhd.policy import PolicyError, parse_policy

    row = store.run_policy(run_id) if run_id else None
    if row is None:
        return []
    try:
        return parse_policy(row.text, source=f"stored policy {row.key}").severity_names
    except PolicyError:  # a policy a newer vhd wrote: no scale offered rather than a broken page
        return []


async def sample_page(request: Request) -> Response:
    """``/sample/<id>``: the verdict, the whole debate, the reviews, and the labelling form."""
    st = state(request)
    sample_id = request.path_params["sample_id"]
    sample = live_sample(request, sample_id)
    if sample is None:
        return _not_found(request, "no such sample in this store")
    flt, sort, _, notes = parse_filter(request)
    reveal = request.query_params.get("reveal") == "1" and not st.settings.no_reveal
    lk = look(request, clear=reveal)
    seconds = reveal_seconds(request)
    key = reveal_key(request, sample_id) if reveal else ""
    if reveal:  # the exposure audit trail: who saw what, when, for how long
        st.store.add_reveal(st.settings.set_name, sample_id, reviewer(request), seconds=seconds or None)
    annotation = st.store.get_annotation(sample_id, flt.config_hash)  # no configuration: the newest verdict
    runs = {r.id: r for r in st.store.runs()} if annotation else {}
    reviews = st.store.sample_reviews(st.settings.set_name, sample_id)
    current = {r.reviewer: r for r in reviews if not r.adjudication}
    votes = {r.harmful for r in current.values()}
    query = filter_query(flt, sort, request.query_params.get("config"))
    following = next_sample(request, flt, sort, sample_id)
    run = runs.get(annotation.run_id) if annotation else None
    stage = None  # (label, model) of the cascade stage that decided, when not the debate
    if annotation is not None and annotation.decided_by not in (None, DEBATE):
        label = str(annotation.decided_by)
        # the run's recorded stages; a run recorded before they were stored named the model in the reason
        model = run_stage_models(run.config).get(label) if run is not None else None
        stage = (label, model or stage_model(annotation.verdict.reason, label))
    provenance = sample_provenance(st.store, sample_id)  # what `vhd generate` recorded, if it made the file
    segments = sorted(annotation.verdict.segments, key=lambda s: float(s.start_s)) if annotation else []
    spans = st.store.review_spans(st.settings.set_name, sample_id) if sample.kind.value == "video" else []
    me = reviewer(request)
    mine = {  # this reviewer's decision on each segment shown
        r.segment_idx: r.harmful
        for r in spans
        if r.segment_idx is not None and r.reviewer == me and annotation and r.config_hash == annotation.config_hash
    }
    return render(
        request,
        "sample.html",
        sample=sample,
        thumbs=[thumb_url(sample_id, k, lk, key) for k in range(_frames(sample.kind.value, len(sample.frames)))],
        clip_url=f"/clip/{sample_id}?clear={key}" if reveal and playable(sample) else None,
        reveal=reveal,
        reveal_for=seconds,
        reveals=st.store.sample_reveals(sample_id),
        annotation=annotation,
        run=run,
        stage=stage,
        provenance=provenance_items(provenance.data) if provenance else [],
        provenance_row=provenance,
        credentials=credentials_summary(sample.meta),
        credentials_trust=credentials_trust(sample.meta),
        others=st.store.sample_annotations(sample_id),
        strip=segment_strip(segments),
        segments=segments,
        spans=spans,
        mine=mine,
        sample_query=f"?{query}" if query else "",
        strip_thumbs=[
            thumb_url(sample_id, k, look(request)) for k in range(_frames(sample.kind.value, len(sample.frames)))
        ],
        reviews=reviews,
        disputed=len(votes) > 1 and not any(r.adjudication for r in reviews),
        keys=category_keys(),
        severities=severity_scale(st.store, annotation.run_id if annotation else None),
        guide=_guide(request, annotation.config_hash if annotation else flt.config_hash),
        query=query,
        next_url=(f"/sample/{following}" + (f"?{query}" if query else "")) if following else None,
        gallery_url="/" + (f"?{query}" if query else ""),
        notes=notes,
    )


def thumb(request: Request) -> Response:
    """``/thumb/<id>``: a blurred preview (``?frame=K`` for a video's frames; ``?clear=KEY`` after a reveal)."""
    from starlette.responses import Response

    st = state(request)
    sample_id = request.path_params["sample_id"]
    q = request.query_params
    try:
        frame, level = int(q.get("frame", "0")), int(q.get("level", "1"))
    except ValueError:
        return Response("frame and level are small integers", status_code=400, media_type="text/plain")
    clear = "clear" in q
    if clear and st.settings.no_reveal:
        return Response("this app never sends clear images (--no-reveal)", status_code=403, media_type="text/plain")
    if clear and not same(q.get("clear", ""), reveal_key(request, sample_id)):
        return Response("reveal the sample on its page first", status_code=403, media_type="text/plain")
    sample = live_sample(request, sample_id)
    if sample is None or level not in LEVELS or not 0 <= frame < _frames(sample.kind.value, len(sample.frames)):
        return Response("no such preview", status_code=404, media_type="text/plain")
    try:
        data = st.previews.get(sample, frame, Look(level=level, gray=q.get("colour") != "1", clear=clear))
    except VhdError as exc:
        return Response(f"cannot show this sample: {exc}", status_code=404, media_type="text/plain")
    return Response(data, media_type="image/jpeg", headers={"cache-control": "private, no-store"})


CLIP_TYPES = {".mp4": "video/mp4", ".m4v": "video/mp4", ".webm": "video/webm", ".mov": "video/mp4"}
"""Video files a browser can play, by suffix: a revealed one of these plays in the page."""


def playable(sample: Sample) -> bool:
    """Whether the sample is a video file a browser can play (a frame folder is shown as frames)."""
    from pathlib import Path

    return sample.kind.value == "video" and Path(sample.path).suffix.lower() in CLIP_TYPES


def clip(request: Request) -> Response:
    """``/clip/<id>?clear=KEY``: a revealed video's file, for the page's player (never without a reveal key)."""
    from pathlib import Path

    from starlette.responses import FileResponse, Response

    st = state(request)
    sample_id = request.path_params["sample_id"]
    if st.settings.no_reveal:
        return Response("this app never sends clear media (--no-reveal)", status_code=403, media_type="text/plain")
    if not same(request.query_params.get("clear", ""), reveal_key(request, sample_id)):
        return Response("reveal the sample on its page first", status_code=403, media_type="text/plain")
    sample = live_sample(request, sample_id)
    if sample is None or not playable(sample):
        return Response("no such clip", status_code=404, media_type="text/plain")
    try:
        path = media_path(sample)
    except MediaError as exc:
        return Response(f"no such clip: {exc}", status_code=404, media_type="text/plain")
    if not path.is_file():
        return Response("no such clip", status_code=404, media_type="text/plain")
    return FileResponse(
        path,
        media_type=CLIP_TYPES[Path(sample.path).suffix.lower()],
        headers={"cache-control": "private, no-store"},
    )


async def agreement(request: Request) -> Response:
    """``/agreement``: reviewer agreement (Fleiss' kappa) and the samples that need adjudication."""
    st = state(request)
    flt, _, _, _ = parse_filter(request)
    flt.review = "disputed"
    disputed = st.store.gallery_page(flt, limit=200)
    report = fleiss_kappa(st.store.agreement_counts(st.settings.set_name))
    return render(request, "agreement.html", report=report, disputed=disputed)


async def settings_page(request: Request) -> Response:
    """``/settings``: reviewer name, preview level, colour, reveal time, and this reviewer's reveals per hour."""
    import time

    st = state(request)
    hours = st.store.reveals_per_hour(reviewer(request), since=time.time() - 24 * 3600)
    return render(
        request,
        "settings.html",
        look=look(request),
        levels=sorted(LEVELS),
        reveal_choices=REVEAL_SECONDS,
        reveal_for=reveal_seconds(request),
        hours=[(time.strftime("%Y-%m-%d %H:00", time.localtime(start)), n) for start, n in hours],
        saved=False,
    )


async def login_page(request: Request) -> Response:
    """``/login``: ask for the token (only when the app has one)."""
    if state(request).settings.token is None:
        from starlette.responses import RedirectResponse

        return RedirectResponse("/", status_code=303)
    return render(request, "login.html", wrong=False, public=True)


async def remove_page(request: Request) -> Response:
    """``/sample/<id>/remove``: confirm a takedown."""
    sample_id = request.path_params["sample_id"]
    sample = live_sample(request, sample_id)
    if sample is None:
        return _not_found(request, "no such sample in this store")
    return render(request, "remove.html", sample=sample)


async def export_csv(request: Request) -> Response:
    """``/export.csv``: the labelled set as a labels CSV (`vhd label` reads it back)."""
    from starlette.responses import Response

    st = state(request)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    names = st.store.labelled_sets()
    items = st.store.labelled_set(st.settings.set_name) if st.settings.set_name in names else []
    who = st.store.labelled_set_reviewers(st.settings.set_name)
    for item in items:
        row = (
            item.id,
            str(item.path),
            item.kind.value,
            "yes" if item.harmful else "no",
            ";".join(item.categories),
            item.reason or "",
            who.get(item.id, ""),
        )
        writer.writerow([escape_cell(v) for v in row])
    name = f"{st.settings.set_name}-labels.csv"
    return Response(
        buf.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


async def favicon(_request: Request) -> Response:
    """``/favicon.ico``: nothing (browsers ask for it; a 404 would show as a console error)."""
    from starlette.responses import Response

    return Response(status_code=204)
