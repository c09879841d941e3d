"""Push tasks to a Label Studio server and pull its decisions back, through its REST API.

``vhd label --push-labelstudio URL --project NAME`` creates (or reuses) the project, gives it a
Local Storage covering the media folder (Label Studio serves local files only from a storage
under ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``) and imports vhd's tasks with their
pre-annotations; ``--pull-labelstudio`` downloads the project's JSON (or JSON-MIN) export and
imports it as `vhd.align.labelstudio.import_labelstudio` does a file.

Plain httpx against the documented API, not ``label-studio-sdk``: the SDK (2.x) pulls in
opencv, pandas, nltk and exact pins (``requests-mock==1.12.1``, ``pyjwt<2.14``) that a vhd
environment should not have to carry for five HTTP calls. The token comes from
``LABEL_STUDIO_API_KEY`` (the SDK's variable) and is sent as ``Authorization: Token ...``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.align.labelstudio import LOCAL_FILES, LabelStudioImport, build_tasks, import_labelstudio, labeling_config
from vhd.errors import BackendError, ConfigError, MissingDependencyError
from vhd.records import Kind

TOKEN_ENV = "LABEL_STUDIO_API_KEY"
"""Environment variable holding the Label Studio access token."""


class LabelStudioApi:
    """The few Label Studio endpoints vhd uses (projects, local storage, import, export)."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 60.0) -> None:
        """Connect to a server.

        Args:
            url: The server, e.g. ``http://127.0.0.1:8080``.
            token: Access token (default: ``$LABEL_STUDIO_API_KEY``).
            timeout: Seconds per request.

        Raises:
            ConfigError: No token.
            MissingDependencyError: httpx is not installed.
        """
        try:
            import httpx
        except ImportError as exc:
            raise MissingDependencyError("httpx", "labelstudio") from exc
        token = token or os.environ.get(TOKEN_ENV)
        if not token:
            raise ConfigError(
                f"no Label Studio token: set {TOKEN_ENV} (Label Studio > Account & Settings > Access Token)"
            )
        self.url = url.rstrip("/")
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Token {token}"}, timeout=timeout, trust_env=False
        )

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()

    def __enter__(self) -> LabelStudioApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, raw: bool = False, **kwargs: Any) -> Any:
        """One API call; the decoded JSON (the body's bytes with ``raw``, or when it is not JSON).

        Raises:
            BackendError: The server cannot be reached or answers with an error (status and reason).
        """
        import httpx

        try:
            resp = self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise BackendError(f"Label Studio at {self.url} cannot be reached ({exc}): is it running?") from None
        if resp.status_code == 401:
            raise ConfigError(f"Label Studio at {self.url} refused the token (401): check {TOKEN_ENV}")
        if resp.status_code >= 400:
            raise BackendError(f"Label Studio {method} {path} answered {resp.status_code}: {resp.text[:200]}")
        if not raw and "json" in resp.headers.get("content-type", ""):
            return resp.json()
        return resp.content

    def find_project(self, title: str) -> int | None:
        """The id of the project with this title, or None."""
        page: str | None = "/api/projects?page_size=100"
        while page:
            got = self.request("GET", page)
            items = got.get("results", []) if isinstance(got, dict) else got
            for p in items:
                if p.get("title") == title:
                    return int(p["id"])
            nxt = got.get("next") if isinstance(got, dict) else None
            page = nxt[len(self.url) :] if isinstance(nxt, str) and nxt.startswith(self.url) else nxt
        return None

    def create_project(self, title: str, label_config: str) -> int:
        """Create a project; its id."""
        return int(self.request("POST", "/api/projects", json={"title": title, "label_config": label_config})["id"])

    def ensure_local_storage(self, project: int, folder: str) -> int:
        """A Local Storage of ``folder`` on the project (reused when one exists); its id."""
        for st in self.request("GET", f"/api/storages/localfiles?project={project}"):
            if os.path.normpath(st.get("path") or "") == os.path.normpath(folder):
                return int(st["id"])
        body = {"project": project, "path": folder, "use_blob_urls": True, "title": "vhd media"}
        return int(self.request("POST", "/api/storages/localfiles", json=body)["id"])

    def import_tasks(self, project: int, tasks: list[dict[str, Any]]) -> int:
        """Import tasks (with predictions); how many the server took."""
        got = self.request("POST", f"/api/projects/{project}/import", json=tasks)
        return int(got.get("task_count", len(tasks))) if isinstance(got, dict) else len(tasks)

    def export(self, project: int, export_type: str = "JSON") -> bytes:
        """The project's export (``JSON`` or ``JSON_MIN``) as the server writes it."""
        got = self.request("GET", f"/api/projects/{project}/export", raw=True, params={"exportType": export_type})
        return bytes(got)


