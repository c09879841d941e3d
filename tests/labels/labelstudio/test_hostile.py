"""Label Studio push and pull against a hostile server: slow, endless, deep, paging without end.

The server is `FakeLabelStudio` (Label Studio's REST API in process) with one answer made hostile.
Each test ends within seconds with one line naming what was refused; the per-test timeouts make
the code before these limits fail rather than hang.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import vhd
import vhd.labels.labelstudio.api as ls_api
from tests.annotate.test_api import make_images
from tests.labels.labelstudio.test_api import LEGACY, FakeLabelStudio
from vhd.errors import BackendError
from vhd.labels.labelstudio.api import LabelStudioApi, pull_labelstudio, push_labelstudio
from vhd.labels.labelstudio.convert import import_labelstudio
from vhd.labels.sets import load_labelled_set


class Endless(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield b" " * 65536


class Trickle(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        while True:
            time.sleep(0.2)
            yield b" "


class Hostile(FakeLabelStudio):
    """Label Studio with the export, the task list or the project list replaced."""

    export_stream: httpx.SyncByteStream | None = None
    export_body: bytes | None = None
    tasks_body: Any = None
    projects_next: str | None = None
    seen: list[str]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen = [*getattr(self, "seen", []), str(request.url)]
        path = request.url.path
        if path.endswith("/export") and self.export_stream is not None:
            return httpx.Response(200, stream=self.export_stream)
        if path.endswith("/export") and self.export_body is not None:
            return httpx.Response(200, content=self.export_body)
        if path == "/api/tasks" and self.tasks_body is not None:
            return httpx.Response(200, content=self.tasks_body, headers={"Content-Type": "application/json"})
        if path == "/api/projects" and request.method == "GET" and self.projects_next is not None:
            return httpx.Response(200, json={"results": [{"id": 1, "title": "other"}], "next": self.projects_next})
        return super().handle(request)


@pytest.fixture
def annotated(tmp_path: Path) -> tuple[Path, Path]:
    """Two images under ROOT/media annotated by the scripted judge; (ROOT, store)."""
    make_images(tmp_path / "root" / "media", 2)
    store = tmp_path / "run.db"
    vhd.annotate([tmp_path / "root" / "media"], model="scripted:demo", store=store, progress=False)
    return tmp_path / "root", store


def _pushed(annotated: tuple[Path, Path]) -> tuple[Hostile, dict[str, Any]]:
    root, store = annotated
    server = Hostile(root)
    kw: dict[str, Any] = {"store": store, "media_root": root, "token": LEGACY, "transport": server.transport()}
    push_labelstudio("http://ls", "p", **kw)
    return server, kw


@pytest.mark.timeout(30)
def test_an_endless_export_stops_at_the_cap(annotated: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    server, kw = _pushed(annotated)
    monkeypatch.setattr(ls_api, "EXPORT_BYTES", 4 << 20)
    server.export_stream = Endless()
    with pytest.raises(BackendError, match="went past the cap of 4 MiB"):
        pull_labelstudio("http://ls", "p", **kw)


@pytest.mark.timeout(30)
def test_a_trickled_export_stops_at_its_deadline(annotated: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    server, _ = _pushed(annotated)
    monkeypatch.setattr(ls_api, "EXPORT_TIMEOUT", 1.0)
    server.export_stream = Trickle()
    start = time.monotonic()
    with pytest.raises(BackendError, match="still arriving after 1 s"):
        LabelStudioApi("http://ls", LEGACY, timeout=1.0, transport=server.transport()).export(2)
    assert time.monotonic() - start < 4


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("body", "said"),
    [(b"[" * 200_000 + b"]" * 200_000, "lists and objects"), (b"[" * 5_000 + b"]" * 5_000, "nested 5000 levels")],
    ids=["200k", "5k"],
)
def test_a_deep_task_list_is_one_line_not_a_recursion_error(
    annotated: tuple[Path, Path], body: bytes, said: str
) -> None:
    server, kw = _pushed(annotated)
    server.tasks_body = body
    with pytest.raises(BackendError, match=said):
        push_labelstudio("http://ls", "p", **kw)


@pytest.mark.timeout(30)
def test_a_task_list_that_pages_without_end_stops(annotated: tuple[Path, Path]) -> None:
    server, kw = _pushed(annotated)
    same = [{"id": i, "data": {}, "predictions": []} for i in range(100)]
    server.tasks_body = json.dumps({"tasks": same, "total": 10**9}).encode()
    server.seen = []
    with pytest.raises(BackendError, match="tasks seen before"):
        push_labelstudio("http://ls", "p", **kw)
    assert sum("/api/tasks" in url for url in server.seen) == 2


def test_a_next_page_on_another_server_is_never_asked_with_the_token(annotated: tuple[Path, Path]) -> None:
    server, kw = _pushed(annotated)
    server.seen = []
    server.projects_next = "http://evil.example/api/projects?page=2"
    with pytest.raises(BackendError, match="next page elsewhere"):
        pull_labelstudio("http://ls", "q", **kw)
    assert not any("evil" in url for url in server.seen)
    server.projects_next = "http://ls/api/projects?page_size=100"  # itself again: a loop
    with pytest.raises(BackendError, match="without end"):
        pull_labelstudio("http://ls", "q", **kw)


def test_a_media_url_climbing_out_of_the_media_root_names_no_sample(
    tmp_path: Path, annotated: tuple[Path, Path]
) -> None:
    root, store = annotated
    outside = sorted((root / "media").glob("*.png"))[0]  # a stored sample, reached from a narrower root
    narrow = root / "other"
    narrow.mkdir()
    climbing = f"/data/local-files/?d=../media/{outside.name}"
    inside = f"/data/local-files/?d=media/{outside.name}"
    ann = {"id": 1, "result": [{"from_name": "harmful", "to_name": "media", "type": "choices",
           "value": {"choices": ["Harmful"]}}], "was_cancelled": False, "created_at": "2026-01-01"}  # fmt: skip
    export = tmp_path / "export.json"
    export.write_text(json.dumps([{"id": 7, "data": {"image": climbing}, "annotations": [ann]}]))
    got = import_labelstudio(export, store=store, name="climb", media_root=narrow)
    assert got.samples == 0 and "leads outside the media root" in str(got.skipped)
    export.write_text(json.dumps([{"id": 7, "data": {"image": inside}, "annotations": [ann]}]))
    assert import_labelstudio(export, store=store, name="plain", media_root=root).samples == 1
    assert len(load_labelled_set(store, "plain")) == 1
