"""Build the review app: a Starlette application over one store, behind `vhd.serve.security.Guard`.

Routes (all root-relative; the pages work without JavaScript, which only adds keys):

| route | what |
|---|---|
| ``GET /`` | the gallery: blurred previews, filters, keyset pages |
| ``GET /sample/<id>`` | verdict, debate, reviews, the labelling form (``?reveal=1``: the clear image) |
| ``GET /thumb/<id>`` | a preview (``frame``, ``level``, ``colour``; ``clear`` with a reveal key), by sample id only |
| ``GET /clip/<id>`` | a revealed video's file (``clear`` with a reveal key; HTTP Range), played muted by the page |
| ``POST /sample/<id>/label`` | record a review, then the next sample |
| ``POST /sample/<id>/segment`` | confirm or correct a segment of a video's verdict (``idx``, ``harmful``) |
| ``POST /sample/<id>/span``, ``/span/remove`` | mark a harmful span of a video (``start_s``, ``end_s``); remove one |
| ``POST /undo`` | undo this reviewer's newest review (a bulk label whole), back to that sample |
| ``POST /label`` | a bulk label: the same review of the selected samples (``ids``), one batch |
| ``GET /instructions`` | the policy and category definitions the annotator was given |
| ``GET /histograms`` | counts of P(harmful) and categories under the view's configuration, linked to filters |
| ``GET/POST /sample/<id>/remove`` | takedown with confirmation |
| ``GET /agreement`` | reviewer agreement (kappa) and adjudication list |
| ``GET /export.csv`` | the labelled set as a labels CSV |
| ``GET/POST /settings``, ``GET/POST /login`` | comfort settings; the token login |
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import MissingDependencyError
from vhd.serve.settings import ServeSettings

if TYPE_CHECKING:
    from starlette.applications import Starlette


def _require() -> None:
    for module, package in (("starlette", "starlette"), ("jinja2", "jinja2")):
        try:
            __import__(module)
        except ImportError as exc:
            raise MissingDependencyError(package, "serve") from exc


def create_app(settings: ServeSettings, *, on_event: Any = None) -> Starlette:
    """The review app for these settings (the store is opened now and closed at shutdown).

    Args:
        settings: How the app runs (`ServeSettings`).
        on_event: Called with one line per review-queue row that could not be used.

    Raises:
        MissingDependencyError: starlette or jinja2 is missing (``pip install 'vhd[serve]'``).
        ConfigError: The store or the queue cannot be read.
    """
    _require()
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from vhd.serve import actions, pages
    from vhd.serve.queue import read_queue
    from vhd.serve.security import Guard
    from vhd.serve.thumbs import PreviewCache
    from vhd.serve.web import State, make_env
    from vhd.store.curation import removals
    from vhd.store.sqlite import open_store

    store = open_store(settings.store)
    previews = PreviewCache(settings.preview_cache, memory=settings.preview_memory_mb * 2**20)
    for removal in removals(store):  # taken down since the last run (`vhd remove`): no cached copy stays
        previews.forget(removal.sample_id)
    st = State(settings=settings, store=store, env=make_env(), previews=previews)
    if settings.queue is not None:
        queue = read_queue(settings.queue)
        st.queue_size = store.load_queue(queue.entries)
        st.queue_skipped = queue.skipped
        for line, why in queue.skipped:
            (on_event or (lambda _m: None))(f"{settings.queue} row {line}: {why}")

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            store.close()

    routes = [
        Route("/", pages.gallery),
        Route("/sample/{sample_id}", pages.sample_page),
        Route("/sample/{sample_id}/label", actions.label, methods=["POST"]),
        Route("/sample/{sample_id}/segment", actions.segment_review, methods=["POST"]),
        Route("/sample/{sample_id}/span", actions.add_span, methods=["POST"]),
        Route("/sample/{sample_id}/span/remove", actions.remove_span, methods=["POST"]),
        Route("/sample/{sample_id}/remove", pages.remove_page),
        Route("/sample/{sample_id}/remove", actions.remove, methods=["POST"]),
        Route("/thumb/{sample_id}", pages.thumb),
        Route("/clip/{sample_id}", pages.clip),
        Route("/undo", actions.undo, methods=["POST"]),
        Route("/label", actions.label_bulk, methods=["POST"]),
        Route("/instructions", pages.instructions_page),
        Route("/histograms", pages.histograms_page),
        Route("/agreement", pages.agreement),
        Route("/export.csv", pages.export_csv),
        Route("/settings", pages.settings_page),
        Route("/settings", actions.save_settings, methods=["POST"]),
        Route("/login", pages.login_page),
        Route("/login", actions.login, methods=["POST"]),
        Route("/favicon.ico", pages.favicon),
        Mount("/static", app=StaticFiles(directory=str(Path(__file__).parent / "static")), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(Guard, token=settings.token)], lifespan=lifespan)
    app.state.vhd = st
    return app
