"""Label Studio push and pull against an in-process copy of its REST API (as Label Studio 1.23 answers).

`FakeLabelStudio` keeps projects, storages, tasks and predictions the way the server does (task and
prediction ids are global; ``/api/tasks`` pages; the export keeps tasks with annotations, and its
JSON-MIN form drops cancelled ones, as ``label_studio_sdk.converter`` does); it checks tokens as
``jwt_auth`` does (a Personal Access Token is a JWT refresh token exchanged at
``/api/token/refresh/`` for a five-minute access token sent as Bearer; legacy tokens may be off)
and storages as ``io_storages.localfiles`` does. The real server is in test_labelstudio_live.py.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.errors import BackendError, ConfigError
from vhd.labels.labelstudio.api import (
    DOCUMENT_ROOT_RULE,
    LabelStudioApi,
    pull_labelstudio,
    push_labelstudio,
    storage_folders,
)
from vhd.labels.sets import load_labelled_set

LEGACY = "0123456789abcdef0123456789abcdef01234567"


def jwt(**claims: Any) -> str:
    def part(obj: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


PAT = jwt(token_type="refresh", exp=int(time.time()) + 10**8, jti="pat-1")


class FakeLabelStudio:
    """The endpoints vhd calls, with Label Studio's state rules and error answers."""

    def __init__(self, document_root: Path, *, legacy: bool = True, access_seconds: int = 300) -> None:
        self.root = document_root
        self.legacy = legacy
        self.access_seconds = access_seconds
        self.projects: dict[int, dict[str, Any]] = {}
        self.tasks: dict[int, dict[str, Any]] = {}
        self.storages: list[dict[str, Any]] = []
        self.next_id = 1
        self.refreshes = 0
        self.issued: set[str] = set()

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def authorised(self, header: str) -> str | None:
        """None when the header is good, else the 401 detail."""
        scheme, _, token = header.partition(" ")
        if scheme == "Token" and token == LEGACY:
            if self.legacy:
                return None
            return "Authentication token no longer valid: legacy token authentication has been disabled"
        if scheme == "Bearer" and token in self.issued:
            payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
            return None if payload["exp"] > time.time() else "Given token not valid for any token type"
        return "Invalid token."

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = urlsplit(str(request.url))
        path, query = url.path, {k: v[0] for k, v in parse_qs(url.query).items()}
        body = json.loads(request.content) if request.content else None
        if path == "/api/token/refresh/":
            if request.method != "POST" or body.get("refresh") != PAT:
                return httpx.Response(401, json={"detail": "Token is invalid or expired", "code": "token_not_valid"})
            self.refreshes += 1
            access = jwt(token_type="access", exp=time.time() + self.access_seconds, jti=f"a{self.refreshes}")
            self.issued.add(access)
            return httpx.Response(200, json={"access": access})
        refused = self.authorised(request.headers.get("authorization", ""))
        if refused:
            return httpx.Response(401, json={"detail": refused})
        key = (request.method, path)
        if key == ("GET", "/api/projects"):
            results = [{"id": i, "title": p["title"]} for i, p in self.projects.items()]
            return httpx.Response(200, json={"results": results, "next": None})
        if key == ("POST", "/api/projects"):
            pid = self.new_id()
            self.projects[pid] = {"title": body["title"], "config": body["label_config"]}
            return httpx.Response(201, json={"id": pid})
        if key == ("GET", "/api/storages/localfiles"):
            return httpx.Response(200, json=[s for s in self.storages if s["project"] == int(query["project"])])
        if key == ("POST", "/api/storages/localfiles"):
            return self.add_storage(body)
        if key == ("GET", "/api/tasks"):
            held = [self.view(t) for t in self.tasks.values() if t["project"] == int(query["project"])]
            page, size = int(query.get("page", 1)), int(query.get("page_size", 100))
            if (page - 1) * size >= len(held) > 0:
                return httpx.Response(404, json={"detail": "Invalid page."})
            return httpx.Response(200, json={"tasks": held[(page - 1) * size : page * size], "total": len(held)})
        parts = path.strip("/").split("/")
        if request.method == "POST" and parts[:2] == ["api", "projects"] and parts[3:] == ["import"]:
            for task in body:
                tid = self.new_id()
                preds = [dict(p, id=self.new_id()) for p in task.get("predictions", [])]
                self.tasks[tid] = {
                    "id": tid,
                    "project": int(parts[2]),
                    "data": task["data"],
                    "predictions": preds,
                    "annotations": [],
                }
            return httpx.Response(201, json={"task_count": len(body)})
        if key[0] == "PATCH" and parts[:2] == ["api", "tasks"]:
            self.tasks[int(parts[2])]["data"] = body["data"]
            return httpx.Response(200, json=self.view(self.tasks[int(parts[2])]))
        if key == ("POST", "/api/predictions"):
            pred = {k: v for k, v in body.items() if k != "task"} | {"id": self.new_id()}
            self.tasks[body["task"]]["predictions"].append(pred)
            return httpx.Response(201, json=pred)
        if key[0] == "PATCH" and parts[:2] == ["api", "predictions"]:
            for task in self.tasks.values():
                for pred in task["predictions"]:
                    if pred["id"] == int(parts[2]):
                        pred.update({k: v for k, v in body.items() if k != "task"})
            return httpx.Response(200, json={})
        if request.method == "GET" and parts[:2] == ["api", "projects"] and parts[3:] == ["export"]:
            return httpx.Response(200, content=self.export(int(parts[2]), query["exportType"]))
        return httpx.Response(404, json={"detail": "Not found."})

    def view(self, task: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in task.items() if k != "project"}

    def add_storage(self, body: dict[str, Any]) -> httpx.Response:
        folder, root = Path(body["path"]), self.root
        if folder == root:
            why = (
                f'Absolute local path "{folder}" cannot be the same as LOCAL_FILES_DOCUMENT_ROOT="{root}" by '
                f'security reasons. Please add a subdirectory. For example: "{root / "dataset1"}".'
            )
            return httpx.Response(400, json={"validation_errors": {"non_field_errors": [why]}})
        if root not in folder.parents:
            why = (
                f'Absolute local path "{folder}" must be a subdirectory of LOCAL_FILES_DOCUMENT_ROOT="{root}" by '
                f'security reasons. For example: "{root / "dataset1"}".'
            )
            return httpx.Response(400, json={"validation_errors": {"non_field_errors": [why]}})
        storage = {"id": self.new_id(), "project": body["project"], "path": body["path"]}
        self.storages.append(storage)
        return httpx.Response(201, json=storage)

    def export(self, project: int, export_type: str) -> bytes:
        done = [t for t in self.tasks.values() if t["project"] == project and t["annotations"]]
        if export_type == "JSON":
            return json.dumps([self.view(t) for t in done]).encode()
        rows = []
        for task in done:
            for ann in task["annotations"]:
                if ann.get("was_cancelled"):
                    continue
                row = dict(task["data"], id=task["id"], annotation_id=ann["id"], annotator=1)
                for res in ann["result"]:
                    choices = res["value"].get("choices") or res["value"].get("text")
                    row[res["from_name"]] = choices[0] if len(choices) == 1 else {"choices": choices}
                rows.append(row)
        return json.dumps(rows).encode()

    def annotate(self, task_id: int, choice: str | None) -> None:
        """A person's decision (``None``: they pressed Skip, which Label Studio saves as cancelled)."""
        result = [] if choice is None else [
            {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": [choice]}}
        ]  # fmt: skip
        ann = {"id": self.new_id(), "result": result, "was_cancelled": choice is None, "created_at": "2026-01-01"}
        self.tasks[task_id]["annotations"].append(ann)

    def titled(self, title: str) -> list[dict[str, Any]]:
        pid = next(i for i, p in self.projects.items() if p["title"] == title)
        return [t for t in self.tasks.values() if t["project"] == pid]


@pytest.fixture
def annotated(tmp_path: Path) -> tuple[Path, Path]:
    """Three images under ROOT/media annotated by the scripted judge; (ROOT, store)."""
    make_images(tmp_path / "root" / "media", 3)
    store = tmp_path / "run.db"
    vhd.annotate([tmp_path / "root" / "media"], model="scripted:demo", store=store, progress=False)
    return tmp_path / "root", store


def test_pushing_twice_adds_only_new_samples_and_updates_the_pushed(annotated: tuple[Path, Path]) -> None:
    root, store = annotated
    ls = FakeLabelStudio(root)
    kw: dict[str, Any] = {"store": store, "media_root": root, "token": LEGACY, "transport": ls.transport()}
    first = push_labelstudio("http://ls", "p", **kw)
    assert (first.tasks, first.updated, first.unchanged) == (3, 0, 0)
    again = push_labelstudio("http://ls", "p", **kw)
    assert (again.tasks, again.updated, again.unchanged, again.created) == (0, 0, 3, [])
    assert len(ls.titled("p")) == 3 and len(ls.storages) == 1  # no duplicate task, no second storage

    # one task lost vhd's ids in Label Studio, one prediction was changed there, and a sample is new
    tasks = sorted(ls.titled("p"), key=lambda t: t["data"]["path"])
    tasks[0]["data"] = {"image": tasks[0]["data"]["image"]}
    tasks[1]["predictions"][0]["result"][0]["value"]["choices"] = ["Harmful"]
    make_images(root / "media", 4)
    vhd.annotate([root / "media"], model="scripted:demo", store=store, progress=False)
    only_new = push_labelstudio("http://ls", "p", only_new=True, **kw)
    assert (only_new.tasks, only_new.updated, only_new.unchanged) == (1, 0, 3)
    assert "sample_id" not in tasks[0]["data"]
    third = push_labelstudio("http://ls", "p", **kw)
    assert (third.tasks, third.updated, third.unchanged) == (0, 2, 2)
    assert len(ls.titled("p")) == 4 and "sample_id" in tasks[0]["data"]
    assert tasks[1]["predictions"][0]["result"][0]["value"]["choices"] == ["Not harmful"]
    assert len(tasks[1]["predictions"]) == 1


def test_personal_access_token_is_refreshed_and_legacy_token_refusal_says_so(annotated: tuple[Path, Path]) -> None:
    root, store = annotated
    ls = FakeLabelStudio(root, legacy=False, access_seconds=29)
    with LabelStudioApi("http://ls", PAT, transport=ls.transport()) as api:
        assert api.kind == "Personal Access Token" and ls.refreshes == 1
        assert api.client.headers["Authorization"].startswith("Bearer ")
        api.find_project("p")  # within 30 s of expiry: a fresh access token first
        assert ls.refreshes == 2
        api.expires = time.time() + 3600  # believed fresh, but the server refuses it: refreshed once, retried
        ls.issued.clear()
        assert api.find_project("p") is None and ls.refreshes == 3
    with pytest.raises(ConfigError, match=r"refused the legacy token .*legacy token authentication has been disabled"):
        push_labelstudio("http://ls", "p", store=store, media_root=root, token=LEGACY, transport=ls.transport())
    with pytest.raises(
        ConfigError, match=r"refused the Personal Access Token .*/api/token/refresh/.*invalid or expired"
    ):
        LabelStudioApi("http://ls", jwt(token_type="refresh", exp=1), transport=ls.transport())
    ls.access_seconds = 300
    done = push_labelstudio("http://ls", "p", store=store, media_root=root, token=PAT, transport=ls.transport())
    assert done.tasks == 3


def test_a_400_is_printed_whole_with_the_document_root_rule(annotated: tuple[Path, Path]) -> None:
    root, store = annotated
    ls = FakeLabelStudio(root / "media")  # the server's root is the media folder, vhd was told its parent
    with pytest.raises(BackendError) as caught:
        push_labelstudio("http://ls", "p", store=store, media_root=root, token=LEGACY, transport=ls.transport())
    text = str(caught.value)
    assert (
        len(text) > 400 and f'For example: \\"{root / "media" / "dataset1"}\\"' in text and DOCUMENT_ROOT_RULE in text
    )


def test_media_in_sibling_folders_get_a_storage_each(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert storage_folders([str(root / "a" / "x" / "1.png"), str(root / "a" / "x" / "2.png")], root) == [
        str(root / "a" / "x")
    ]
    assert storage_folders([str(root / "a" / "1.png"), str(root / "b" / "2.png")], root) == [
        str(root / "a"),
        str(root / "b"),
    ]
    with pytest.raises(ConfigError, match="not in a folder below --media-root"):
        storage_folders([str(root / "1.png")], root)
    for size, folder in ((40, "a"), (44, "b")):
        make_images(root / folder, 2, size=size)  # distinct pictures: not one sample
    store = tmp_path / "run.db"
    vhd.annotate([root / "a", root / "b"], model="scripted:demo", store=store, progress=False)
    ls = FakeLabelStudio(root)
    done = push_labelstudio("http://ls", "p", store=store, media_root=root, token=LEGACY, transport=ls.transport())
    assert done.tasks == 4 and sorted(s["path"] for s in ls.storages) == [str(root / "a"), str(root / "b")]


def test_pull_reads_the_videos_project_too_and_says_which(annotated: tuple[Path, Path]) -> None:
    root, store = annotated
    ls = FakeLabelStudio(root)
    kw: dict[str, Any] = {"store": store, "media_root": root, "token": LEGACY, "transport": ls.transport()}
    push_labelstudio("http://ls", "p", **kw)
    # what push makes of a store holding videos too: the same tasks, half of them in "p (videos)"
    videos = ls.new_id()
    ls.projects[videos] = {"title": "p (videos)", "config": ""}
    tasks = sorted(ls.titled("p"), key=lambda t: t["data"]["path"])
    tasks[2]["project"] = videos
    for task in tasks:
        ls.annotate(task["id"], "Harmful")
    got = pull_labelstudio("http://ls", "p", name="both", **kw)
    assert got.projects == ["p", "p (videos)"] and got.missing == [] and got.samples == 3
    assert len(load_labelled_set(store, "both")) == 3
    del ls.projects[videos]
    images = pull_labelstudio("http://ls", "p", name="images", **kw)
    assert images.projects == ["p"] and images.missing == ["p (videos)"] and images.samples == 2


@pytest.mark.parametrize("export_type", ["JSON", "JSON_MIN"])
def test_pull_exit_code_is_the_same_for_json_and_json_min(
    annotated: tuple[Path, Path], export_type: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vhd.cli.main import main
    from vhd.labels.labelstudio import api as labelstudio_api

    root, store = annotated
    ls = FakeLabelStudio(root)
    push_labelstudio("http://ls", "p", store=store, media_root=root, token=LEGACY, transport=ls.transport())
    tasks = sorted(ls.titled("p"), key=lambda t: t["data"]["path"])
    ls.annotate(tasks[0]["id"], "Harmful")
    ls.annotate(tasks[1]["id"], None)  # skipped in Label Studio
    real = labelstudio_api.LabelStudioApi
    monkeypatch.setattr(
        labelstudio_api, "LabelStudioApi", lambda *a, **k: real(*a, **k | {"transport": ls.transport()})
    )
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", LEGACY)
    pull = ["label", "--store", str(store), "--pull-labelstudio", "http://ls", "--project", "p", "--media-root",
            str(root), "--export-type", export_type, "--set", "people"]  # fmt: skip
    assert main(pull) == 0
    out = capsys.readouterr().out
    assert "pulled project 'p'" in out and "no project 'p (videos)'" in out
    assert "-> 1 sample(s) (1 harmful)" in out and "0 task(s) left out" in out