@dataclass
class PushResult:
    """What a push did.

    Attributes:
        projects: Project title to id (videos go to ``<NAME> (videos)`` when both kinds are present).
        created: Titles of projects created now (the others existed).
        tasks: Tasks imported.
        with_predictions: Of those, with the annotator's verdict as a pre-annotation.
        storage: The folder given to Label Studio's Local Storage.
    """

    projects: dict[str, int] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    tasks: int = 0
    with_predictions: int = 0
    storage: str = ""


def storage_folder(paths: list[str], media_root: str | os.PathLike[str]) -> str:
    """The folder a Local Storage must cover: the media's common folder, strictly under ``media_root``.

    Raises:
        ConfigError: The media are not strictly below ``media_root`` (Label Studio refuses a
            storage at its document root itself).
    """
    root = os.path.abspath(media_root)
    common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
    if common == root or os.path.commonpath([root, common]) != root:
        raise ConfigError(
            f"the media ({common}) must lie in a folder strictly below --media-root {root}: Label Studio serves "
            "local files only from a storage under LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT; pass its parent"
        )
    return common


def push_labelstudio(
    url: str,
    project: str,
    *,
    store: str | os.PathLike[str] = "vhd.db",
    name: str | None = None,
    config_hash: str | None = None,
    media_root: str | os.PathLike[str] = "/",
    token: str | None = None,
) -> PushResult:
    """Send a store's samples to Label Studio as tasks with pre-annotations.

    Args:
        url: The server.
        project: Project title (created with vhd's labeling config when missing).
        store: The store.
        name: Only this labelled set's samples (default: every annotated sample).
        config_hash: Verdicts of this configuration (default: each sample's latest).
        media_root: The server's ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``.
        token: Access token (default ``$LABEL_STUDIO_API_KEY``).
    """
    from vhd.store.labels import CATEGORIES

    by_kind = build_tasks(
        store=store, name=name, config_hash=config_hash, media_root=media_root, url_prefix=LOCAL_FILES
    )
    if not by_kind:
        raise ConfigError(f"nothing to push from {store}: annotate samples or import a labelled set first")
    paths = [t["data"]["path"] for tasks in by_kind.values() for t in tasks]
    result = PushResult(storage=storage_folder(paths, media_root))
    with LabelStudioApi(url, token) as api:
        for kind, tasks in sorted(by_kind.items(), key=lambda kv: kv[0].value):
            title = f"{project} (videos)" if kind is Kind.VIDEO and len(by_kind) > 1 else project
            pid = api.find_project(title)
            if pid is None:
                pid = api.create_project(title, labeling_config(kind, [n for _, n in CATEGORIES]))
                result.created.append(title)
            result.projects[title] = pid
            api.ensure_local_storage(pid, result.storage)
            result.tasks += api.import_tasks(pid, tasks)
            result.with_predictions += sum("predictions" in t for t in tasks)
    return result


def pull_labelstudio(
    url: str,
    project: str,
    *,
    store: str | os.PathLike[str] = "vhd.db",
    name: str = "labelstudio",
    media_root: str | os.PathLike[str] = "/",
    export_type: str = "JSON",
    save_to: str | os.PathLike[str] | None = None,
    token: str | None = None,
) -> LabelStudioImport:
    """Download a project's export and import its decisions as a labelled set.

    Args:
        url: The server.
        project: Project title.
        store: The store.
        name: The labelled set to write.
        media_root: The server's document root (to match tasks by their media URL).
        export_type: ``JSON`` or ``JSON_MIN``.
        save_to: Keep the downloaded export here (default: a temporary file, removed).
        token: Access token (default ``$LABEL_STUDIO_API_KEY``).

    Raises:
        ConfigError: No such project, no token, or an unusable export.
    """
    from vhd.fileio import atomic_write

    with LabelStudioApi(url, token) as api:
        pid = api.find_project(project)
        if pid is None:
            raise ConfigError(f"no project {project!r} on {url}: check --project (push it first)")
        body = api.export(pid, export_type)
    if save_to is not None:
        atomic_write(Path(save_to), body)
        return import_labelstudio(save_to, store=store, name=name, media_root=media_root)
    with tempfile.TemporaryDirectory(prefix="vhd-ls-") as tmp:
        path = Path(tmp) / "export.json"
        path.write_bytes(body)
        return import_labelstudio(path, store=store, name=name, media_root=media_root)
